"""The profiling stage: after timing, never inside it, for correct candidates and references.

Enters: a candidate that passed timing (its worker still alive, warm, at the timing variant's
sizes) or a task's reference after its baselines. Leaves: ``details["profiling"]`` (or
``details["reference_profiling"]``): the level, a status (``ok``, ``skipped: no GPU``,
``failed: ...``), the timeline, the counters, the speed of light and the bottleneck verdict.
A profile never changes a verdict or a timing figure: every failure here is recorded and the
evaluation goes on.

The GPU lock (gpulock.py): the profiled call holds the shared side, as correctness trials do,
so no other candidate is being timed meanwhile; Nsight Compute replays kernels for seconds and
holds the exclusive side.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evokernel.evaluation.profiling import counters as ncu
from evokernel.evaluation.profiling.verdict import classify, speed_of_light, task_work
from evokernel.evaluation.replies import ProfileReply, R
from evokernel.evaluation.verdict import StageFailure

if TYPE_CHECKING:
    import torch

    from evokernel.evaluation.gpulock import GpuLock
    from evokernel.evaluation.request import EvaluationRequest


class Supervisor(Protocol):
    """What the stage uses of :class:`evokernel.evaluation.supervisor.Supervisor`."""

    request: EvaluationRequest
    device: torch.device
    gpu: GpuLock

    @property
    def deadline(self) -> float: ...

    def enter(self, stage: str) -> None: ...

    def passed(self, reason: str = "") -> None: ...

    def skipped(self, reason: str) -> None: ...

    def stop_worker(self) -> None: ...

    def ask(
        self,
        command: dict[str, Any],
        kind: type[R],
        meanwhile: Any = None,
        limit_s: float | None = None,
        lock: bool = True,
        worker: Any = None,
    ) -> tuple[R, bytearray]: ...


__all__ = ["LEVELS", "level_of", "profile_candidate", "profile_reference", "task_work", "wanted"]

LEVELS = ("none", "timeline", "counters")
# Past this the counters are dropped (the timeline stays), so a slow profile never costs a
# candidate its verdict; under the exclusive lock's 60 s patience (gpulock.py), so no timing
# ever overlaps a replay.
COUNTERS_TIMEOUT_S = 55.0
# The worker's profiled call and the reference's timeline process: past these the step is killed
# and the profile says so; the verdict stands either way.
STEP_TIMEOUT_S = 30.0
REFERENCE_TIMEOUT_S = 90.0


def level_of(request: EvaluationRequest) -> str:
    level = request.profiling
    if level not in LEVELS:
        raise ValueError(f"evaluation.profiling must be one of {', '.join(LEVELS)}, not {level!r}")
    return level


def wanted(request: EvaluationRequest) -> bool:
    return level_of(request) != "none"


def finish(
    level: str,
    timeline: dict[str, Any] | None,
    counters: dict[str, Any] | None,
    work: dict[str, Any] | None,
    device_name: str,
    runtime_ms: float | None,
    status: str,
) -> dict[str, Any]:
    """The profile record: SOL from the task's work and the timed runtime, then the verdict."""
    sol = speed_of_light(work, device_name, runtime_ms) if work else None
    rows = (counters or {}).get("kernels") or None
    verdict = (
        classify(timeline, rows, sol, runtime_ms)
        if timeline is not None
        else {"class": "unknown", "why": status}
    )
    return {
        "level": level,
        "status": status,
        "device": device_name,
        "timeline": timeline,
        "counters": counters,
        "sol": sol,
        "bottleneck": verdict.pop("class"),
        "why": verdict.pop("why"),
        "figures": verdict,
    }


def _counters(
    request: EvaluationRequest, timeline: dict[str, Any], mode: str, gpu: GpuLock, budget_s: float
) -> dict[str, Any]:
    path = ncu.find_ncu()
    if path is None:
        return {"status": "unavailable: Nsight Compute (ncu) not found", "kernels": []}
    workdir = Path(request.workdir or Path.cwd())
    # The candidate's source again from the request, not whatever the worker left in its
    # directory; the target loads the task from the request itself (workspace.py).
    if mode == "candidate":
        (workdir / "candidate.py").write_text(request.candidate_source)
    with tempfile.TemporaryDirectory(prefix="evk-prof-") as tmp:
        # Nsight Compute's interprocess lock lives in TMPDIR, which ncu and its (confined) target
        # must share: a directory made here for the two of them, outside the candidate's.
        lock_dir = Path(tmp) / "ncu"
        lock_dir.mkdir(mode=0o700)
        request_path = Path(tmp) / "request.json"
        placed = replace(request, workdir=str(workdir), ncu_tmp=str(lock_dir))
        request_path.write_text(json.dumps(placed.to_json()))
        with gpu.hold("counters"):
            return ncu.run_counters(
                path, timeline, workdir, request_path, mode, min(COUNTERS_TIMEOUT_S, budget_s), lock_dir
            )


