"""Kill a candidate's whole session, not only its process group.

The supervisor leads a new session and process group. ``killpg`` reaches only that group, but a
process may move to another group of the same session (ninja puts every compile in its own, with
``setpgid``; a candidate could do the same to outlive the kill). The seccomp filter refuses
``setsid``, so nothing under the supervisor can leave its session, and this sweep finds every
member by the session id in ``/proc/<pid>/stat`` (~1 ms for a few hundred processes).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time


def session_members(sid: int, zombies: bool = True) -> list[int]:
    """Pids whose session id is ``sid`` (excluding this process; zombies, which run nothing and
    wait only to be reaped, unless ``zombies``)."""
    members = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone while we looked
        # Fields after the command name (which may hold spaces and parentheses): state ppid pgrp session.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 3 and int(fields[3]) == sid and (zombies or fields[0] != b"Z"):
            members.append(int(name))
    return members


def kill_session(sid: int, limit_s: float = 2.0) -> int:
    """SIGKILL every member of session ``sid``. Members are stopped first, sweep after sweep, until
    a sweep finds none it has not stopped: a stopped process cannot fork, so a tree that forks and
    re-parents as fast as it can (a chain of children whose parents exit) is caught whole instead of
    outrunning a fixed number of kill sweeps (issue 33: one survived five). Returns how many were
    signalled; ``limit_s`` bounds the stopping."""
    stopped: set[int] = set()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        fresh = [pid for pid in session_members(sid) if pid not in stopped]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
    killed = 0
    for pid in set(session_members(sid)) | stopped:
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
