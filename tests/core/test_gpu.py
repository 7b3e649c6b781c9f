"""GPU-only checks, run on the GPU machine (``python3 -m pytest -q -m gpu tests/core``): every bundled
seed is correct at full size, the GPU corpus cases (CUDA/autotuned legit kernels, GPU faults, GPU
hacks) are classified, and after each GPU fault the next candidate on the same GPU is fine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evokernel.config.schema import EvaluationConfig
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.tasks import load_task, load_tasks
from evokernel.types import Evaluation, Status, Task
from tests.core.corpus import FIXTURES, GPU_TIMING, Case, Expectation, assert_supervised_verdict, corpus

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
ROOT = Path(__file__).resolve().parents[2]
SEEDED = [t for t in load_tasks(ROOT / "experiments" / "tasks") if t.seed_source]
# Runtime hacks of the CPU corpus worth repeating on a GPU (the caching allocator is the real
# target of buffer reuse and uninitialised memory; the pytorch-recompute recorder must see through
# compiled, not interpreted, Triton launches).
CPU_HACKS_ON_GPU = (
    "buffer_reuse",
    "uninitialised_memory",
    "torch_ops_instead_of_kernel",
    "partial_computation",
    "dummy_launch_torch_compute",
    "triton_copy_then_torch_linear",
    "try_except_fallback",  # a taken fallback (the launch fails to compile on the GPU too)
    "own_model_copy_called",
    # gpu-mode's reference-kernels red-teaming families (issue 34): a lazy output subclass, results
    # cached by the input's pointer or identity, the harness's timers replaced.
    "lazy_tensor_subclass",
    "pointer_cache",
    "timing_identity_cache",
    "monkeypatch_timer",
    "worker_timer_replaced",
)
# CPU legit kernels whose point holds on a GPU too: a guard whose fallback never runs, and
# parameters made in the same order as the reference's under other names.
CPU_LEGIT_ON_GPU = ("axpy_never_taken_guard", "linear_renamed_parameters")


def run(
    task: Task,
    source: str,
    timeout_s: float = 300,
    static_checks: bool = True,
    profile: str = "strict",
    incumbent: str | None = None,
) -> Evaluation:
    """``incumbent``: a confirmation's (run/confirm.py), timed as the window's third side."""
    request = build_request(
        task,
        source,
        device="cuda",
        scale="full",
        timing=GPU_TIMING,
        evaluation=EvaluationConfig(compile_baseline="off", profile=profile),
        static_checks=static_checks,
    )
    if incumbent is not None:
        request = {**request, "incumbent_source": incumbent}
    return run_sandboxed(request, timeout_s)


@pytest.mark.parametrize("profile", ["strict", "kernelbench", "kernelbench-v0"])
def test_cuda_graphs_are_judged_by_what_they_compute(profile: str) -> None:
    """Issue 34: a graph per shape with each call's input copied in passes under every profile;
    the graph captured on the first input and replayed without copying is refused under every
    profile by correctness itself, naming the trial that came out stale."""
    from tests.core.corpus import load_case

    legit = load_case(FIXTURES / "legit" / "axpy_cuda_graph.py")
    ev = run(load_task(legit.task), legit.path.read_text(), profile=profile)
    assert ev.ok, f"{ev.status.value} at {ev.stage}: {ev.reason}"
    stale = load_case(FIXTURES / "hacks" / "graph_captured_on_first_input.py")
    ev = run(load_task(stale.task), stale.path.read_text(), profile=profile)
    assert (ev.status, ev.stage) == (Status.INCORRECT, "correctness"), f"{ev.status.value}: {ev.reason}"
    assert "seed 1" in ev.reason


@pytest.mark.parametrize("profile", ["strict", "kernelbench", "kernelbench-v0"])
def test_unjoined_side_stream_work_is_refused_by_its_rule_under_every_profile(profile: str) -> None:
    """Issue 34: work forked onto a side stream and never joined is refused by rule side-stream,
    by the first trial at the latest, under every profile (the call's own stream is held until
    it returns, observe.py; session 29 saw it caught by chance: at seed 0, at seed 4, under
    strict not at all); work joined back passes."""
    from tests.core.corpus import load_case

    for name in ("side_stream", "side_stream_large_kernel"):
        case = load_case(FIXTURES / "hacks" / f"{name}.py")
        ev = run(load_task(case.task), case.path.read_text(), profile=profile)
        verdict = (ev.status, ev.stage)
        assert verdict == (Status.REJECTED, "integrity"), f"{name}: {ev.status.value}: {ev.reason}"
        first_call = "warm-up call" in ev.reason or "seed 0, run 1" in ev.reason
        assert "rule side-stream" in ev.reason and first_call, f"{name}: {ev.reason}"
    joined = load_case(FIXTURES / "legit" / "axpy_side_stream_joined.py")
    ev = run(load_task(joined.task), joined.path.read_text(), profile=profile)
    assert ev.ok, f"{ev.status.value} at {ev.stage}: {ev.reason}"


def test_a_confirmation_times_the_incumbent_in_the_candidates_window_on_the_gpu() -> None:
    """Issue 35: the second worker is built, warmed and timed on the GPU as the third side of the
    candidate's window, all three sides on one CPU (cpu_pin.py). The same code on both sides: the
    ratio is near 1 and inside its own interval."""
    task = SEEDED[0]
    assert task.seed_source is not None
    ev = run(task, task.seed_source, incumbent=task.seed_source)
    assert ev.status is Status.CORRECT, f"{ev.status.value} at {ev.stage}: {ev.reason}"
    record = ev.details["confirmation"]
    assert "error" not in record, record
    assert record["low"] <= record["vs_incumbent"] <= record["high"]
    assert 0.8 < record["vs_incumbent"] < 1.25, record
    assert_one_cpu(ev, threads=2)


# Another process's kernels on the GPU all through the timing: not an evaluation, so nothing stops it.
STRANGER = """
import time, torch
x = torch.randn(8192, 8192, device="cuda")
torch.cuda.synchronize()
print("busy", flush=True)
end = time.time() + 120
while time.time() < end:
    for _ in range(20):
        x = (x @ x).clamp_(-1, 1)
    torch.cuda.synchronize()
