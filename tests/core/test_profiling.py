"""Profiling's pure parts on a CPU: a timeline summarised from GPU activities, Nsight Compute's CSV
parsed, the bottleneck verdict and the speed-of-light share; and the stage through the real
sandbox, which says why it did nothing on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evokernel.config.schema import EvaluationConfig, TimingConfig
from evokernel.evaluation.profiling.counters import command, merge, parse, selected
from evokernel.evaluation.profiling.timeline import DeviceActivity, base_name, short_name, summarise
from evokernel.evaluation.profiling.verdict import classify, speed_of_light, task_work
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.tasks import load_task
from evokernel.types import Status

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GEMM = "void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x3_nn_align8>(Params)"


def test_timeline_summary_counts_launches_busy_time_and_host_gaps() -> None:
    # Host call from t=0 to 30 µs; kernels at 10-20 (gemm) and 25-27, 27-28 (two launches of one
    # elementwise kernel): busy 13 µs, idle inside the span 5 µs, lead 10 µs.
    acts = [
        DeviceActivity(GEMM, 10.0, 20.0),
        DeviceActivity("void at::native::vectorized_elementwise_kernel<4, Add>(int, Add)", 25.0, 27.0),
        DeviceActivity("void at::native::vectorized_elementwise_kernel<4, Add>(int, Add)", 27.0, 28.0),
        DeviceActivity("Memset (Device)", 22.0, 23.0),
    ]
    t = summarise(acts, 0.0, 30.0)
    assert (t["launches"], t["copies"]) == (4, 1)
    assert t["busy_ms"] == pytest.approx(0.014) and t["span_ms"] == pytest.approx(0.018)
    assert t["idle_ms"] == pytest.approx(0.004) and t["lead_ms"] == pytest.approx(0.010)
    gemm, add, memset = t["kernels"]
    assert memset["base"] == "" and memset["launches"] == 1  # GPU work, but nothing ncu profiles
    assert (
        gemm["base"] == "Kernel2"
        and gemm["launches"] == 1
        and gemm["share"] == pytest.approx(10 / 14, abs=1e-3)
    )
    assert add["base"] == "vectorized_elementwise_kernel" and add["launches"] == 2
    assert add["name"] == "at::native::vectorized_elementwise_kernel<...>"


def test_kernel_names_as_nsight_compute_matches_them() -> None:
    assert base_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"
    assert base_name("void f<a<b>, 2>(float*, int)") == "f"
    assert short_name("x" * 300, limit=20) == "x" * 17 + "..."


_METRICS = (
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio",
    "gpu__time_duration.sum",
)
_UNITS = ("%", "%", "%", "register/thread", "byte/block", "byte/block", "ratio", "ratio", "ratio", "ns")


def _csv_row(*cells: str) -> str:
    return ",".join(f'"{c}"' for c in cells)


# As ``ncu --csv --page raw --log-file`` writes it: messages, a header, a units row, launches.
NCU_CSV = "\n".join(
    [
        "==PROF== Connected to process 1234",
        _csv_row("ID", "Process ID", "Kernel Name", *_METRICS),
        _csv_row("", "", "", *_UNITS),
        _csv_row(
            "0",
            "1234",
            "copy_kernel",
            "91.5",
            "20.1",
            "80.2",
            "16",
            "0",
            "1,024",
            "12.5",
            "1.5",
            "1.0",
            "240,000",
        ),
        _csv_row(
            "1",
            "1234",
            "copy_kernel",
            "90.5",
            "19.9",
            "79.8",
            "16",
            "0",
            "1,024",
            "11.5",
            "1.0",
            "1.0",
            "241,000",
        ),
        "==PROF== Disconnected from process 1234",
    ]
)


def test_nsight_compute_csv_is_parsed_and_merged_per_kernel() -> None:
    launches = parse(NCU_CSV)
    assert len(launches) == 2  # the units row is not a launch
    assert launches[0]["dram_pct"] == 91.5 and launches[0]["smem_bytes"] == 1024
    assert launches[0]["stalls"] == [("long_scoreboard", 12.5), ("wait", 1.5)]  # "selected" is no stall
    timeline = {
        "kernels": [{"name": "copy_kernel", "base": "copy_kernel", "launches": 2, "ms": 0.48, "share": 0.97}]
    }
    (row,) = merge(selected(timeline), launches)
    assert row["dram_pct"] == 91.0 and row["registers"] == 16 and row["profiled_launches"] == 2
    cmd = command("ncu", Path("/tmp/x.csv"), selected(timeline), ["python", "t.py"])
    assert cmd[cmd.index("-k") + 1] == "regex:^(copy_kernel)$" and cmd[cmd.index("-c") + 1] == "2"
    assert cmd[cmd.index("--clock-control") + 1] == "none"  # never lock the clocks others time under


def timeline(busy_ms: float, idle_ms: float, launches: int, lead_ms: float = 0.0) -> dict[str, object]:
    return {"launches": launches, "busy_ms": busy_ms, "idle_ms": idle_ms, "lead_ms": lead_ms, "kernels": []}


def test_verdicts_with_their_numbers() -> None:
    launchy = classify(timeline(0.3, 0.9, 400), None, None)
    assert classify(timeline(0.3, 0.0, 400), None, None, runtime_ms=1.2)["class"] == "latency-bound"
    # A profiler slows the host before the first launch, not the call that was timed.
    assert (
        classify(timeline(1.0, 0.0, 1, lead_ms=2.5), None, {"memory_ms": 0.9}, runtime_ms=1.02)["class"]
        == "memory-bound"
    )
    assert launchy["class"] == "latency-bound" and "400 launches" in launchy["why"]
    assert classify(timeline(0.005, 0.0, 1), None, None)["class"] == "latency-bound"  # 5 µs of GPU work
    memory = [{"ms": 1.0, "dram_pct": 88.0, "sm_pct": 30.0, "occupancy_pct": 70.0}]
    assert classify(timeline(1.0, 0.01, 1), memory, None)["class"] == "memory-bound"
    compute = [{"ms": 1.0, "dram_pct": 10.0, "sm_pct": 85.0, "occupancy_pct": 20.0}]
    assert classify(timeline(1.0, 0.01, 1), compute, None)["class"] == "compute-bound"
    starved = [{"ms": 1.0, "dram_pct": 20.0, "sm_pct": 15.0, "occupancy_pct": 12.0}]
    got = classify(timeline(1.0, 0.01, 1), starved, None)
    assert got["class"] == "occupancy-limited" and "occupancy 12 %" in got["why"]
    stalled = [
        {
            "ms": 1.0,
            "dram_pct": 20.0,
            "sm_pct": 15.0,
            "occupancy_pct": 60.0,
            "stalls": [["long_scoreboard", 9]],
        }
    ]
    got = classify(timeline(1.0, 0.01, 1), stalled, None)
    assert got["class"] == "latency-bound" and "long_scoreboard" in got["why"]
    # Timeline only: the floor the kernels' busy time is near decides, else unknown.
    sol = {"memory_ms": 0.9, "compute_ms": 0.01}
    assert classify(timeline(1.0, 0.01, 1), None, sol)["class"] == "memory-bound"
    assert (
        classify(timeline(1.0, 0.01, 1), None, {"memory_ms": 0.1, "compute_ms": 0.01})["class"] == "unknown"
    )
    assert classify({"launches": 0}, None, sol)["class"] == "unknown"


def test_speed_of_light_of_a_matmul_on_an_h200() -> None:
    a, b = torch.randn(256, 512, dtype=torch.float16), torch.randn(512, 128, dtype=torch.float16)

    class MatMul(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x @ y

    work = task_work(MatMul(), [a, b])
    assert work == {
        "flops": 2 * 256 * 512 * 128,
        "bytes": 2 * (256 * 512 + 512 * 128 + 256 * 128),
        "dtype": "float16",
    }
    sol = speed_of_light(work, "NVIDIA H200", runtime_ms=0.0002)
    assert sol["limit"] == "memory"  # 0.5 MB at 4.8 TB/s outlasts 33.5 MFLOP at 989 TFLOP/s
    assert sol["min_ms"] == pytest.approx(work["bytes"] / 4.8e12 * 1e3, rel=1e-3)
    assert sol["share"] == pytest.approx(sol["min_ms"] / 0.0002, abs=1e-4)  # "at 48 % of the limit"
    assert speed_of_light(work, "Some Future Accelerator", 0.01)["share"] is None
    assert "beyond" not in sol


def test_a_kernel_past_the_dtypes_limit_is_kept_as_measured_and_explained() -> None:
    from evokernel.evaluation.profiling.summary import sol_line

    # 1 TFLOP of fp32 matmul: 14.9 ms at the H200's 67 TFLOP/s of fp32; a kernel timed at 5 ms did
    # fewer FLOPs or used tensor cores (the level-3 corpus has an attention at 317 %)
    work = {"flops": 10**12, "bytes": 10**6, "dtype": "float32"}
    sol = speed_of_light(work, "NVIDIA H200", runtime_ms=5.0)
    assert sol["limit"] == "compute" and sol["share"] > 2.9
    assert "float32" in sol["beyond"] and "tensor cores" in sol["beyond"]
    line = sol_line(sol)
    assert line.startswith("Speed of light: 299% of the device's limit") and "fewer FLOPs" in line


def test_stage_says_skipped_no_gpu_on_a_cpu() -> None:
    task = load_task(FIXTURES / "tasks" / "axpy.py")
    assert task.seed_source is not None
    config = EvaluationConfig(
        profiling="counters", timing=TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30)
    )
    ev = run_sandboxed(
        build_request(task, task.seed_source, device="cpu", scale="small", evaluation=config), 120
    )
    assert ev.status is Status.CORRECT, ev.reason
    (stage,) = [s for s in ev.details["stages"] if s["stage"] == "profiling"]
    assert (stage["status"], stage["reason"]) == ("skipped", "no GPU")
    assert ev.details["profiling"]["status"] == "skipped: no GPU"
    off = EvaluationConfig(profiling="none", timing=config.timing)
    ev = run_sandboxed(
        build_request(task, task.seed_source, device="cpu", scale="small", evaluation=off), 120
    )
    assert "profiling" not in ev.details and all(s["stage"] != "profiling" for s in ev.details["stages"])


def test_run_summary_cells_say_how_close_the_best_kernel_is() -> None:
    from evokernel.run.progress import sol_cells
    from evokernel.types import Candidate, Evaluation, Scored

    profile = {"status": "ok", "device": "NVIDIA H200", "bottleneck": "compute-bound", "sol": {"share": 0.71}}
    best = Scored(
        Candidate(3, "r", "t", 1, 0, 1, "mutate", (), "x"),
        Evaluation(Status.CORRECT, details={"profiling": profile}),
    )
    assert sol_cells(best) == ("71% of H200", "compute-bound")
    profile["sol"] = {"share": 3.17}
    assert sol_cells(best) == ("317% of H200 (beyond its limit)", "compute-bound")
    assert sol_cells(None) == ("-", "-")
