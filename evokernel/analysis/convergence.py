"""Best speedup so far against evaluations, active wall time or LLM dollars: the convergence curve.

Wall time is *active* time: a run killed at 10 min and resumed an hour later continues at 10 min.
Sessions start at the run's ``started``/``resumed`` events and end at its ``finished``/
``interrupted`` event, or, for a session that was killed, at its last evaluation."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, EvaluationRow, LLMCallRow, RunEventRow, RunRow, RunTaskRow
from evokernel.exceptions import AnalysisError

AXES = ("evaluations", "wall_s", "usd")


@dataclass
class _Rows:
    rows: list[tuple[Any, ...]]
    events: list[tuple[str, datetime]]
    costs: list[tuple[datetime, float]]
    created: datetime


@dataclass(frozen=True)
class ConvergencePoint:
    """After the ``n``-th evaluated candidate (at ``x``), the best correct speedup vs eager so far
    (None before the first correct one) and which candidate holds it."""

    n: int
    x: float
    best: float | None
    best_candidate: int | None


def best_so_far(
    lib: SolutionLibrary, run_id: str, task: str, x: str = "evaluations"
) -> list[ConvergencePoint]:
    """One point per evaluated candidate of ``task`` in the order their first evaluation was
    recorded (evaluations' primary key; candidates through (run_id, task_id, ...) indexes)."""
    if x not in AXES:
        raise AnalysisError(f"x must be one of {', '.join(AXES)}, not {x!r}")

    def fn(s: Session) -> _Rows:
        task_id = s.scalar(
            select(RunTaskRow.task_id).where(RunTaskRow.run_id == run_id, RunTaskRow.name == task)
        )
        run = s.get(RunRow, run_id)
        if task_id is None or run is None:
            raise AnalysisError(f"run {run_id!r} has no task {task!r}")
        e = EvaluationRow
        rows = s.execute(
            select(e.candidate_id, e.created_at, e.status, e.speedup_eager)
            .join(CandidateRow, CandidateRow.id == e.candidate_id)
            .where(CandidateRow.run_id == run_id, CandidateRow.task_id == task_id)
            .order_by(e.id)
        )
        events = s.execute(
            select(RunEventRow.kind, RunEventRow.created_at)
            .where(RunEventRow.run_id == run_id)
            .order_by(RunEventRow.id)
        )
        out = _Rows([tuple(r) for r in rows], [(k, t) for k, t in events], [], run.created_at)
        if x == "usd":
            calls = s.execute(
                select(LLMCallRow.created_at, LLMCallRow.cost_usd)
                .where(LLMCallRow.run_id == run_id)
                .order_by(LLMCallRow.id)
            )
            out.costs.extend((t, float(c)) for t, c in calls)
        return out

    data = lib.read(fn)
    seen: set[int] = set()
    first = []
    for cid, at, status, speedup in data.rows:
        if cid not in seen:
            seen.add(cid)
            first.append((cid, at, status, speedup))
    xs = _x_values([at for _c, at, _s, _p in first], x, data.events, data.costs, data.created)
    out: list[ConvergencePoint] = []
    best: float | None = None
    holder: int | None = None
    for n, ((cid, _at, status, speedup), xv) in enumerate(zip(first, xs, strict=True), start=1):
        if status == "correct" and speedup is not None and (best is None or speedup > best):
            best, holder = speedup, cid
        out.append(ConvergencePoint(n, xv, best, holder))
    return out


def _x_values(
    times: list[datetime],
    x: str,
    events: list[tuple[str, datetime]],
    costs: list[tuple[datetime, float]],
    created: datetime,
) -> list[float]:
    if x == "evaluations":
        return [float(i) for i in range(1, len(times) + 1)]
    if x == "usd":
        stamps = [t for t, _c in costs]
        cumulative = []
        total = 0.0
        for _t, c in costs:
            total += c
            cumulative.append(total)
        return [cumulative[i - 1] if (i := bisect.bisect_right(stamps, t)) else 0.0 for t in times]
    return active_seconds(times, events, created)


def active_seconds(
    times: list[datetime], events: list[tuple[str, datetime]], created: datetime
) -> list[float]:
    """Seconds of active run time at each of ``times`` (ascending), leaving out the gaps between a
    session's end and the next session's start."""
    starts = [t for kind, t in events if kind in ("started", "resumed")] or [created]
    ends: dict[int, datetime] = {}
    for kind, t in events:
        if kind in ("finished", "interrupted"):
            i = bisect.bisect_right(starts, t) - 1
            ends.setdefault(max(i, 0), t)
    session_of = [max(bisect.bisect_right(starts, t) - 1, 0) for t in times]
    for i in range(len(starts)):
        if i not in ends:  # killed: it ended with its last evaluation
            mine = [t for t, sess in zip(times, session_of, strict=True) if sess == i]
            ends[i] = max(mine) if mine else starts[i]
    before = [0.0]
    for i in range(len(starts)):
        before.append(before[-1] + max((ends[i] - starts[i]).total_seconds(), 0.0))
    return [
        before[sess] + max((t - starts[sess]).total_seconds(), 0.0)
        for t, sess in zip(times, session_of, strict=True)
    ]
