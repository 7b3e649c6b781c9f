"""``evokernel verify TASK CANDIDATE``: every stage on one candidate file, as a report or JSON.

The same sandbox the pool uses, run in this process's own subprocess (no Ray). On a CPU the task
runs at its ``small`` sizes under Triton's interpreter; on a GPU at its own sizes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evokernel.config.schema import EvaluationConfig
from evokernel.evaluation.isolation import check
from evokernel.evaluation.profiles import PROFILES
from evokernel.evaluation.profiling.summary import profile_lines
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.exceptions import EvaluationError
from evokernel.tasks import load_task
from evokernel.types import Evaluation


def resolve_device(device: str) -> str:
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise EvaluationError(f"--device must be auto, cpu or cuda, not {device!r}")
    return device


def verify(
    task_path: str | Path,
    candidate_path: str | Path,
    device: str = "auto",
    config: EvaluationConfig | None = None,
) -> Evaluation:
    config = config or EvaluationConfig()
    task = load_task(task_path)
    path = Path(candidate_path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvaluationError(f"{path}: cannot read the candidate file: {exc}") from exc
    device = resolve_device(device)
    scale = config.scale if config.scale != "auto" else ("full" if device == "cuda" else "small")
    check(config.isolation)  # refuse before anything runs, naming what the machine lacks
    request = build_request(task, source, device=device, scale=scale, seeds=config.seeds, evaluation=config)
    return run_sandboxed(request, config.timeout_s)


def report_dict(evaluation: Evaluation) -> dict[str, Any]:
    """The ``--json`` object: the issue's required keys first, then the figures and the stages."""
    profile = evaluation.details.get("profiling") or {}
    return {
        "status": evaluation.status.value,
        "reason": evaluation.reason,
        "stage": evaluation.stage,
        "profile": evaluation.profile,
        "speedup_eager": evaluation.speedup_eager if evaluation.ok else None,
        "speedup_compile": evaluation.speedup_compile if evaluation.ok else None,
        # The 95 % interval of speedup_eager (None: not measured paired) and how it was sampled.
        "speedup_low": evaluation.speedup_low if evaluation.ok else None,
        "speedup_high": evaluation.speedup_high if evaluation.ok else None,
        "paired": _paired(evaluation) or None,
        "confirmed": evaluation.confirmed,
        "runtime_ms": evaluation.runtime_ms,
        "runtime_iqr_ms": evaluation.runtime_iqr_ms,
        "runtime_cv": evaluation.runtime_cv,
        "eager_ms": evaluation.eager_ms,
        "compile_ms": evaluation.compile_ms,
        "max_abs_error": evaluation.max_abs_error,
        "device": evaluation.device,
        "interpreter": evaluation.interpreter,
        "stages": evaluation.details.get("stages", []),
        # The profiling stage's verdict (evaluation/profiling/): class, share, and the whole profile.
        "bottleneck": profile.get("bottleneck") if profile.get("status") == "ok" else None,
        "sol_share": (profile.get("sol") or {}).get("share") if profile.get("status") == "ok" else None,
        "profiling": profile or None,
        "feedback": evaluation.feedback,
        "duration_s": evaluation.duration_s,
    }


def format_report(evaluation: Evaluation) -> str:
    lines = [f"status: {evaluation.status.value}" + (f" ({evaluation.stage})" if evaluation.stage else "")]
    known = PROFILES.get(evaluation.profile)  # what the verdict's contract was, the models' mode included
    lines.append(f"profile: {evaluation.profile}" + (f" ({known.description})" if known else ""))
    if evaluation.reason:
        lines.append(f"reason: {evaluation.reason}")
    if evaluation.ok and evaluation.speedup_eager is not None:
        lines.append(f"speedup vs eager: {speedup_line(evaluation)}")
    for stage in evaluation.details.get("stages", []):
        why = f"  {stage['reason']}" if stage.get("reason") else ""
        lines.append(f"  {stage['stage']:<12} {stage['status']:<7} {stage['seconds']:8.3f} s{why}")
    profile = evaluation.details.get("profiling") or {}
    if profile:
        lines.append(f"profiling: {profile.get('level')}, {profile.get('status')}")
        lines.extend(f"  {line}" for line in profile_lines(profile))
    if evaluation.feedback and evaluation.feedback != evaluation.reason:
        lines.append("feedback:")
        lines.extend(f"  {line}" for line in evaluation.feedback.splitlines())
    if evaluation.interpreter and evaluation.ok:
        lines.append("note: Triton interpreter on a CPU: timings are not GPU performance")
    return "\n".join(lines)


def _paired(evaluation: Evaluation) -> dict[str, Any]:
    paired = (evaluation.details.get("timing") or {}).get("paired")
    return paired if isinstance(paired, dict) else {}


def speedup_line(evaluation: Evaluation) -> str:
    """``2.05x [1.98-2.11] (95 % interval, 24 pairs, stopped at precision)``; the bare figure and
    ``(not paired)`` for a speedup timed without pairs (no interval to show)."""
    figure = evaluation.speedup_text
    if evaluation.speedup_low is None or evaluation.speedup_high is None:
        return f"{figure} (not paired)"
    paired = _paired(evaluation)
    level = float(paired.get("level", 0.95))
    about = [f"{100 * level:.0f} % interval"]
    if paired.get("window_spread"):  # pairing.with_window_spread
        about[0] += f" with {100 * float(paired['window_spread']):.1f} % between windows"
    if paired.get("pairs") is not None:
        about.append(f"{paired['pairs']} pairs")
    if paired.get("stopped"):
        about.append(f"stopped at {paired['stopped']}")
    if evaluation.confirmed:
        about.append("confirmed")
    return f"{figure} ({', '.join(about)})"


def to_json(evaluation: Evaluation) -> str:
    return json.dumps(report_dict(evaluation))