def _reference_timeline(request: EvaluationRequest) -> tuple[dict[str, Any] | None, str]:
    workdir = Path(request.workdir or Path.cwd())
    with tempfile.TemporaryDirectory(prefix="evk-prof-") as tmp:
        request_path, out = Path(tmp) / "request.json", Path(tmp) / "timeline.json"
        request_path.write_text(json.dumps(replace(request, workdir=str(workdir)).to_json()))
        cmd = [
            sys.executable,
            "-P",  # the target's cwd is the candidate's directory: never on sys.path
            "-m",
            "evokernel.evaluation.profiling.target",
            str(request_path),
            "reference",
            str(out),
        ]
        try:
            done = subprocess.run(
                cmd, cwd=workdir, capture_output=True, text=True, timeout=REFERENCE_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return None, f"failed: the reference's profile took over {REFERENCE_TIMEOUT_S:.0f} s"
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            return None, f"failed: {tail[0]}"[:400]
        return json.loads(out.read_text()), "ok"


def profile_candidate(sup: Supervisor, work: dict[str, Any] | None, runtime_ms: float) -> dict[str, Any]:
    """The stage for a candidate that passed timing; stops its worker."""
    level = level_of(sup.request)
    sup.enter("profiling")
    if sup.device.type != "cuda":
        sup.stop_worker()
        sup.skipped("no GPU")
        return {"level": level, "status": "skipped: no GPU", "bottleneck": "unknown", "why": "no GPU"}
    from evokernel.evaluation.baselines import device_label

    started = time.perf_counter()
    timeline: dict[str, Any] | None = None
    status = "ok"
    try:
        # CUPTI started with the worker (worker.serve); the profiled call holds the shared lock.
        profiled, _ = sup.ask({"op": "profile"}, ProfileReply, limit_s=STEP_TIMEOUT_S)
        timeline = profiled.timeline
        if "error" in timeline:
            status = f"failed: {timeline['error']}"[:400]
            timeline = None
    except StageFailure as failure:  # a worker that hangs in CUPTI is killed at STEP_TIMEOUT_S
        status = f"failed: {failure.reason}"[:400]
    sup.stop_worker()
    counters = None
    if level == "counters" and timeline is not None:
        counters = _counters(sup.request, timeline, "candidate", sup.gpu, sup.deadline - time.perf_counter())
    profile = finish(level, timeline, counters, work, device_label(sup.device), runtime_ms, status)
    profile["seconds"] = round(time.perf_counter() - started, 4)
    sup.passed(f"{profile['bottleneck']}: {profile['why']}" if status == "ok" else status)
    return profile


def profile_reference(
    request: EvaluationRequest,
    device: torch.device,
    gpu: GpuLock,
    model_inputs: Callable[[], tuple[Any, list[Any]]],
    eager_ms: float | None,
) -> dict[str, Any]:
    """The reference's profile, in the baselines job: its work counted here, its timeline taken in a
    process of its own (:mod:`.target`, killed past :data:`REFERENCE_TIMEOUT_S`), so a profiler
    that hangs never holds up the task's baselines."""
    from evokernel.evaluation.baselines import device_label

    level = level_of(request)
    if device.type != "cuda":
        return {"level": level, "status": "skipped: no GPU", "bottleneck": "unknown", "why": "no GPU"}
    started = time.perf_counter()
    with gpu.hold("reference"):
        model, inputs = model_inputs()
        work = task_work(model, inputs)
        del model, inputs
    timeline, status = _reference_timeline(request)
    counters = None
    if level == "counters" and timeline is not None:
        counters = _counters(request, timeline, "reference", gpu, COUNTERS_TIMEOUT_S)
    profile = finish(level, timeline, counters, work, device_label(device), eager_ms, status)
    profile["seconds"] = round(time.perf_counter() - started, 4)
    return profile
