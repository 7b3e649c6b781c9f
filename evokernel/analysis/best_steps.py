"""The best-so-far curve as its steps: what a chart of :func:`best_so_far` draws, read index-only.

A step chart of the best-so-far curve only needs the points where the best changed, plus the first
and the last: :func:`best_steps` gives exactly those points of :func:`best_so_far` (same ``n``,
``x``, ``best`` and ``best_candidate``) without building one point per evaluated candidate, which
is what the dashboard asks for at every change of a 10^5-candidate task.

Against evaluations (the default axis) it walks ix_candidates_run_task_first_evaluation: each
candidate's first evaluation and that evaluation's speedup if it was correct, which the library
stores with the candidate (migration 0005). Each step of the curve is the next candidate, in
first-evaluation order, faster than the last step: one LIMIT 1 index walk from the last step, so
all walks together read the index up to the final step once, in the database, and its place is
an index range count. The wall-time and dollar axes take the full curve and thin it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.analysis.convergence import ConvergencePoint, best_so_far
from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, RunRow, RunTaskRow
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
    if x == "evaluations":
        return lib.read(lambda s: _steps(s, run_id, task))
    points = best_so_far(lib, run_id, task, x)
    return BestSteps(len(points), thin(points))


def _steps(s: Session, run_id: str, task: str) -> BestSteps:
    task_id = s.scalar(select(RunTaskRow.task_id).where(RunTaskRow.run_id == run_id, RunTaskRow.name == task))
    if task_id is None or s.get(RunRow, run_id) is None:
        raise AnalysisError(f"run {run_id!r} has no task {task!r}")
    c = CandidateRow
    mine = (c.run_id == run_id, c.task_id == task_id)
    # Each record: the next candidate, in first-evaluation order, faster than the last record. One
    # LIMIT 1 walk each, all walks together cover the index entries up to the last record once.
    records: list[tuple[int, float, int]] = []  # (first evaluation id, speedup, candidate)
    while True:
        after, faster = (
            (records[-1][0], c.first_speedup > records[-1][1])
            if records
            else (0, c.first_speedup.is_not(None))
        )
        row = s.execute(
            select(c.first_evaluation_id, c.first_speedup, c.id)
            .where(*mine, c.first_evaluation_id > after, faster)
            .order_by(c.first_evaluation_id)
            .limit(1)
        ).first()
        if row is None:
            break
        records.append((int(row[0]), float(row[1]), int(row[2])))
    # A record's place n: candidates first evaluated up to it (ranges between records, counted).
    positions, n, low = [], 0, 0
    for at, _speedup, _cid in records:
        n += (
            s.scalar(
                select(func.count()).where(*mine, c.first_evaluation_id > low, c.first_evaluation_id <= at)
            )
            or 0
        )
        positions.append(n)
        low = at
    evaluated = n + (s.scalar(select(func.count()).where(*mine, c.first_evaluation_id > low)) or 0)
    if evaluated == 0:
        return BestSteps(0, ())
    points = []
    for n in sorted({1, evaluated, *positions}):
        held = [r for r, at in zip(records, positions, strict=True) if at <= n]
        best, holder = (held[-1][1], held[-1][2]) if held else (None, None)
        points.append(ConvergencePoint(n, float(n), best, holder))
    return BestSteps(evaluated, tuple(points))
