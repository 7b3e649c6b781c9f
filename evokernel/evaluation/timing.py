"""Timing of one callable, the same way for candidates and baselines.

On a GPU every timed call is bracketed by CUDA events after an L2 flush (a 256 MiB write: H100's
L2 is 50 MiB, H200's 60 MiB), so a kernel never profits from data left in cache by the previous
repetition. Repetitions continue until the relative standard error of the median drops under
``target_rse`` (or a time/count cap); the median, IQR, p10/p90 and coefficient of variation are
reported. On a CPU the same loop runs with ``perf_counter``.

**Warmup settles the clock.** An idle H100 sits at ~345 MHz and boosts to ~1980 MHz only under
sustained work, so a fixed short warmup can start the timed loop at a low clock. Warmup is the
timed loop itself with its samples discarded, in windows of ``SETTLE_WINDOW_MS``, until the last
``SETTLE_WINDOWS`` windows' interquartile means agree within ``settle_tol`` and at least
``warmup_ms`` have passed, capped at ``settle_max_ms`` (``settled`` says which ended it). The SM
clock is read from NVML (:mod:`evokernel.evaluation.clocks`) before the warmup and while timed
batches are in flight, never set.

**Launch-bound calls.** Under ~20 µs an event-timed call is a few event ticks (~0.5 µs
resolution) after a 256 MiB flush, and its median moved by 30-330 % between fresh processes on an
H100. When the event p10 is under ``launch_bound_us`` (or always with ``cuda_graph``) a second
figure is taken from CUDA graphs of n and 2n back-to-back calls: (replay(2n) - replay(n)) / n.
It is the per-call GPU time with launch overhead removed and the (small) working set warm in L2;
:func:`comparable` uses it for a speedup only when both sides are launch-bound and have it, so a
speedup always compares two figures taken the same way. Two choices there come from fresh-process
repeats on an H100 (benchmarks.md, session 8): the p10, not the median, because host stalls only
lengthen event-timed calls (a stalled process measured a 4.4 µs axpy at a median of 10-25 µs, p10
4.3 µs, and once called it not launch-bound at all); and the difference of two replays, because
replay / n carries a replay's fixed cost divided by n (~2.6 µs in a quiet process: 1.375 µs per
call at n = 46 against 1.318 by the difference) and, with few calls in a stalled process, host
gaps too (1.72 µs at n = 20, 1.87 at n = 14). The same eager reference measured 2.41 and 2.78 µs
at two places of one process by replay / n, 2.66-2.71 at both by the difference.

**Baselines get a longer window** (``baseline_min_ms``, :meth:`TimingSettings.for_baseline`): a
baseline is timed once per (task, GPU, software) and cached, so 1 s costs nothing per candidate,
and cuBLAS under the power cap shifts between ~180 and ~184 µs (matmul_fp16) from one 100 ms window
to the next, which moved speedups by up to 3 % between fresh processes.

**How a call is issued and read** (the L2 flush, where the call starts: ``call_start``, the
events read once per batch): :mod:`evokernel.evaluation.timed_calls`.

The host-clock figures beside the event ones (``wall_median_ms``, ``stream_tail_ms``, ...) are
:mod:`evokernel.evaluation.host_clock`'s, for the side-stream check.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.clocks import clock_state, sm_clock_mhz
from evokernel.evaluation.host_clock import CONTENDED_PROBE_MS, wall_medians
from evokernel.evaluation.timed_calls import (
    L2_FLUSH_BYTES,
    collect_batch,
    enqueue_batch,
    idle_start,
    settle_clock,
)
from evokernel.evaluation.timing_stats import (
    TimingResult,
    _summary,
    comparable,
    median_rse,
)

__all__ = [
    "L2_FLUSH_BYTES",
    "TIMING_METHOD",
    "TimingResult",
    "TimingSettings",
    "comparable",
    "finish_cuda",
    "median_rse",
    "time_callable",
    "timing_method",
]

# Part of the baseline cache key (baselines.software_versions): a baseline timed by an older
# method is measured again rather than compared with a candidate timed by this one.
TIMING_METHOD = "settled-4"
# A graph replay holds enough calls for ~200 µs of GPU time: far above the event resolution.
GRAPH_REPLAY_MS = 0.2
GRAPH_MAX_CALLS = 100
# Under call_start=idle, how far over launch_bound_us a call's latency may be and its graph figure
# still be taken to decide whether it is launch-bound (finish_cuda).
IDLE_LAUNCH_US = 50.0


# The sandbox's name for the config's timing section: one class, so the two cannot drift apart.
TimingSettings = TimingConfig


def time_callable(
    fn: Callable[[], Any],
    device: torch.device,
    settings: TimingSettings,
    prepare: Callable[[], Any] | None = None,
) -> TimingResult:
    """``prepare`` runs before every timed call, outside its timed window (before the L2 flush on a
    GPU): a candidate's timing refills its input buffers with other values there, so a result
    cached by the inputs' identity is stale and shows (worker.py)."""
    start = time.perf_counter()
    if device.type != "cuda":
        result = _time_cpu(fn, settings, prepare)
    else:
        flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
        result = _time_cuda(fn, device, settings, flush, prepare)
        del flush
        result = finish_cuda(fn, device, settings, result)
    return replace(result, seconds=round(time.perf_counter() - start, 4))


