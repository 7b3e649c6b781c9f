"""How a timed call is issued and read on a GPU, for :mod:`evokernel.evaluation.timing` and
:mod:`evokernel.evaluation.block_timer` alike.

Every call is bracketed by CUDA events after an L2 flush (a 256 MiB write: H100's L2 is 50 MiB,
H200's 60 MiB), so a kernel never profits from data left in cache by the previous repetition, and
a batch's events are read after one synchronize. Warm-up (:func:`settle_clock`) is the same calls
with their samples discarded, in windows of ``SETTLE_WINDOW_MS``, until the last
``SETTLE_WINDOWS`` windows' interquartile means agree (timing.py says why).

**Where a call starts** (``call_start``). Calls are queued back to back, each behind its flush,
and their events read after one synchronize per batch (``queued``, the method until session 25).
The flush is ~60-80 us of GPU work that the host does not wait for, so while the host issues a
call the GPU is still flushing: a call issued faster than the flush runs from a full queue and
its events hold only its GPU time; a slower one's hold its issue time *less* the flush's. For a
host-bound call that is a figure of neither kind, and it amplifies the host's speed: VanillaRNN's
eager reference spent 0.115-0.150 ms issuing each call and its events said 0.024-0.048 ms in
windows of the same run on an H200 (session 22), and with the flush F taken from both sides of a
pair a uniform host slowdown s moves (s h_ref - F) / (s h_cand - F) where h_ref / h_cand does not
move. ``idle`` waits for the flush before each call's first event: the events then hold the call's
latency from an idle GPU (issue time for a host-bound call; for a GPU-bound one its GPU time plus
the host's issuing up to its kernel, not just one launch: +27-90 us on a 4096^2 fp32 cuBLAS matmul
of ~2.7 ms on the H200, session 26), which moves with the host one to one on both sides of a pair.
Side by side on the 24 kernels that had moved most (session 26, docs/benchmarks.md) neither start
was steadier between runs, and ``idle`` keeps the host's own two speeds, so ``queued`` stays the
default.
KernelBench's ``cuda_event`` method flushes and records its start without waiting, as ``queued``
does; its ``host_time`` waits, as ``idle`` does. timing.py's CUDA-graph replays are not flushed
and start queued either way: their difference removes what a replay's start costs. Under ``idle``
a tiny kernel's events hold mostly its launch, so whether a call is launch-bound is decided by its
graph figure, taken for any call within ``IDLE_LAUNCH_US`` of the bound
(:func:`evokernel.evaluation.timing.finish_cuda`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.timing_stats import _interquartile_mean

L2_FLUSH_BYTES = 256 * 1024 * 1024
SETTLE_WINDOW_MS = 5.0
SETTLE_WINDOWS = 3
BATCH = 10

Pairs = list[tuple[torch.cuda.Event, torch.cuda.Event]]


def idle_start(settings: TimingConfig) -> bool:
    return settings.call_start == "idle"


def idle_issue_ms(fn: Callable[[], Any], flush: torch.Tensor, reps: int) -> list[float]:
    """The host's time (ms, sorted) to issue ``fn`` onto an idle GPU right after an L2 flush, as
    ``idle`` issues each call: what ``idle`` adds to a GPU-bound call's figure (session 26)."""
    times = []
    for _ in range(reps):
        flush.zero_()
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    torch.cuda.synchronize()
    return sorted(times)


def enqueue_batch(
    fn: Callable[[], Any],
    flush: torch.Tensor | None,
    n: int = BATCH,
    prepare: Callable[[], Any] | None = None,
    host: list[tuple[int, int]] | None = None,
    idle: bool = False,
) -> Pairs:
    """Queue ``n`` event-bracketed calls, each after ``prepare`` and an L2 flush when given; events
    are read after one synchronize (:func:`collect_batch`). ``idle`` (``call_start``, above): each
    flushed call starts once the GPU has finished everything before it, the flush included.
    ``host`` receives each call's ``(wall ns, thread CPU ns)`` from before its first event to after
    its last (block_timer.py): the clock reads sit outside the events, so they time nothing."""
    pairs = []
    for _ in range(n):
        if prepare is not None:
            prepare()
        if flush is not None:
            flush.zero_()
            if idle:
                torch.cuda.synchronize(flush.device)
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if host is not None:
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        begin.record()
        fn()
        end.record()
        if host is not None:
            host.append((time.perf_counter_ns() - wall, time.thread_time_ns() - cpu))
        pairs.append((begin, end))
    return pairs


def collect_batch(pairs: Pairs, device: torch.device) -> list[float]:
    torch.cuda.synchronize(device)
    return [b.elapsed_time(e) for b, e in pairs]


def settle_clock(
    fn: Callable[[], Any],
    device: torch.device,
    settings: TimingConfig,
    flush: torch.Tensor | None,
    prepare: Callable[[], Any] | None = None,
) -> tuple[float, bool]:
    """Discarded windows of timed calls until the clock is steady: (milliseconds spent, settled)."""
    start = time.perf_counter()
    cap = max(settings.settle_max_ms, settings.warmup_ms)
    windows: list[float] = []
    while True:
        window_start = time.perf_counter()
        samples: list[float] = []
        while not samples or (time.perf_counter() - window_start) * 1e3 < SETTLE_WINDOW_MS:
            pairs = enqueue_batch(fn, flush, prepare=prepare, idle=idle_start(settings))
            samples += collect_batch(pairs, device)
        windows.append(_interquartile_mean(samples))
        elapsed = (time.perf_counter() - start) * 1e3
        recent = windows[-SETTLE_WINDOWS:]
        spread = max(recent) - min(recent)
        steady = len(recent) == SETTLE_WINDOWS and spread <= settings.settle_tol * min(recent)
        if steady and elapsed >= settings.warmup_ms:
            return elapsed, True
        if elapsed >= cap:
            return elapsed, False
