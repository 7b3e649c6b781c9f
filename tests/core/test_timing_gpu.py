"""Where a timed call starts (``timing.call_start``, evaluation/timed_calls.py), on the GPU machine
(``-m gpu``): with ``idle`` a host-bound call is timed by its latency, its issue time included, so
two host-bound calls whose host work is 1:2 time about 1:2; a GPU-bound call times as it does
queued plus its own issuing up to its kernel (not one launch: 60-90 us for one cuBLAS matmul); a
tiny kernel, whose latency is mostly its launch, is still found launch-bound by its CUDA-graph
figure. ``queued``'s figures for the same calls are printed beside, for the record: there the flush
(~60-80 us of GPU work) overlaps the host's issuing and hides part of it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import pytest
import torch

from evokernel.evaluation.timed_calls import L2_FLUSH_BYTES, idle_issue_ms
from evokernel.evaluation.timing import TimingSettings, time_callable

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
SETTINGS = TimingSettings(warmup_ms=20, min_ms=100, max_ms=400, launch_bound_us=0)
DEVICE = torch.device("cuda")


def host_bound(spin_us: int, x: torch.Tensor) -> Callable[[], None]:
    """A call that spends ``spin_us`` on the host, then launches one tiny kernel: the shape of a
    small eager model, whose time is its Python and dispatch."""

    def call() -> None:
        end = time.perf_counter_ns() + spin_us * 1000
        while time.perf_counter_ns() < end:
            pass
        x.add_(1)

    return call


def medians_ms(fn: Callable[[], object]) -> dict[str, float]:
    return {
        start: time_callable(fn, DEVICE, replace(SETTINGS, call_start=start)).median_ms
        for start in ("queued", "idle")
    }


def test_an_idle_start_times_a_host_bound_call_by_its_latency() -> None:
    x = torch.zeros(1, device=DEVICE)
    launch = lambda: x.add_(1)  # noqa: E731
    before = issue_ms(launch)
    short, long = medians_ms(host_bound(150, x)), medians_ms(host_bound(300, x))
    # The tiny launch's own issue time around the medians: session 27 saw +64 us over the spin
    # once (bound 60 us), in a freshly started machine's first test; this says next time whether
    # the launch itself was slow then.
    seen = {"150us": short, "300us": long, "add_issue_ms": (before, issue_ms(launch))}
    print(seen)
    # The spin, plus one launch's latency (a few us to tens under load), and never less.
    assert 0.150 <= short["idle"] <= 0.150 * 1.2 + 0.03, seen
    assert 0.300 <= long["idle"] <= 0.300 * 1.2 + 0.03, seen
    # Host work 1:2 times ~1:2 (the launch latency on both sides pulls it a little under 2).
    assert 1.75 <= long["idle"] / short["idle"] <= 2.02, seen


def issue_ms(fn: Callable[[], object]) -> float:
    """The host's time to issue one call onto an idle GPU right after an L2 flush, as ``idle``
    issues it: what ``idle`` adds to a GPU-bound call."""
    times = idle_issue_ms(fn, torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=DEVICE), 40)
    return times[len(times) // 2]


def test_an_idle_start_adds_a_gpu_bound_call_its_issue_time() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(4096, 4096, device=DEVICE)
    b = torch.randn(4096, 4096, device=DEVICE)
    mm = lambda: torch.mm(a, b)  # noqa: E731
    before = issue_ms(mm)
    medians = medians_ms(mm)
    after = issue_ms(mm)
    print(medians, {"issue_ms": (before, after)})
    # ~2.7 ms of GPU work. Queued, the host is ahead and the events hold GPU time; idle, they also
    # hold the host's issuing up to the kernel (session 26, H200: +88-90 us against a median issue
    # of 60 us, p90 89 us, for this one cuBLAS call): more than one launch, less than the call.
    # The issue time is read before and after the medians: the host's speed may move between.
    added = medians["idle"] - medians["queued"]
    low, high = min(before, after), max(before, after)
    assert 0.5 * low - 0.01 <= added <= 1.5 * high + 0.03, (medians, before, after)


def test_a_tiny_kernel_is_launch_bound_by_its_graph_figure_under_either_start() -> None:
    x = torch.zeros(65536, device=DEVICE)
    settings = replace(SETTINGS, launch_bound_us=20.0)
    results = {
        start: time_callable(lambda: x.add_(1), DEVICE, replace(settings, call_start=start))
        for start in ("queued", "idle")
    }
    print({s: (r.median_ms, r.graph_median_ms) for s, r in results.items()})
    for start, r in results.items():
        assert r.launch_bound and r.graph_median_ms is not None, (start, r)
        assert 0 < r.graph_median_ms * 1e3 < 20.0, (start, r.graph_median_ms)
    # The idle start's events hold a launch's latency over the kernel's few microseconds.
    idle = results["idle"]
    assert idle.graph_median_ms is not None and idle.median_ms > idle.graph_median_ms
