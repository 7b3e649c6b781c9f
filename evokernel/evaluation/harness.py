"""What runs inside the sandbox process: build, check and time one candidate against its task.

Invoked as ``python -m evokernel.evaluation.harness REQUEST.json RESULT.json`` by
:mod:`evokernel.evaluation.sandbox`, in a fresh process whose working directory is the candidate's
own temporary folder. The request carries the task's source (not a path: the process may be on
another node), the module-global overrides of each input variant, and the candidate's source.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from evokernel.evaluation.correctness import compare
from evokernel.evaluation.feedback import trim_traceback
from evokernel.evaluation.timing import TimingSettings, time_callable
from evokernel.types import Evaluation, Status

# Weights of both models come from the same generator state; inputs of seed s from another.
INIT_SEED = 42


class StageFailure(Exception):
    def __init__(self, status: Status, stage: str, reason: str, feedback: str = "") -> None:
        super().__init__(reason)
        self.status, self.stage, self.reason, self.feedback = status, stage, reason, feedback or reason


def load_module(path: Path, name: str, overrides: dict[str, Any] | None = None) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    module.__dict__.update(overrides or {})
    return module


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(_to_device(v, device) for v in value)
    return value


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list | tuple):
        return type(value)(_clone(v) for v in value)
    return value


def _is_compile_error(exc: BaseException) -> bool:
    """Triton's JIT compiles at the first launch, so its compile errors surface during a call.
    ``OutOfResources`` (a tile needing more shared memory than the GPU has) is a build failure too."""
    mod, name = type(exc).__module__, type(exc).__name__
    from_triton = mod.startswith("triton") and ("Compil" in name or name == "OutOfResources")
    return from_triton or isinstance(exc, SyntaxError)


def _build_models(task: ModuleType, cand: ModuleType, device: torch.device) -> tuple[Any, Any]:
    init = task.get_init_inputs()
    torch.manual_seed(INIT_SEED)
    reference = task.Model(*init).to(device).eval()
    try:
        torch.manual_seed(INIT_SEED)
        candidate = cand.ModelNew(*init).to(device).eval()
    except Exception as exc:
        raise StageFailure(
            Status.RUNTIME_ERROR, "build", f"ModelNew(...) raised {type(exc).__name__}", trim_traceback(exc)
        ) from exc
    ref_state, cand_state = reference.state_dict(), candidate.state_dict()
    # Same parameter names and shapes: give the candidate the reference's weights exactly, so a
    # candidate that initialises differently is not failed for it.
    if ref_state.keys() == cand_state.keys() and all(
        ref_state[k].shape == cand_state[k].shape for k in ref_state
    ):
        candidate.load_state_dict(ref_state)
    return reference, candidate


def _call(model: Any, inputs: list[Any], stage: str) -> Any:
    try:
        with torch.no_grad():
            return model(*inputs)
    except Exception as exc:
        status = Status.COMPILE_ERROR if _is_compile_error(exc) else Status.RUNTIME_ERROR
        raise StageFailure(
            status, stage, f"{type(exc).__name__}: {str(exc)[:300]}", trim_traceback(exc)
        ) from exc


def evaluate(request: dict[str, Any], workdir: Path) -> Evaluation:
    device = torch.device(request["device"])
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    task_info = request["task"]
    tolerance = {k: tuple(v) for k, v in task_info["tolerance"].items()}
    (workdir / "reference.py").write_text(task_info["source"])
    (workdir / "candidate.py").write_text(request["candidate_source"])
    start = time.perf_counter()
    details: dict[str, Any] = {"checks": [], "stage_s": {}}

    t0 = time.perf_counter()
    try:
        cand = load_module(workdir / "candidate.py", "evokernel_candidate")
    except Exception as exc:
        raise StageFailure(
            Status.COMPILE_ERROR, "build", f"import failed: {type(exc).__name__}: {exc}", trim_traceback(exc)
        ) from exc
    if not hasattr(cand, "ModelNew"):
        raise StageFailure(Status.COMPILE_ERROR, "build", "the candidate defines no ModelNew")
    details["stage_s"]["build"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    worst = 0.0
    timing_case: tuple[Any, Any, list[Any]] | None = None
    for variant, overrides in enumerate(request["overrides"]):
        task = load_module(workdir / "reference.py", f"evokernel_reference_{variant}", overrides)
        reference, candidate = _build_models(task, cand, device)
        for seed in range(request["seeds"]):
            torch.manual_seed(1000 * variant + seed)
            inputs = _to_device(task.get_inputs(), device)
            got = _call(candidate, _clone(inputs), "correctness")
            expected = _call(reference, _clone(inputs), "reference")
            result = compare(got, expected, tolerance)
            details["checks"].append(
                {"variant": variant, "seed": seed, "ok": result.ok, "max_abs_error": result.max_abs_error}
            )
            if not result.ok:
                where = f"variant {variant} {overrides or '(default sizes)'}, seed {seed}"
                raise StageFailure(Status.INCORRECT, "correctness", f"{where}: {result.message}")
            worst = max(worst, result.max_abs_error or 0.0)
        if timing_case is None:
            timing_case = (reference, candidate, inputs)
    details["stage_s"]["correctness"] = time.perf_counter() - t0

    assert timing_case is not None
    t0 = time.perf_counter()
    reference, candidate, inputs = timing_case
    settings = TimingSettings(**request["timing"])
    with torch.no_grad():
        new = time_callable(lambda: candidate(*inputs), device, settings)
        eager = time_callable(lambda: reference(*inputs), device, settings)
    details["stage_s"]["timing"] = time.perf_counter() - t0
    details["timing"] = {"candidate": new.to_dict(), "eager": eager.to_dict()}
    speedup = eager.median_ms / new.median_ms if new.median_ms > 0 else None
    note = " (Triton interpreter on CPU: not GPU performance)" if device.type == "cpu" else ""
    return Evaluation(
        status=Status.CORRECT,
        stage="timing",
        max_abs_error=worst,
        runtime_ms=new.median_ms,
        runtime_iqr_ms=new.iqr_ms,
        runtime_cv=new.cv,
        eager_ms=eager.median_ms,
        speedup_eager=speedup,
        feedback=(
            f"correct; {new.median_ms:.4g} ms vs eager {eager.median_ms:.4g} ms "
            f"= {speedup or 0:.3f}x{note}; max abs error {worst:.2g}"
        ),
        duration_s=time.perf_counter() - start,
        details=details,
    )


def main(argv: list[str]) -> int:
    request_path, result_path = Path(argv[1]), Path(argv[2])
    request = json.loads(request_path.read_text())
    start = time.perf_counter()
    try:
        evaluation = evaluate(request, request_path.parent)
    except StageFailure as failure:
        evaluation = Evaluation(
            status=failure.status,
            stage=failure.stage,
            reason=failure.reason,
            feedback=failure.feedback,
            duration_s=time.perf_counter() - start,
        )
    except Exception as exc:  # noqa: BLE001 - e.g. the reference itself failed: report, do not hide
        evaluation = Evaluation(
            status=Status.CRASHED,
            stage="harness",
            reason=f"harness error: {type(exc).__name__}: {exc}",
            feedback=traceback.format_exc()[-2000:],
        )
    device = torch.device(request["device"])
    label = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"
    evaluation = replace(evaluation, device=label, interpreter=device.type == "cpu")
    result_path.write_text(json.dumps(evaluation.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
