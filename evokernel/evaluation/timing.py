"""Timing of one callable, the same way for candidates and baselines.

On a GPU every timed call is bracketed by CUDA events after an L2 flush (a 256 MiB write: H100's
L2 is 50 MiB, H200's 60 MiB), so a kernel never profits from data left in cache by the previous
repetition. Warmup is by time, not count, because a 5 µs and a 5 ms kernel need very different
counts to reach steady clocks. Repetitions continue until the relative standard error of the
median drops under ``target_rse`` (or a time/count cap): the median, IQR and coefficient of
variation are reported. On a CPU the same loop runs with ``perf_counter``.

Two more figures on a GPU: ``wall_median_ms``, the median of a few calls bracketed by device
synchronizes on the host clock (work the candidate hides on a side stream shows there, not in
the events), and with ``cuda_graph`` the median of CUDA-graph replays of the call, which removes
launch overhead for launch-bound kernels (reported beside the eager-launch median, never instead).
"""

from __future__ import annotations

import math
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class TimingSettings:
    warmup_ms: float = 25.0
    min_reps: int = 10
    max_reps: int = 1000
    max_ms: float = 1000.0
    target_rse: float = 0.005
    cuda_graph: bool = False


# Synchronized host-clock calls taken after the event samples, for the side-stream check.
WALL_REPS = 5


@dataclass(frozen=True)
class TimingResult:
    median_ms: float
    iqr_ms: float
    cv: float
    reps: int
    wall_median_ms: float | None = None
    graph_median_ms: float | None = None
    method: str = "cuda_events"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _median_rse(samples: list[float]) -> float:
    """Relative standard error of the median: ~1.2533 * stdev / sqrt(n) / median for near-normal data."""
    if len(samples) < 3:
        return math.inf
    med = statistics.median(samples)
    if med <= 0:
        return math.inf
    return 1.2533 * statistics.stdev(samples) / math.sqrt(len(samples)) / med


def _summary(samples: list[float]) -> TimingResult:
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    mean = statistics.fmean(samples)
    cv = statistics.pstdev(samples) / mean if mean > 0 else 0.0
    return TimingResult(statistics.median(samples), q[2] - q[0], cv, len(samples))


def time_callable(fn: Callable[[], Any], device: torch.device, settings: TimingSettings) -> TimingResult:
    if device.type != "cuda":
        return _time_cpu(fn, settings)
    result = _time_cuda(fn, device, settings)
    wall = _wall_median(fn, device)
    graph = _time_graph(fn, device, settings) if settings.cuda_graph else None
    return TimingResult(**{**result.__dict__, "wall_median_ms": wall, "graph_median_ms": graph})


def _wall_median(fn: Callable[[], Any], device: torch.device) -> float:
    samples = []
    for _ in range(WALL_REPS):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize(device)
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def _time_graph(fn: Callable[[], Any], device: torch.device, settings: TimingSettings) -> float | None:
    """Median of graph replays, or None when the call cannot be captured (host syncs, allocations
    the graph pool cannot serve): that is a property of the kernel, not an error."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn()  # allocations made outside capture, as CUDA graphs require
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except RuntimeError:
        return None
    return _time_cuda(graph.replay, device, settings).median_ms


def gpu_clocks(device: torch.device) -> dict[str, str]:
    """SM clock, its maximum and the temperature from nvidia-smi, when it is there to ask."""
    exe = shutil.which("nvidia-smi")
    if exe is None or device.type != "cuda":
        return {}
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    query = "clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw"
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={query}", "--format=csv,noheader", "-i", f"GPU-{uuid}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.strip().splitlines()[0].split(",")] if out.strip() else []
    return dict(zip(query.split(","), values, strict=False))


def _time_cpu(fn: Callable[[], Any], settings: TimingSettings) -> TimingResult:
    start = time.perf_counter()
    fn()
    while (time.perf_counter() - start) * 1e3 < settings.warmup_ms:
        fn()
    samples: list[float] = []
    budget_start = time.perf_counter()
    while len(samples) < settings.max_reps:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
        if len(samples) >= settings.min_reps and (
            _median_rse(samples) < settings.target_rse
            or (time.perf_counter() - budget_start) * 1e3 > settings.max_ms
        ):
            break
    return TimingResult(**{**_summary(samples).__dict__, "method": "perf_counter"})


def _time_cuda(fn: Callable[[], Any], device: torch.device, settings: TimingSettings) -> TimingResult:
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize(device)
    while (time.perf_counter() - start) * 1e3 < settings.warmup_ms:
        fn()
        torch.cuda.synchronize(device)
    samples: list[float] = []
    budget_start = time.perf_counter()
    # Events are recorded in batches of 10 and read after one synchronize: per-call syncs would
    # add launch gaps; the flush before each call is outside the events.
    batch = 10
    while len(samples) < settings.max_reps:
        pairs = []
        for _ in range(batch):
            flush.zero_()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            pairs.append((begin, end))
        torch.cuda.synchronize(device)
        samples.extend(b.elapsed_time(e) for b, e in pairs)
        if len(samples) >= settings.min_reps and (
            _median_rse(samples) < settings.target_rse
            or (time.perf_counter() - budget_start) * 1e3 > settings.max_ms
        ):
            break
    return _summary(samples)
