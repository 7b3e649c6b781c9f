"""What does ``timing.call_start=idle`` add to a GPU-bound call? (issue 35, session 26)

``idle`` synchronizes after each call's L2 flush, so the begin event fires on an idle GPU and the
events also hold the host's issuing of the call up to its first kernel. Per call shape this
prints the host's issue time onto an idle GPU (perf_counter around the call after a synchronize)
beside four event loops of one call each: ``queued`` (behind its flush, no wait), ``idle`` (a
synchronize after the flush), and idle with a GPU sleep of ~100 / ~10 us queued before the begin
event (``torch.cuda._sleep``: the host gets ahead again, so the issuing is hidden when the sleep
outlasts it), then ``time_callable``'s medians under queued, idle, queued, idle. If ``idle`` minus
``queued`` tracks the issue time, and a long enough sleep removes it, the cost is the issuing.

    python3 experiments/bench/idle_start_cost.py

Prints one line per call, then, last, one JSON line.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import replace

import torch

from evokernel.evaluation.timed_calls import L2_FLUSH_BYTES, idle_issue_ms
from evokernel.evaluation.timing import TimingSettings, time_callable

REPS = 60
SETTINGS = TimingSettings(warmup_ms=20, min_ms=100, max_ms=400, launch_bound_us=0)
# GPU sleeps in clock cycles: ~100 us and ~10 us at the H100/H200's ~2 GHz.
SLEEPS = {"idle_sleep_100us": 200_000, "idle_sleep_10us": 20_000}


def issue_ms(fn: Callable[[], object], flush: torch.Tensor) -> tuple[float, float]:
    """Median and p90 of the host's time to issue ``fn`` onto an idle GPU, after a flush."""
    ordered = idle_issue_ms(fn, flush, REPS)
    return statistics.median(ordered), ordered[int(0.9 * (len(ordered) - 1))]


def event_median_ms(fn: Callable[[], object], flush: torch.Tensor, start: str) -> float:
    samples = []
    for _ in range(REPS):
        flush.zero_()
        if start != "queued":
            torch.cuda.synchronize()
        if start in SLEEPS:
            torch.cuda._sleep(SLEEPS[start])
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(begin.elapsed_time(end))
    return statistics.median(samples)


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("idle_start_cost.py times CUDA calls: run it on a machine with a GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda")
    a, b = torch.randn(4096, 4096, device=device), torch.randn(4096, 4096, device=device)
    x = torch.zeros(1, device=device)
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)
    calls: dict[str, Callable[[], object]] = {
        "mm4096": lambda: torch.mm(a, b),
        "mm1024": lambda: torch.mm(a[:1024, :1024], b[:1024, :1024]),
        "add1": lambda: x.add_(1),
    }
    out: dict[str, object] = {"device": torch.cuda.get_device_name(device)}
    for name, fn in calls.items():
        for _ in range(5):
            fn()
        median, p90 = issue_ms(fn, flush)
        loops = {s: round(event_median_ms(fn, flush, s), 4) for s in ("queued", "idle", *SLEEPS)}
        starts = ("queued", "idle", "queued", "idle")
        timed = [time_callable(fn, device, replace(SETTINGS, call_start=s)).median_ms for s in starts]
        out[name] = {
            "issue_ms": round(median, 4),
            "issue_p90_ms": round(p90, 4),
            "loops_ms": loops,
            "time_callable_q_i_q_i_ms": [round(ms, 4) for ms in timed],
        }
        print(name, out[name], flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
