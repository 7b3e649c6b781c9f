"""The best-so-far curve as its steps: what a chart of :func:`best_so_far` draws, read index-only.

A step chart of the best-so-far curve only needs the points where the best changed, plus the first
and the last: :func:`best_steps` gives exactly those points of :func:`best_so_far` (same ``n``,
``x``, ``best`` and ``best_candidate``) without building one point per evaluated candidate, which
is what the dashboard asks for at every change of a 10^5-candidate task.

Against evaluations (the default axis) it reads indexes only, two passes over a task's candidates:
the correct ones through ix_candidates_run_task_status_speedup, each with its first evaluation's
id from ix_evaluations_candidate_id (their running maximum in that order gives the records), then
every candidate's first evaluation counted into the records' intervals (their ``n``). That uses
the candidate's stored verdict, which is its first evaluation's while it has only one, as every
candidate a run writes has; a task with a re-evaluated candidate, and the wall-time and dollar
axes, take the full curve and thin it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import case, func, literal, select
from sqlalchemy.orm import Session

from evokernel.analysis.convergence import ConvergencePoint, best_so_far
from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, EvaluationRow, RunRow, RunTaskRow
from evokernel.exceptions import AnalysisError


@dataclass(frozen=True)
class BestSteps:
    """``evaluated``: how many points the full curve has; ``points``: its first point, each point
    where the best changed, and its last point, in order."""

    evaluated: int
    points: tuple[ConvergencePoint, ...]


def thin(points: list[ConvergencePoint]) -> tuple[ConvergencePoint, ...]:
    """The first point, the points where the best changed, and the last point."""
    last = len(points) - 1
    return tuple(p for i, p in enumerate(points) if i in (0, last) or p.best != points[i - 1].best)


def best_steps(lib: SolutionLibrary, run_id: str, task: str, x: str = "evaluations") -> BestSteps:
    """``thin(best_so_far(lib, run_id, task, x))`` and its length, index-only for ``x="evaluations"``."""
    steps = lib.read(lambda s: _steps(s, run_id, task)) if x == "evaluations" else None
    if steps is None:
        points = best_so_far(lib, run_id, task, x)
        return BestSteps(len(points), thin(points))
    return steps


def _steps(s: Session, run_id: str, task: str) -> BestSteps | None:
    task_id = s.scalar(select(RunTaskRow.task_id).where(RunTaskRow.run_id == run_id, RunTaskRow.name == task))
    if task_id is None or s.get(RunRow, run_id) is None:
        raise AnalysisError(f"run {run_id!r} has no task {task!r}")
    c, e = CandidateRow, EvaluationRow
    mine = (c.run_id == run_id, c.task_id == task_id)
    first = select(func.min(e.id)).where(e.candidate_id == c.id).correlate(c).scalar_subquery()
    correct = s.execute(
        select(first, c.speedup, c.id).where(*mine, c.status == "correct", c.speedup.is_not(None))
    ).all()
    records: list[tuple[int, float, int]] = []  # (first evaluation id, speedup, candidate)
    for at, speedup, cid in sorted(r for r in correct if r[0] is not None):
        if not records or speedup > records[-1][1]:
            records.append((at, speedup, cid))
    # Each evaluated candidate counted into the interval of records its first evaluation falls in.
    firsts = select(first.label("first")).where(*mine).subquery()
    whens = [(firsts.c.first <= at, k) for k, (at, _s, _c) in enumerate(records)]
    interval = case(*whens, else_=len(records)) if whens else literal(0)
    counts: dict[int, int] = dict(
        s.execute(select(interval, func.count()).where(firsts.c.first.is_not(None)).group_by(interval)).all()
    )
    evaluated = sum(counts.values())
    evaluations = s.scalar(select(func.count()).select_from(c).join(e, e.candidate_id == c.id).where(*mine))
    if evaluations != evaluated:
        return None  # a re-evaluated candidate: its first verdict is not the stored one
    if evaluated == 0:
        return BestSteps(0, ())
    positions, n = [], 0
    for k in range(len(records)):
        n += counts.get(k, 0)
        positions.append(n)  # the record's own place: candidates first evaluated up to it
    points = []
    for n in sorted({1, evaluated, *positions}):
        held = [r for r, at in zip(records, positions, strict=True) if at <= n]
        best, holder = (held[-1][1], held[-1][2]) if held else (None, None)
        points.append(ConvergencePoint(n, float(n), best, holder))
    return BestSteps(evaluated, tuple(points))
