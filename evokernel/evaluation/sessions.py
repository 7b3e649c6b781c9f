"""Kill a candidate's whole session, not only its process group.

The supervisor leads a new session and process group. ``killpg`` reaches only that group, but a
process may move to another group of the same session (ninja puts every compile in its own, with
``setpgid``; a candidate could do the same to outlive the kill). The seccomp filter refuses
``setsid``, so nothing under the supervisor can leave its session, and this sweep finds every
member by the session id in ``/proc/<pid>/stat``.

A whole sweep is slower than a fork: 3.2 ms for 224 processes on a 2-core CI machine, against a
chain of children whose parents exit that moves to a new pid every ~2 ms. So each member is
stopped the moment its stat is read, most recently allocated pid first (a fork takes the next
pid; ``_pids_newest_first`` says how a wrap is handled), not after the sweep, and stopping ends
only after ``QUIET_SWEEPS`` empty sweeps in a row. Session 30, a chain killed under 2 busy CPUs
and 300 other processes, judged by whether the kernel's last pid still moved a second later:
stopping after the sweep and ending on the first empty one lost 6 of 6 chains (one in the suite
ran on for ten minutes); stopping as found lost 5 of 6; with the empty sweeps in a row, 0 of 12.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

# A sweep can find nothing to stop while the chain goes on: its live end forked and exited between
# the listing and the read of its stat, and its child was not listed. Stopping ends only after
# this many empty sweeps in a row.
QUIET_SWEEPS = 4
# Each sweep first reads the pids around the kernel's last allocated one by number: a chain's live
# end is there, while listing /proc on a node of 1,500 processes takes longer than a chain link
# lives (session 34, 2 cores: 9 of 20 chains outran the kill there without it, 0 of 20 with it;
# experiments/bench/fork_chain_kill.py). AHEAD_PROBE: pids allocated between the read and the probe.
NEWEST_PROBE = 24
AHEAD_PROBE = 4
LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def session_of(pid: int) -> tuple[int, bytes] | None:
    """``pid``'s session id and state letter, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None  # gone while we looked
    # Fields after the command name (which may hold spaces and parentheses): state ppid pgrp session.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[3]), fields[0]) if len(fields) > 3 else None


def _pids_newest_first() -> list[int]:
    """Every pid but this process's, the most recently allocated first: down from the kernel's
    last allocated pid, then down from the top (pids wrap at ``pid_max``, 32768 by default, which
    a fork chain passes in about a minute; in plain descending order its live end, at small pids
    after a wrap, is read last)."""
    me = os.getpid()
    pids = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != me]
    try:
        last = int(LAST_PID.read_text())
    except (OSError, ValueError):
        last = max(pids, default=0)
    return sorted(pids, key=lambda pid: (pid > last, -pid))


def session_members(sid: int, zombies: bool = True) -> list[int]:
    """Pids whose session id is ``sid`` (excluding this process; zombies, which run nothing and
    wait only to be reaped, unless ``zombies``)."""
    members = []
    for pid in _pids_newest_first():
        found = session_of(pid)
        if found is not None and found[0] == sid and (zombies or found[1] != b"Z"):
            members.append(pid)
    return members


def _stop_fresh(sid: int, stopped: set[int]) -> bool:
    """One sweep: SIGSTOP each running member of ``sid`` not in ``stopped`` as soon as it is read
    (the module says why), the pids the kernel allocated last first; whether it found any."""
    found = _stop_newest(sid, stopped)
    for pid in _pids_newest_first():
        found = _stop_member(sid, pid, stopped) or found
    return found


def _stop_newest(sid: int, stopped: set[int]) -> bool:
    """SIGSTOP members of ``sid`` among the :data:`NEWEST_PROBE` pids at and just above the
    kernel's last allocated one, read by number with no listing: a chain's live end holds one
    of them, and the listing of a crowded node outlasts a link's life. Whether it found any."""
    try:
        last = int(LAST_PID.read_text())
    except (OSError, ValueError):
        return False
    found = False
    for pid in range(last + AHEAD_PROBE, last + AHEAD_PROBE - NEWEST_PROBE, -1):
        found = (pid > 0 and _stop_member(sid, pid, stopped)) or found
    return found


def _stop_member(sid: int, pid: int, stopped: set[int]) -> bool:
    """SIGSTOP ``pid`` if it is a running member of ``sid`` not stopped yet; whether it was."""
    if pid in stopped:
        return False
    member = session_of(pid)
    if member is None or member[0] != sid or member[1] == b"Z":  # a zombie cannot fork
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGSTOP)
    stopped.add(pid)
    return True


def kill_session(sid: int, limit_s: float = 2.0) -> int:
    """SIGKILL every member of session ``sid``. Members are stopped first, sweep after sweep, until
    a sweep finds none it has not stopped: a stopped process cannot fork, so a tree that forks and
    re-parents as fast as it can (a chain of children whose parents exit) is caught whole instead of
    outrunning a fixed number of kill sweeps (issue 33: one survived five). Returns how many were
    signalled; ``limit_s`` bounds the stopping."""
    stopped: set[int] = set()
    deadline = time.monotonic() + limit_s
    quiet = 0  # sweeps in a row that found nothing to stop
    while quiet < QUIET_SWEEPS and time.monotonic() < deadline:
        quiet = 0 if _stop_fresh(sid, stopped) else quiet + 1
        time.sleep(0.0005 * quiet)  # a member that was mid-fork comes into view
    killed = 0
    for pid in set(session_members(sid, zombies=False)) | stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def wait_gone(sid: int, limit_s: float = 2.0) -> bool:
    """Wait until no process of session ``sid`` is left (SIGKILL is delivered asynchronously);
    whether none was left within ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while session_members(sid, zombies=False):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