"""


def test_a_window_that_will_not_drain_is_given_up_and_the_last_says_who_was_there() -> None:
    """Issue 35: a window whose GPU stays busy with another context (quiet.py cannot stop what is
    already queued, nor a process that is not an evaluation) is asked for again, up to
    BUSY_WINDOWS and then, the GPU still busy, up to the stranger patience (timing_window.py);
    the one kept records the stranger (clocks.gpu_users)."""
    from evokernel.evaluation.timing_window import BUSY_WINDOWS

    stranger = subprocess.Popen([sys.executable, "-c", STRANGER], stdout=subprocess.PIPE, text=True)
    try:
        assert stranger.stdout is not None and stranger.stdout.readline().strip() == "busy"
        task = SEEDED[0]
        assert task.seed_source is not None
        ev = run(task, task.seed_source)
    finally:
        stranger.kill()
        stranger.wait()
    assert ev.status is Status.CORRECT, f"{ev.status.value} at {ev.stage}: {ev.reason}"
    gpu = ev.details["timing"]["paired"]["reference"]["gpu"]
    assert not gpu["quiet"] and gpu.get("stranger_windows", 0) >= 1, gpu  # 120 s outlast the patience
    assert gpu["busy_windows"] == BUSY_WINDOWS - 1 + gpu["stranger_windows"], gpu
    strangers = [who for _, sm, _, who in gpu["users"] if who != "window" and sm > 0]
    assert strangers, gpu
    if gpu["seen_self"]:
        assert strangers[0].endswith(" R") or strangers[0].endswith(" S"), gpu  # running, not stopped
    timing = next(st for st in ev.details["stages"] if st["stage"] == "timing")
    assert "another process's kernels ran in the window" in timing["reason"], timing


def assert_one_cpu(ev: Evaluation, threads: int) -> None:
    """The window's sides shared one CPU, claimed for it alone (cpu_pin.py), and no thread left it."""
    pinned = ev.details["timing"]["paired"]["reference"]["pinned"]
    assert pinned["threads"] >= threads and pinned["moved"] == 0, pinned
    assert pinned["claimed"] and "error" not in pinned, pinned
    assert pinned["spin_us"] > 0 and 0 <= pinned["moves"] <= pinned["slow_rounds"], pinned  # host_speed.py
    # After each round: run-queue waits and the reference's calls off the CPU (block_timer.py).
    assert pinned["contended_rounds"] >= 0 and pinned["lost_rounds"] >= 0 and pinned["wait_ms"] >= 0, pinned
    assert pinned["busiest"] and pinned["busiest"][0][1] > 0, pinned  # the worker ran its calls
    # The eager dispatch path's speed at the window's start and end (host_clock.dispatch_us).
    assert len(pinned["dispatch_us"]) == 2 and all(0 < us < 1e4 for us in pinned["dispatch_us"]), pinned
    # ... and before each round, one reading per round the pairing logged (round_gate.py).
    paired = ev.details["timing"]["paired"]
    rounds = pinned["round_dispatch_us"]
    assert len(rounds) == len(paired["round_ratios"]) == len(paired["round_kept"]) >= paired["pairs"], paired
    assert all(0 < us < 1e4 for us in rounds), rounds
    links = pinned["round_link_gen"]  # the PCIe generation beside each reading (clocks.pcie_link_gen)
    assert len(links) == len(rounds) and all(g is None or 1 <= g <= 6 for g in links), links
    phases = paired["reference"]["phases_s"]  # where the window's time went
    assert list(phases) == ["open", "settle", "pairs", "finish"] and all(s >= 0 for s in phases.values())
    assert phases["pairs"] >= paired["seconds"] * 0.9, (phases, paired["seconds"])
    host = ev.details["timing"]["paired"]["reference"]["host"]
    assert host["issue_ms"] > 0 and 0 < host["cpu_share"] <= 1.05, host  # thread CPU <= wall
    # Who ran kernels in the window (clocks.gpu_users): the timing's own processes, nobody else.
    gpu = ev.details["timing"]["paired"]["reference"]["gpu"]
    assert gpu["quiet"] and gpu["busy_windows"] == 0 and gpu["users"], gpu
    if gpu["seen_self"]:  # NVML's pids are this namespace's
        assert {who for _, _, _, who in gpu["users"]} == {"window"}, gpu


