"""How the supervisor's verdict ends: a :class:`StageFailure` (status, stage, reason, feedback)
raised by the stage that failed, or :func:`correct_evaluation`, the ``correct`` verdict with
speedups over the eager and compiled baselines, each dividing two figures taken the same way
(:func:`evokernel.evaluation.timing_stats.comparable`)."""

from __future__ import annotations

from typing import Any

from evokernel.evaluation.timing_stats import comparable
from evokernel.types import Evaluation, Status


class StageFailure(Exception):
    def __init__(self, status: Status, stage: str, reason: str, feedback: str = "") -> None:
        super().__init__(reason)
        self.status, self.stage, self.reason, self.feedback = status, stage, reason, feedback or reason


def correct_evaluation(
    new: dict[str, Any], baselines: dict[str, Any], worst: float, feedback: str, details: dict[str, Any]
) -> Evaluation:
    """The verdict of a candidate that passed every stage: ``new`` is its timing, ``baselines``
    the reference's (``eager``, ``compile``), ``worst`` its largest error over the trials."""
    eager, compiled = baselines.get("eager"), baselines.get("compile")
    # Each speedup compares figures taken the same way (CUDA-graph per-call figures when both
    # sides are launch-bound, else flushed event medians); runtime_ms is the one vs eager.
    runtime, eager_ms, method = comparable(new, eager)
    runtime_c, compile_ms, method_c = comparable(new, compiled)
    speedup = eager_ms / runtime if eager_ms and runtime > 0 else None
    speedup_c = compile_ms / runtime_c if compile_ms and runtime_c > 0 else None
    return Evaluation(
        status=Status.CORRECT,
        stage="timing",
        max_abs_error=worst,
        runtime_ms=runtime,
        runtime_iqr_ms=new["iqr_ms"],
        runtime_cv=new["cv"],
        eager_ms=eager_ms,
        speedup_eager=speedup,
        compile_ms=compile_ms,
        speedup_compile=speedup_c,
        feedback=feedback,
        details={
            **details,
            "timing": {"candidate": new, **baselines, "methods": {"eager": method, "compile": method_c}},
        },
    )
