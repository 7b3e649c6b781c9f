"""Time pairs only while the window's CPU runs at its full speed (issue 35).

One CPU for both sides (cpu_pin.py) makes the host's speed shared, which cancels it when both
sides are host-bound. It does not cancel when one side is host-bound and the other is not: a
GPU-bound candidate (a CUDA graph, a fused kernel) against a level-3 eager reference, whose time
*is* the host's speed. On the H100 one eager call took 2.03-2.2 ms on about two thirds of the
vCPUs and 2.7-4.0 ms on the rest, other CPUs from one second to the next
(``experiments/bench/eager_per_core.py``), so two runs' windows on a fast and on a slow CPU gave
orig/task_9 6.02x and 4.44x, each +-1 %. nvbench leaves out samples taken while the GPU was
throttled; this is the same for the host: the window takes the fastest CPU it can claim, measured
by a short fixed spin on each, a spin on the window's CPU comes before every round of pairs, and a
round whose spin took more than ``host_slowdown_limit`` times the fastest spin the window has seen
is left out of the ratio; the window then moves to the fastest free CPU (at most ``MAX_MOVES``
times). The spin is plain interpreter work, as the host side of an eager call is: an SMT sibling
busy under the hypervisor, a lower clock or a stolen slice slows both alike.

What a spin cannot see is a CPU shared in time slices longer than itself: in two identical H200
runs (2026-11-26, docs/benchmarks.md) ResNet-18's eager reference took 1.27 ms in every window of
one run and 3.75 ms in every window of the other, with tight intervals, the candidate's 0.364 ms
GPU-bound call unmoved and every spin fast. So a round is also judged after it ran: each worker's
calling thread's run-queue wait in its block (cpu_pin.ThreadWait, cpu_pin.WindowCpu.undisturbed)
and the reference's own calls' time off the CPU (wall minus thread CPU time, which excludes time stolen
below the VM where the kernel accounts steal: block_timer.BlockTimer.disturbed), each against
the same limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from evokernel.config.schema import TimingConfig

# ~0.3 ms of interpreter work on the H100's host: long enough to span a stolen slice, short
# against a round of pairs (two blocks of ~10 ms), so the gate costs ~1.5 % of a window.
SPIN_ITERATIONS = 8000
MAX_MOVES = 3


def spin_us(iterations: int = SPIN_ITERATIONS) -> float:
    """Microseconds the calling thread takes for a fixed piece of interpreter work. What it sees:
    a slower clock or a busy SMT sibling. What it cannot see at ~0.3 ms: a CPU shared in time
    slices (a scheduler slice is ~3 ms, and a thread just moved to a CPU runs its slice first)."""
    start = time.perf_counter_ns()
    total = 0
    for i in range(iterations):
        total += i * i % 7
    elapsed = time.perf_counter_ns() - start
    del total
    return elapsed / 1e3


def settled_spin_us() -> float:
    """The faster of two spins: the first after a move to another CPU runs on cold caches."""
    return min(spin_us(), spin_us())


Spin = Callable[[], float]


# What a spin cannot see, the scheduler's own accounting can: /proc/<pid>/task/<tid>/schedstat is
# "<ns on a CPU> <ns runnable but waiting on a run queue> <slices>" (CONFIG_SCHED_INFO, on in every
# distribution kernel). A pinned thread that waited on its CPU's run queue during a round was slowed
# by exactly that wait, whatever took the CPU (a thread the scheduler put there, a neighbour pinned
# there, a wake-up of our own), and a 0.4 ms spin run in the first slice after a move never sees it.


def schedstat(path: str) -> tuple[int, int]:
    """``(ns on a CPU, ns waiting on a run queue)`` of the thread at ``path``; (0, 0) when it is
    gone or the kernel does not keep the figures."""
    try:
        with open(path) as f:
            fields = f.read().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return 0, 0


def own_schedstat() -> tuple[int, int]:
    """:func:`schedstat` of the calling thread, its CPU time from the thread clock: the file's
    figure for a running thread lags by up to a scheduler tick (measured here: 0.88 of a busy
    3 ms block)."""
    return time.thread_time_ns(), schedstat("/proc/thread-self/schedstat")[1]


def issued_past_events(host: Mapping[str, Any] | None, event_ms: float) -> bool:
    """Whether a side's host took longer to issue one call (block_timer.BlockTimer.host's
    ``issue_ms``) than the call's events timed: the host's speed is that side's time, and the
    host's state moves between windows in a way pairing cancels only when the other side is as
    host-bound. This tells a host-bound side under ``call_start=queued`` (the default, and every
    run the spreads were measured on), where the flush hides a host-bound call's issuing from its
    events; under ``idle`` the events hold the issuing too and a host-bound side may not show.
    The candidate's record comes from its worker: anything but a finite number says nothing."""
    issue = (host or {}).get("issue_ms")
    if isinstance(issue, bool) or not isinstance(issue, int | float) or not math.isfinite(issue):
        return False
    return issue > event_ms


def window_spread(
    settings: TimingConfig,
    a_ms: float,
    b_ms: float,
    a_host: Mapping[str, Any] | None,
    b_host: Mapping[str, Any] | None,
) -> float:
    """The spread between windows to add to a paired interval (pairing.with_window_spread):
    ``window_spread_host_bound`` when either side issued past its events, else ``window_spread``
    (on four pairs of identical H200 runs, 2.9-4.1 % against 0-0.33 %: docs/benchmarks.md)."""
    if issued_past_events(a_host, a_ms) or issued_past_events(b_host, b_ms):
        return settings.window_spread_host_bound
    return settings.window_spread