def check(ev: Evaluation, expect: Expectation) -> None:
    assert expect.met_by(ev), f"{ev.status.value} at {ev.stage}: {ev.reason}\n{ev.feedback}"


@pytest.mark.parametrize("task", SEEDED, ids=[t.name for t in SEEDED])
def test_bundled_seed_is_correct_on_the_gpu(task: Task) -> None:
    assert task.seed_source is not None
    ev = run(task, task.seed_source)
    assert ev.status is Status.CORRECT, f"{ev.status}: {ev.reason}\n{ev.feedback}"
    assert not ev.interpreter and ev.runtime_ms and ev.eager_ms
    assert ev.details["timing"]["candidate"]["method"] == "cuda_events"
    assert ev.details["outputs_via"] == "cuda-ipc"  # no silent fallback to the byte path
    # The suite promises >= 50 us of eager work per task on a GPU.
    assert ev.eager_ms >= 0.05, f"{task.name}: eager {ev.eager_ms:.4f} ms"


@pytest.mark.parametrize("case", [c for c in corpus("legit") if c.device == "cuda"], ids=lambda c: c.id)
def test_gpu_legit_kernel_passes(case: Case) -> None:
    ev = run(load_task(case.task), case.path.read_text(), case.timeout_s)
    assert ev.ok, f"{ev.status.value} at {ev.stage}: {ev.reason}\n{ev.feedback}"
    assert_one_cpu(ev, threads=1)


@pytest.mark.parametrize("case", [c for c in corpus("fault") if c.device == "cuda"], ids=lambda c: c.id)
def test_gpu_fault_is_classified_and_the_gpu_stays_usable(case: Case) -> None:
    task = load_task(case.task)
    ev = run(task, case.path.read_text(), case.timeout_s, static_checks=False)
    check(ev, case.expect)
    assert_supervised_verdict(ev)
    after = run(task, task.seed_source or "", 300)
    assert after.ok, f"after {case.id}: {after.status.value}: {after.reason}"


@pytest.mark.parametrize("case", [c for c in corpus("hack") if c.device == "cuda"], ids=lambda c: c.id)
def test_gpu_hack_is_refused_statically_and_at_run_time(case: Case) -> None:
    task = load_task(case.task)
    check(run(task, case.path.read_text()), case.expect)
    if case.without_static is not None:
        check(run(task, case.path.read_text(), static_checks=False), case.without_static)


@pytest.mark.parametrize("name", CPU_HACKS_ON_GPU)
def test_cpu_corpus_hack_is_refused_on_the_gpu_too(name: str) -> None:
    from tests.core.corpus import load_case

    case = load_case(FIXTURES / "hacks" / f"{name}.py")
    check(run(load_task(case.task), case.path.read_text()), case.expect)
    if case.without_static is not None:  # the run-time layer on its own, as on the CPU
        check(run(load_task(case.task), case.path.read_text(), static_checks=False), case.without_static)


@pytest.mark.parametrize("name", CPU_LEGIT_ON_GPU)
def test_cpu_corpus_legit_kernel_passes_on_the_gpu_too(name: str) -> None:
    from tests.core.corpus import load_case

    case = load_case(FIXTURES / "legit" / f"{name}.py")
    ev = run(load_task(case.task), case.path.read_text(), case.timeout_s)
    assert ev.ok, f"{ev.status.value} at {ev.stage}: {ev.reason}\n{ev.feedback}"
    assert_one_cpu(ev, threads=1)


def test_launch_bound_task_is_compared_graph_to_graph_with_clocks_recorded() -> None:
    """axpy at n = 65536 takes a few us: both sides get CUDA-graph per-call figures, the speedup
    compares those, and the graph figure is cached beside the eager one."""
    from evokernel.evaluation.clocks import clock_state

    task = load_task(FIXTURES / "tasks" / "axpy.py")
    assert task.seed_source is not None
    ev = run(task, task.seed_source)
    assert ev.status is Status.CORRECT, f"{ev.status}: {ev.reason}\n{ev.feedback}"
    timing = ev.details["timing"]
    cand, eager = timing["candidate"], timing["eager"]
    print(
        {k: cand[k] for k in ("median_ms", "graph_median_ms", "graph_calls", "warmup_ms", "settled", "clock")}
    )
    assert cand["launch_bound"] and eager["launch_bound"], (cand["median_ms"], eager["median_ms"])
    assert timing["methods"]["eager"] == "cuda_graph"
    assert ev.runtime_ms == cand["graph_median_ms"] and ev.eager_ms == eager["graph_median_ms"]
    assert timing["eager_graph"]["median_ms"] == eager["graph_median_ms"]
    assert cand["graph_calls"] > 1 and cand["settled"] is not None
    if clock_state(torch.device("cuda")):
        assert cand["clock"]["start_sm_mhz"] > 0, cand["clock"]
