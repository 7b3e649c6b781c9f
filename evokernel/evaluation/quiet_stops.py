"""What a quiet window stopped, kept on disk so that it outlives the keeper that stopped it.

A keeper (quiet.py) continues what it stopped when its window ends, when the asker dies and when
its actor dies; it cannot when it is killed itself, and Ray kills an actor's child processes with
the actor (``ray.kill``: a child in a session of its own included, seen here). Another actor's
evaluations stopped by that keeper would then stay stopped until their own timeouts (which fits,
unproven, a run in ``test_cluster_nodes`` that stalled for the 120 s timeout after a node loss).
So a keeper writes the list before it stops anything, deletes it once it has continued them, and
every keeper of the node continues the processes of lists whose keeper is gone, as it starts and
then every ``SWEEP_S``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from pathlib import Path

SWEEP_S = 0.5
_lists = itertools.count()


def stat(pid: str) -> tuple[str, int, int, int] | None:
    """(comm, ppid, session, start time) of ``pid``, or None when it is gone (a zombie is: it
    has nothing left to stop, and a dead session leader's session is over)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    comm = raw[raw.index(b"(") + 1 : raw.rindex(b")")].decode(errors="replace")
    fields = raw[raw.rindex(b")") + 2 :].split()
    if fields[0] in (b"Z", b"X"):
        return None
    return comm, int(fields[1]), int(fields[3]), int(fields[19])


def signal_all(pids: list[tuple[int, int]], sig: int) -> int:
    """Send ``sig`` to each (pid, start time) still the process it was; how many got it."""
    done = 0
    for pid, started in pids:
        info = stat(str(pid))
        if info is None or info[3] != started:  # gone, or the pid was reused
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            done += 1
    return done


def record(registry: Path, stopped: list[tuple[int, int]]) -> Path:
    """Write the calling keeper's list of what it is about to stop; returns the file."""
    me = stat(str(os.getpid()))
    directory = registry / "stopped"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{os.getpid()}-{me[3] if me else 0}-{next(_lists)}"
    temporary = path.with_suffix(".tmp")
    temporary.write_text("".join(f"{pid} {started}\n" for pid, started in stopped))
    temporary.replace(path)  # a sweep never reads half a list
    return path


def continue_orphans(registry: Path) -> int:
    """Continue every process on a list whose keeper is gone, and delete the list; how many."""
    directory = registry / "stopped"
    continued = 0
    for path in directory.glob("*-*-*") if directory.is_dir() else ():
        pid, started, _ = path.name.split("-", 2)
        keeper = stat(pid)
        if path.suffix or (keeper is not None and str(keeper[3]) == started):
            continue  # a list being written, or its keeper lives
        try:
            lines = path.read_text().split("\n")
        except OSError:
            continue  # another keeper swept it first
        entries = [tuple(map(int, line.split())) for line in lines if line.strip()]
        continued += signal_all([(p, s) for p, s in entries], signal.SIGCONT)
        path.unlink(missing_ok=True)
    return continued
