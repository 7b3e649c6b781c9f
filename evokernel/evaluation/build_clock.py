"""A build's own clock: its wall time less what the node held it back (issue 37).

Why: a candidate's timeout is wall-clock, and a build on a loaded node waits for a CPU. Under 16
cold builds on a 16-core H200 (session 30), PIKE's orig/task_16, whose ``.cu`` fails to compile
and gets three attempts, passed its 300 s timeout in the build; in an unloaded run the same file
took 163 s and reached its verdict (own-kernel). A wall-clock limit turns the pool's load into
the candidate's verdict: ``timeout`` where the compiler's error (what an LLM's fix needs) or a
later stage's verdict belonged. The GPU lock's waits already extend a supervisor's deadline
(gpulock.py: the pool's doing, not the candidate's); this does the same for a build's CPU.

What counts as held back, from the scheduler's own figures for every process of the build's
tree (walked from its root through ``/proc/<pid>/task/<pid>/children`` every
:data:`PERIOD_S`):

* **waiting for a CPU**: ``/proc/<pid>/schedstat``'s run-queue wait (host_speed.schedstat), over
  an interval the summed waits of the tree's busy processes divided by how many were busy (two
  compilers side by side each waiting half the time held the build back half the time, not all);
* **stopped**: a member in state ``T`` (a quiet window's SIGSTOP, quiet.py, which stops every
  compiler of the node while a candidate is timed) holds the whole build for the interval;
* **the watcher held**: the window stops the watching supervisor too (its session is one of the
  node's evaluations), so it may find the build running again when it looks next. The watcher
  looks every few tens of milliseconds; in a gap over :data:`GAP_S` between two looks, the time
  it neither ran nor waited for a CPU (its own schedstat) is time it was stopped with the build.

Time a compiler spends on a CPU, asleep or reading files is the build's own. Sampling misses the
last interval of a process that exits between two looks (its wait then goes uncounted: the
clock errs towards the wall's). What it credits is capped (``cap_s``; the supervisor passes its
timeout, so a build held back without end still ends, at twice the timeout at most).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from evokernel.evaluation.host_speed import own_schedstat, schedstat
from evokernel.evaluation.sessions import session_of

# A compile lasts seconds; a quiet window 2-8 s. Four readings a second of a build's ~6 processes
# cost ~0.3 ms each (2-core CI machine, busy) and place a window's edges within a quarter second.
PERIOD_S = 0.25
# The caller looks every ~20 ms (confined_build.POLL_S): a gap of half a second is not its sleep.
GAP_S = 0.5


def tree(roots: Iterable[int]) -> list[int]:
    """``roots`` and every live descendant (the children of each one's main thread: ninja and the
    compiler drivers start theirs from it)."""
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                todo.extend(int(child) for child in f.read().split())
        except (OSError, ValueError):
            continue  # gone, or a kernel without the children file: the root alone
    return seen


def stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (a signal's stop, or a tracer's)."""
    found = session_of(pid)
    return found is not None and found[1] in (b"T", b"t")


class BuildClock:
    """Seconds the build rooted at ``roots`` was held back (:attr:`held_s`), up to ``cap_s``;
    call :meth:`look` every few tens of milliseconds from one thread, it reads the tree every
    :data:`PERIOD_S`."""

    def __init__(self, roots: Iterable[int], cap_s: float, period_s: float = PERIOD_S) -> None:
        self.roots = list(roots)
        self.cap_s = max(0.0, cap_s)
        self.period_s = period_s
        self.held_s = 0.0
        self.stopped_s = 0.0
        self.waited_s = 0.0
        self._last = self._called = time.perf_counter()
        self._own = own_schedstat()
        # pid -> (ns on a CPU, ns waiting on a run queue) at the last reading.
        self._seen: dict[int, tuple[int, int]] = {}

    def look(self) -> float:
        """Read the tree if a period has passed; the seconds held back so far."""
        now = time.perf_counter()
        gap, self._called = now - self._called, now
        own = own_schedstat()
        own_s = (own[0] - self._own[0] + own[1] - self._own[1]) / 1e9
        self._own = own
        if self.cap_s <= 0:
            return 0.0
        # A long gap in which the watcher neither ran nor waited for a CPU: it was stopped, and
        # with it the build (a quiet window stops both), which may be running again by now.
        watcher_stopped = max(0.0, gap - own_s) if gap > GAP_S else 0.0
        span = now - self._last
        if span < self.period_s and not watcher_stopped:
            return self.held_s
        self._last = now
        members = tree(self.roots)
        figures = {pid: schedstat(f"/proc/{pid}/schedstat") for pid in members}
        seen, self._seen = self._seen, figures
        if any(stopped(pid) for pid in members):
            self.stopped_s += span
            return self._credit(span)
        waits: list[float] = []
        for pid, (ran, waited) in figures.items():
            ran_before, waited_before = seen.get(pid, (0, 0))
            if ran < ran_before or waited < waited_before:  # a new process under a reused pid
                ran_before = waited_before = 0
            if ran > ran_before or waited > waited_before:
                waits.append((waited - waited_before) / 1e9)
        waited_s = sum(waits) / len(waits) if waits else 0.0
        held = min(span, watcher_stopped + waited_s)
        self.stopped_s += min(held, watcher_stopped)
        self.waited_s += held - min(held, watcher_stopped)
        return self._credit(held)

    def _credit(self, seconds: float) -> float:
        self.held_s = min(self.cap_s, self.held_s + seconds)
        return self.held_s
