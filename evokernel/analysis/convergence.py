"""Best speedup so far against evaluations, active wall time or LLM dollars: the convergence curve.

Wall time is *active* time: a run killed at 10 min and resumed an hour later continues at 10 min.
Sessions start at the run's ``started``/``resumed`` events and end at its ``finished``/
``interrupted`` event, or, for a session that was killed, at its last evaluation. Dollars are
the cost of the run's LLM calls recorded at or before each evaluation.

:func:`evokernel.analysis.best_steps` gives the points of this curve a chart draws from indexes;
this module builds every point (the report's tables and exports)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
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
        return usd_at(times, costs)
    return active_seconds(times, events, created)


def usd_at(times: list[datetime], costs: list[tuple[datetime, float]]) -> list[float]:
    """LLM dollars of the calls (time, cost) recorded at or before each of ``times``."""
    ordered = sorted(costs, key=lambda c: c[0])  # stable: calls of one instant in id order
    stamps = [t for t, _c in ordered]
    cumulative = list(itertools.accumulate(c for _t, c in ordered))
    return [cumulative[i - 1] if (i := bisect.bisect_right(stamps, t)) else 0.0 for t in times]


def session_starts(events: list[tuple[str, datetime]], created: datetime) -> list[datetime]:
    """When each session of a run started (its ``started``/``resumed`` events, or its creation)."""
    return [t for kind, t in events if kind in ("started", "resumed")] or [created]


def session_ends(events: list[tuple[str, datetime]], starts: list[datetime]) -> dict[int, datetime]:
    """Session index -> its ``finished``/``interrupted`` event's time, for the sessions that have one."""
    ends: dict[int, datetime] = {}
    for kind, t in events:
        if kind in ("finished", "interrupted"):
            ends.setdefault(max(bisect.bisect_right(starts, t) - 1, 0), t)
    return ends


def active_seconds(
    times: list[datetime],
    events: list[tuple[str, datetime]],
    created: datetime,
    others: Sequence[datetime] = (),
) -> list[float]:
    """Seconds of active run time at each of ``times`` (ascending), leaving out the gaps between a
    session's end and the next session's start. A session without an end event (killed, or still
    running) ends with its last evaluation among ``times`` and ``others`` (further evaluations'
    times that need no figure of their own)."""
    starts = session_starts(events, created)
    ends = session_ends(events, starts)

    def session(t: datetime) -> int:
        return max(bisect.bisect_right(starts, t) - 1, 0)

    session_of = [session(t) for t in times]
    last: dict[int, datetime] = {}
    for t in itertools.chain(times, others):
        sess = session(t)
        last[sess] = max(last[sess], t) if sess in last else t
    for i in range(len(starts)):
        if i not in ends:  # killed: it ended with its last evaluation
            ends[i] = last.get(i, starts[i])
    before = [0.0]
    for i in range(len(starts)):
        before.append(before[-1] + max((ends[i] - starts[i]).total_seconds(), 0.0))
    return [
        before[sess] + max((t - starts[sess]).total_seconds(), 0.0)
        for t, sess in zip(times, session_of, strict=True)
    ]
