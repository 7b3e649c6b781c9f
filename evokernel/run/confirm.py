"""Confirmation before promotion (issue 35): a candidate whose first figure would make it its
task's best is evaluated again, timed in one window with the current best (the incumbent), before
it is recorded; the run records the second evaluation.

Why the second: the search picks the largest of many noisy figures, and the largest is biased
upward by its own noise (the winner's curse). A re-measurement taken *after* the pick is not: it
is the figure the strategy sees, ranks by and branches from. Its window also times the incumbent
beside it (``details["confirmation"]``: how much faster than the incumbent, with a 95 %
interval), and the candidate becomes the task's best only when that ratio is above 1.

A candidate that is correct once and incorrect or refused on its re-run is recorded with the
re-run's verdict (a result that does not reproduce is not a result); one whose re-run could not
finish (a timeout, a crash of the pool) keeps its first verdict, unconfirmed, and says why.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evokernel.types import Evaluation, Scored, Status, Task

# Re-run verdicts that speak about the candidate; the others (timeout, crashed) about the pool.
VERDICTS = (Status.CORRECT, Status.INCORRECT, Status.REJECTED, Status.COMPILE_ERROR, Status.RUNTIME_ERROR)


def enabled(setting: str, device: str) -> bool:
    """``evaluation.confirm_best``: ``auto`` confirms on a GPU only, where the figures are real."""
    return setting == "on" or (setting == "auto" and device == "cuda")


def would_be_best(first: Evaluation, best: Scored | None) -> bool:
    return (
        first.ok and first.speedup_eager is not None and (best is None or first.speedup_eager > best.speedup)
    )


async def confirmed(
    pool: Any, task: Task, source: str, first: Evaluation, incumbent: Scored | None, tenant: str
) -> Evaluation:
    """The evaluation to record for a candidate whose ``first`` evaluation would make it the best."""
    confirm = getattr(pool, "confirm", None)
    if confirm is None:  # an evaluator without confirmations (a stand-in): the figure stands
        return first
    other = incumbent.candidate.source if incumbent is not None else None
    second: Evaluation = await confirm(task, source, other, tenant=tenant, priority=1)
    earlier = {
        "speedup": first.speedup_eager,
        "low": first.speedup_low,
        "high": first.speedup_high,
        "status": first.status.value,
    }
    if second.status not in VERDICTS:
        why = f"the re-run ended {second.status.value}: {second.reason}"[:300]
        return replace(first, details={**first.details, "confirmation": {"error": why}})
    record = dict(second.details.get("confirmation") or {})
    record["incumbent"] = incumbent.candidate.id if incumbent is not None else None
    record["first"] = earlier
    return replace(second, confirmed=second.ok, details={**second.details, "confirmation": record})


def promoted(evaluation: Evaluation, best: Scored | None) -> bool:
    """Whether a recorded evaluation makes its candidate the task's best: faster than the
    incumbent in their shared window when it was confirmed against one, else by its figure."""
    if not evaluation.ok or evaluation.speedup_eager is None:
        return False
    if best is None:
        return True
    ratio = (evaluation.details.get("confirmation") or {}).get("vs_incumbent")
    if isinstance(ratio, float):
        return ratio > 1.0
    return evaluation.speedup_eager > best.speedup