def finish_cuda(
    fn: Callable[[], Any], device: torch.device, settings: TimingSettings, result: TimingResult
) -> TimingResult:
    """The figures taken after the event samples: the host-clock ones (the side-stream check's)
    and, for a launch-bound call, the CUDA-graph per-call figure."""
    walls = wall_medians(fn, device)
    fastest_ms = result.p10_ms or result.median_ms  # host stalls only lengthen calls
    launch_bound = 0 < fastest_ms * 1e3 < settings.launch_bound_us
    graph = None
    if idle_start(settings) and settings.launch_bound_us > 0:
        # An idle start's events hold the call's latency, a launch's dispatch (5-20 us) over its
        # GPU time: a 4 us kernel is not under the bound by them. Its graph figure (GPU time per
        # call) decides, taken for any call within IDLE_LAUNCH_US of the bound.
        if settings.cuda_graph or 0 < fastest_ms * 1e3 < settings.launch_bound_us + IDLE_LAUNCH_US:
            graph = _time_graph(fn, device, settings, fastest_ms)
        launch_bound = graph[0] * 1e3 < settings.launch_bound_us if graph else launch_bound
    elif settings.cuda_graph or launch_bound:
        graph = _time_graph(fn, device, settings, fastest_ms)
    return replace(
        result,
        wall_median_ms=walls["wall"],
        sync_wait_ms=walls["wait"],
        probe_wall_ms=walls["probe_wall"],
        probe_wait_ms=walls["probe_wait"],
        stream_tail_ms=walls["tail"],
        probe_tail_ms=walls["probe_tail"],
        tail_excess_ms=walls["tail_excess"],
        contended=walls["probe_wall"] > CONTENDED_PROBE_MS,
        graph_median_ms=graph[0] if graph else None,
        graph_calls=graph[1] if graph else None,
        launch_bound=launch_bound,
    )


