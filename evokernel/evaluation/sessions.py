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


def session_members(sid: int) -> list[int]:
    """Pids whose session id is ``sid`` (excluding this process)."""
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
        if len(fields) > 3 and int(fields[3]) == sid:
            members.append(int(name))
    return members


def kill_session(sid: int, rounds: int = 5) -> int:
    """SIGKILL every member of session ``sid``; repeated because a member may fork while the sweep
    runs. Returns how many were signalled."""
    killed = 0
    for _ in range(rounds):
        members = session_members(sid)
        if not members:
            break
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed
