"""What one timing yields: :class:`TimingResult` (median, spread, the host-clock and CUDA-graph
figures, clock state), the statistics behind it (:func:`median_rse`, the summary of a sample
list, the interquartile mean the warmup settles on), and :func:`comparable`, which picks the two
figures a speedup divides. How the samples are taken is :mod:`evokernel.evaluation.timing`'s."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TimingResult:
    median_ms: float
    iqr_ms: float
    cv: float
    reps: int
    p10_ms: float | None = None
    p90_ms: float | None = None
    wall_median_ms: float | None = None
    sync_wait_ms: float | None = None
    probe_wall_ms: float | None = None
    probe_wait_ms: float | None = None
    stream_tail_ms: float | None = None
    probe_tail_ms: float | None = None
    tail_excess_ms: float | None = None
    contended: bool | None = None
    graph_median_ms: float | None = None
    graph_calls: int | None = None
    launch_bound: bool = False
    warmup_ms: float | None = None
    settled: bool | None = None
    clock: dict[str, Any] = field(default_factory=dict)
    host: dict[str, float] = field(default_factory=dict)  # block_timer.BlockTimer.host
    seconds: float | None = None
    method: str = "cuda_events"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def comparable(candidate: dict[str, Any], baseline: dict[str, Any] | None) -> tuple[float, float | None, str]:
    """``(candidate ms, baseline ms, method)``, both taken the same way: the CUDA-graph per-call
    figures when both sides are launch-bound and have one, else the flushed event medians."""
    graph_c = candidate.get("graph_median_ms") if candidate.get("launch_bound") else None
    graph_b = baseline.get("graph_median_ms") if baseline and baseline.get("launch_bound") else None
    if graph_c and graph_b:
        return float(graph_c), float(graph_b), "cuda_graph"
    base = float(baseline["median_ms"]) if baseline else None
    return float(candidate["median_ms"]), base, str(candidate.get("method", "cuda_events"))


def median_rse(samples: list[float]) -> float:
    """Relative standard error of the median: ~1.2533 * sigma / sqrt(n) / median for near-normal
    data. sigma is the smaller of the standard deviation and IQR / 1.349 (equal for normal data):
    a few preempted or power-capped calls inflate the deviation (CV 6-28 % beside a p10-p90 width
    of 2-4 % for full-size kernels on an H100) and kept such timings going to the 1000-sample cap,
    while the median they estimate hardly moves."""
    if len(samples) < 4:
        return math.inf
    med = statistics.median(samples)
    if med <= 0:
        return math.inf
    q = statistics.quantiles(samples, n=4)
    sigma = min(statistics.stdev(samples), (q[2] - q[0]) / 1.349)
    return 1.2533 * sigma / math.sqrt(len(samples)) / med


def _summary(samples: list[float]) -> TimingResult:
    if len(samples) >= 2:
        q = statistics.quantiles(samples, n=4)
        d = statistics.quantiles(samples, n=10)
    else:
        q, d = [samples[0]] * 3, [samples[0]] * 9
    mean = statistics.fmean(samples)
    cv = statistics.pstdev(samples) / mean if mean > 0 else 0.0
    return TimingResult(statistics.median(samples), q[2] - q[0], cv, len(samples), d[0], d[8])


def _interquartile_mean(samples: list[float]) -> float:
    """Mean of the middle half: robust to outliers like a median, but not stuck on one event tick."""
    ordered = sorted(samples)
    quarter = len(ordered) // 4
    middle = ordered[quarter : len(ordered) - quarter] or ordered
    return statistics.fmean(middle)
