"""Core-seconds an evaluation spends, per stage: where a CPU-bound node's time goes (issue 23).

At 16 candidates in flight a GPU node is CPU-bound (59 core-seconds per real level-3 CUDA
candidate, measured), so the wall seconds of a stage say little about what it costs the node: a
build that waits for a core is slow without being expensive. The supervisor reads this counter at
every stage boundary; a stage's ``cpu_s`` is the user + system time of the supervisor, of its
worker and of everything either has waited for (compilers run by ninja, nvcc's own children,
Nsight Compute) spent during it.

A live worker is read from ``/proc/<pid>/stat`` (its own time and that of the children it has
reaped); once the supervisor has reaped it, its whole usage is in the supervisor's children
times, so the sum counts each second once either way. Elsewhere than Linux the worker reads as 0.
"""

from __future__ import annotations

import os
from pathlib import Path

# The unit of /proc/<pid>/stat and /proc/stat times.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_tree_seconds(pid: int) -> float:
    """User + system seconds of ``pid`` and of the children it has reaped; 0 if unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # Fields after the command name (which may hold spaces and parentheses): state is field 3,
    # utime, stime, cutime, cstime are fields 14-17.
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return sum(int(x) for x in fields[11:15]) / CLOCK_TICKS
    except ValueError:
        return 0.0


def supervisor_seconds(worker_pid: int | None) -> float:
    """This process's user + system seconds, its reaped children's, and those of ``worker_pid``
    (a child not reaped yet; None once it has been)."""
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    return own + (process_tree_seconds(worker_pid) if worker_pid is not None else 0.0)