def _time_graph(
    fn: Callable[[], Any], device: torch.device, settings: TimingSettings, per_call_ms: float
) -> tuple[float, int] | None:
    """Per-call time from graphs of n and 2n calls, (replay(2n) - replay(n)) / n, and 2n; or None
    when the call cannot be captured (host syncs, allocations the graph pool cannot serve: a
    property of the kernel) or the difference is not positive (no figure rather than a wrong one).
    n makes one replay ~``GRAPH_REPLAY_MS`` of GPU time."""
    calls = max(1, min(GRAPH_MAX_CALLS // 2, math.ceil(GRAPH_REPLAY_MS / max(per_call_ms, 1e-6))))
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn()  # allocations made outside capture, as CUDA graphs require
    torch.cuda.current_stream(device).wait_stream(side)
    replays = []
    for n in (calls, 2 * calls):
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                for _ in range(n):
                    fn()
        except RuntimeError:
            torch.cuda.synchronize(device)
            return None
        replays.append(_time_cuda(graph.replay, device, settings, None).median_ms)
        del graph
    per_call = (replays[1] - replays[0]) / calls
    return (per_call, 2 * calls) if per_call > 0 else None


def _time_cpu(
    fn: Callable[[], Any], settings: TimingSettings, prepare: Callable[[], Any] | None = None
) -> TimingResult:
    start = time.perf_counter()
    fn()
    while (time.perf_counter() - start) * 1e3 < settings.warmup_ms:
        fn()
    samples: list[float] = []
    budget_start = time.perf_counter()
    while len(samples) < settings.max_reps:
        if prepare is not None:
            prepare()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
        if len(samples) >= settings.min_reps and (
            median_rse(samples) < settings.target_rse
            or (time.perf_counter() - budget_start) * 1e3 > settings.max_ms
        ):
            break
    return replace(_summary(samples), warmup_ms=round((budget_start - start) * 1e3, 2), method="perf_counter")


def timing_method(call_start: str) -> str:
    """The method's name in a baseline's cache key: a baseline taken with calls started one way
    is never compared with a candidate timed the other way."""
    return TIMING_METHOD if call_start == "queued" else f"{TIMING_METHOD} {call_start}"


def _time_cuda(
    fn: Callable[[], Any],
    device: torch.device,
    settings: TimingSettings,
    flush: torch.Tensor | None,
    prepare: Callable[[], Any] | None = None,
) -> TimingResult:
    idle = clock_state(device)
    torch.cuda.synchronize(device)
    fn()  # first call: JIT compilation and autotuning stay out of the settle windows
    torch.cuda.synchronize(device)
    warmup_ms, settled = settle_clock(fn, device, settings, flush, prepare)
    samples: list[float] = []
    sm_mhz: list[int] = []
    at_start: dict[str, Any] = {}
    at_end: dict[str, Any] = {}
    budget_start = time.perf_counter()
    batches = 0
    while len(samples) < settings.max_reps:
        pairs = enqueue_batch(fn, flush, prepare=prepare, idle=idle_start(settings))
        batches += 1
        # Read while the batch runs (after the synchronize the GPU is idle and says so); the full
        # state on batches 1, 2, 4, 8, ... keeps NVML queries to a handful per timing.
        if batches & (batches - 1) == 0:
            at_end = clock_state(device)
            at_start = at_start or at_end
            sm = at_end.get("sm_mhz")
        else:
            sm = sm_clock_mhz(device)
        if sm:
            sm_mhz.append(sm)
        samples.extend(collect_batch(pairs, device))
        spent_ms = (time.perf_counter() - budget_start) * 1e3
        if len(samples) >= settings.min_reps and (
            (median_rse(samples) < settings.target_rse and spent_ms >= settings.min_ms)
            or spent_ms > settings.max_ms
        ):
            break
    clock = {}
    if at_end:
        clock = {
            "idle_sm_mhz": idle.get("sm_mhz"),
            "start_sm_mhz": at_start.get("sm_mhz"),
            "min_sm_mhz": min(sm_mhz) if sm_mhz else None,
            "max_sm_mhz": max(sm_mhz) if sm_mhz else None,
            "end_sm_mhz": at_end.get("sm_mhz"),
            "limit_sm_mhz": at_end.get("max_sm_mhz"),
            "temp_c": at_end.get("temp_c"),
            "power_w": at_end.get("power_w"),
            "reasons": at_end.get("reasons"),
        }
    return replace(_summary(samples), warmup_ms=round(warmup_ms, 2), settled=settled, clock=clock)
