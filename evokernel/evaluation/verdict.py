"""How the supervisor's verdict ends: a :class:`StageFailure` (status, stage, reason, feedback)
raised by the stage that failed, or :func:`correct_evaluation`, the ``correct`` verdict with
speedups over the eager reference (timed paired with the candidate, with an interval) and the
compiled baseline, each dividing two figures taken the same way
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
    new: dict[str, Any],
    baselines: dict[str, Any],
    worst: float,
    feedback: str,
    details: dict[str, Any],
    paired: dict[str, Any],
) -> Evaluation:
    """The verdict of a candidate that passed every stage: ``new`` is its timing, ``baselines``
    the reference's cached figures (``eager``, ``compile``), ``paired`` the candidate and the eager
    reference timed in one window (:class:`~evokernel.evaluation.pairing.PairedRatio`'s dict),
    ``worst`` its largest error over the trials.

    The speedup over eager is the paired ratio with its interval, except when both sides are
    launch-bound and have CUDA-graph figures: then it compares those (launch overhead removed,
    which host load does not move; no interval). The compile speedup divides the cached
    ``torch.compile`` figure by the candidate's paired median (no interval: not paired)."""
    eager, compiled = baselines.get("eager"), baselines.get("compile")
    runtime, eager_ms, method = comparable(new, eager)
    low = high = None
    if method == "cuda_graph":
        speedup = eager_ms / runtime if eager_ms and runtime > 0 else None
    else:
        runtime, eager_ms, method = float(paired["a_ms"]), float(paired["b_ms"]), "paired"
        speedup, low, high = float(paired["ratio"]), float(paired["low"]), float(paired["high"])
    runtime_c, compile_ms, method_c = comparable({**new, "median_ms": runtime}, compiled)
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
        speedup_low=low,
        speedup_high=high,
        compile_ms=compile_ms,
        speedup_compile=speedup_c,
        feedback=feedback,
        details={
            **details,
            "timing": {
                "candidate": new,
                **baselines,
                "paired": paired,
                "methods": {"eager": method, "compile": method_c},
            },
        },
    )
