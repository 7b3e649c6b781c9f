"""The best-so-far curve as its steps: what a chart of :func:`best_so_far` draws, read index-only.

A step chart of the best-so-far curve only needs the points where the best changed, plus the first
and the last: :func:`best_steps` gives exactly those points of :func:`best_so_far` (same ``n``,
``best`` and ``best_candidate``; the same ``x``, dollars summed in another order) without building
one point per evaluated candidate, which is what the dashboard asks for at every change of a
10^5-candidate task.

It walks ix_candidates_run_task_first_evaluation: each candidate's first evaluation and that
evaluation's speedup if it was correct, which the library stores with the candidate (migration
0005). Each step of the curve is the next candidate, in first-evaluation order, faster than the
last step: one LIMIT 1 index walk from the last step, so all walks together read the index up to
the final step once, in the database; a step's place is an index range count. Against time, the
steps' evaluations are read by primary key, plus, for each killed session that a later one
follows, its last evaluation time (one pass over the task's first evaluations each);
against dollars, the run's calls up to each step are summed over ix_llm_calls_run_time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.analysis.convergence import (
    AXES,
    ConvergencePoint,
    active_seconds,
    session_ends,
    session_starts,
)
from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, EvaluationRow, LLMCallRow, RunEventRow, RunRow, RunTaskRow
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
    """``thin(best_so_far(lib, run_id, task, x))`` and its length, from indexes."""
    if x not in AXES:
        raise AnalysisError(f"x must be one of {', '.join(AXES)}, not {x!r}")
    return lib.read(lambda s: _steps(s, run_id, task, x))


def _steps(s: Session, run_id: str, task: str, x: str) -> BestSteps:
    task_id = s.scalar(select(RunTaskRow.task_id).where(RunTaskRow.run_id == run_id, RunTaskRow.name == task))
    run = s.get(RunRow, run_id)
    if task_id is None or run is None:
        raise AnalysisError(f"run {run_id!r} has no task {task!r}")
    c = CandidateRow
    mine = (c.run_id == run_id, c.task_id == task_id)
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
    kept = sorted({1, evaluated, *positions})
    if x == "evaluations":
        xs = [float(n) for n in kept]
    else:  # the evaluation behind each kept point: a record's own, the first and the last
        # Two statements: SQLite seeks one end of the index for a lone min() or max(), not both.
        first = s.execute(select(func.min(c.first_evaluation_id)).where(*mine)).scalar_one()
        last = s.execute(select(func.max(c.first_evaluation_id)).where(*mine)).scalar_one()
        at_n: dict[int, int] = {1: int(first), evaluated: int(last)}
        at_n |= {pos: r[0] for r, pos in zip(records, positions, strict=True)}
        xs = _times_to_x(s, run, task_id, x, [at_n[n] for n in kept])
    points = []
    for n, xv in zip(kept, xs, strict=True):
        held = [r for r, pos in zip(records, positions, strict=True) if pos <= n]
        best, holder = (held[-1][1], held[-1][2]) if held else (None, None)
        points.append(ConvergencePoint(n, xv, best, holder))
    return BestSteps(evaluated, tuple(points))


def _times_to_x(s: Session, run: RunRow, task_id: int, x: str, evaluation_ids: list[int]) -> list[float]:
    e = EvaluationRow
    when: dict[Any, Any] = dict(s.execute(select(e.id, e.created_at).where(e.id.in_(evaluation_ids))).all())
    times: list[datetime] = [when[i] for i in evaluation_ids]
    if x == "usd":
        return _usd_at(s, run.id, times)
    events = [
        (kind, t)
        for kind, t in s.execute(
            select(RunEventRow.kind, RunEventRow.created_at)
            .where(RunEventRow.run_id == run.id)
            .order_by(RunEventRow.id)
        )
    ]
    # A session without an end event ends with its last evaluation of the task; that matters only
    # for a killed session that a later one follows (the last session's end moves no point).
    c = CandidateRow
    starts = session_starts(events, run.created_at)
    ended = session_ends(events, starts)
    lasts = []
    for i in range(len(starts) - 1):
        if i not in ended:
            within = (e.created_at < starts[i + 1],) + ((e.created_at >= starts[i],) if i else ())
            lasts.append(
                s.scalar(
                    select(func.max(e.created_at))
                    .select_from(c)
                    .join(e, e.id == c.first_evaluation_id)
                    .where(c.run_id == run.id, c.task_id == task_id, *within)
                )
            )
    return active_seconds(times, events, run.created_at, [t for t in lasts if t is not None])


def _usd_at(s: Session, run_id: str, times: list[datetime]) -> list[float]:
    """Dollars of the run's calls recorded at or before each of ``times``: ix_llm_calls_run_time
    summed range by range between consecutive times, so the run's calls up to the latest are
    walked once, in the database."""
    call = LLMCallRow
    total, upto, low = 0.0, {}, None
    for b in sorted(set(times)):
        since = () if low is None else (call.created_at > low,)
        total += float(
            s.scalar(
                select(func.sum(call.cost_usd)).where(call.run_id == run_id, *since, call.created_at <= b)
            )
            or 0.0
        )
        upto[b], low = total, b
    return [upto[t] for t in times]
