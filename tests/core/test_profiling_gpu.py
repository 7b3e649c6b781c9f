"""Profiling on the GPU machine, against kernels whose answer is known (``-m gpu``): a large copy is
memory-bound at high DRAM throughput with a speed-of-light share near the bandwidth it measurably
reaches; 200 launches on 32 elements are latency/launch-bound; an 8192^3 fp16 matmul is
compute-bound. Each runs at ``counters`` (which includes the timeline); the timeline-only verdict
is checked from the same profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from evokernel.config.schema import EvaluationConfig, TimingConfig
from evokernel.evaluation.profiling.counters import find_ncu
from evokernel.evaluation.profiling.verdict import classify
from evokernel.evaluation.request import EvaluationRequest
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.pool.hardware import nominal_bandwidth_gbps
from evokernel.tasks import load_task
from evokernel.types import Evaluation, Status

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "profiling"
GPU_TIMING = TimingConfig(warmup_ms=10, max_ms=200, baseline_min_ms=200)


def evaluate(name: str, level: str = "counters", baselines: bool = False) -> Evaluation:
    task = load_task(FIXTURES / f"{name}.py")
    config = EvaluationConfig(compile_baseline="off", allow_torch=True, profiling=level, timing=GPU_TIMING)
    request = EvaluationRequest.build(
        task, (FIXTURES / f"{name}_candidate.py").read_text(), device="cuda", scale="full", evaluation=config
    )
    if baselines:
        request = request.for_baselines()
    return run_sandboxed(request.to_json(), 300)


def profile_of(ev: Evaluation, key: str = "profiling") -> dict[str, Any]:
    assert ev.status is Status.CORRECT, f"{ev.status.value} at {ev.stage}: {ev.reason}\n{ev.feedback}"
    profile = ev.details[key]
    print(key, profile)  # the figures, in the GPU run's log
    assert profile["status"] == "ok", profile
    return dict(profile)


def counters_expected() -> bool:
    return find_ncu() is not None


def test_large_copy_is_memory_bound_near_the_measured_bandwidth() -> None:
    ev = evaluate("copy")
    profile = profile_of(ev)
    assert profile["bottleneck"] == "memory-bound", profile["why"]
    assert classify(profile["timeline"], None, profile["sol"])["class"] == "memory-bound"
    if counters_expected():
        assert profile["counters"]["status"] == "ok", profile["counters"]
        (main,) = [k for k in profile["counters"]["kernels"] if k["share"] > 0.5]
        assert main["dram_pct"] >= 70, main
    # The bandwidth a copy reaches here, measured in this process with CUDA events.
    x = torch.randn(1 << 27, device="cuda")
    y = torch.empty_like(x)
    times = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y.copy_(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    measured_ms = sorted(times)[len(times) // 2]
    nominal = nominal_bandwidth_gbps(torch.cuda.get_device_name())
    assert nominal is not None
    ratio = (2 * x.numel() * 4 / (measured_ms * 1e-3)) / (nominal * 1e9)
    assert profile["sol"]["limit"] == "memory"
    assert profile["sol"]["share"] == pytest.approx(ratio, abs=0.12), (profile["sol"], ratio)
    reference = profile_of(evaluate("copy", baselines=True), "reference_profiling")
    assert reference["bottleneck"] == "memory-bound", reference["why"]


def test_loop_of_tiny_launches_is_launch_bound() -> None:
    profile = profile_of(evaluate("tiny_launches", level="timeline"))
    assert profile["bottleneck"] == "latency-bound", profile["why"]
    assert profile["timeline"]["launches"] >= 400  # a mul and an add per step
    assert profile["counters"] is None


def test_large_fp16_matmul_is_compute_bound() -> None:
    profile = profile_of(evaluate("matmul_fp16"))
    assert profile["bottleneck"] == "compute-bound", profile["why"]
    assert classify(profile["timeline"], None, profile["sol"])["class"] == "compute-bound"
    assert profile["sol"]["limit"] == "compute" and profile["sol"]["dtype"] == "float16"
    assert profile["sol"]["flops"] == 2 * 8192**3
    if counters_expected():
        assert profile["counters"]["status"] == "ok", profile["counters"]
        main = max(profile["counters"]["kernels"], key=lambda k: k["share"])
        assert main["sm_pct"] >= 60 and main["sm_pct"] > main["dram_pct"], main
