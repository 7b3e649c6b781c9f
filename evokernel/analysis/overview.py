"""A run at a glance: per task the best kernel and its figures, per run ``fast_p`` and the geomean.

``fast_p`` is KernelBench's: the share of tasks whose best kernel is correct *and* faster than
``p`` x eager (strictly), so fast_0 is the share of tasks with any correct kernel."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.analysis.runs import RunRow, run_rows
from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, EvaluationRow, RunTaskRow
from evokernel.db.models import RunRow as RunModel
from evokernel.exceptions import RunNotFoundError
from evokernel.types import format_speedup

# Verdicts recorded before evaluation profiles existed were made by evokernel's own checks,
# which the profiles issue names "strict".
DEFAULT_PROFILE = "strict"


@dataclass(frozen=True)
class TaskOverview:
    """The best correct kernel of one task of a run (``best_candidate`` None: no correct one yet).
    Runtimes are medians in ms; ``interpreter`` True means CPU interpreter timings."""

    task: str
    best_candidate: int | None
    speedup_eager: float | None
    speedup_compile: float | None
    runtime_ms: float | None
    eager_ms: float | None
    compile_ms: float | None
    profile: str
    device: str
    interpreter: bool
    evaluations: int
    correct: int
    budget: int
    # The best kernel's speed-of-light share and bottleneck class (evaluations columns of 0006);
    # None when it was not profiled.
    sol_share: float | None = None
    bottleneck: str | None = None
    # The 95 % interval of speedup_eager (None: not measured paired) and its confirmation (0008).
    speedup_low: float | None = None
    speedup_high: float | None = None
    confirmed: bool = False

    @property
    def speedup_text(self) -> str:
        return format_speedup(self.speedup_eager, self.speedup_low, self.speedup_high)


@dataclass(frozen=True)
class RunOverview:
    run: RunRow
    tasks: tuple[TaskOverview, ...]
    fast_p: tuple[tuple[float, float], ...]
    # Geometric mean of the best speedups over the tasks that have a correct kernel.
    geomean: float | None
    correct_tasks: int
    interpreter: bool


def fast_p(speedups: list[float | None], ps: list[float]) -> list[tuple[float, float]]:
    """(p, share of ``speedups`` that are not None and > p) for each p; None: no correct kernel.
    At p = 0 every correct kernel counts (KernelBench's fast_0 is the correctness rate), also one
    without a measured speedup (given as 0.0)."""
    n = len(speedups)
    if n == 0:
        return [(p, 0.0) for p in ps]
    return [(p, sum(1 for s in speedups if s is not None and (s > p or p == 0)) / n) for p in ps]


def fast_p_grid(speedups: list[float | None], steps: int = 60) -> list[float]:
    """p from 0 to a bit past the largest speedup (at least 2), plus every speedup itself so the
    step function's corners are exact."""
    top = max([2.0, *(s * 1.1 for s in speedups if s is not None)])
    grid = {round(top * i / steps, 6) for i in range(steps + 1)}
    grid |= {s for s in speedups if s is not None}
    return sorted(grid)


def geomean(values: list[float]) -> float | None:
    positive = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else None


def run_overview(lib: SolutionLibrary, run_id: str) -> RunOverview:
    """Per task the fastest correct candidate (index (run_id, task_id, status, speedup): one
    index walk per task), its latest evaluation (evaluations.candidate_id index), and counts
    grouped over the (run_id, task_id, status) index."""

    def fn(s: Session) -> tuple[RunRow, list[TaskOverview]]:
        config = s.scalar(select(RunModel.config).where(RunModel.id == run_id))
        if config is None:
            raise RunNotFoundError(f"no run {run_id!r} in the library")
        tasks = _tasks(s, run_id, config)
        # The run's row counts what the tasks counted: no second walk over the run's candidates.
        (run,) = run_rows(s, run_id, {run_id: sum(t.evaluations for t in tasks)})
        return run, tasks

    run, tasks = lib.read(fn)
    bests = [t.speedup_eager if t.best_candidate is not None else None for t in tasks]
    # A correct kernel without a baseline has no speedup: it counts for fast_0 only.
    for_p = [
        (b if b is not None else 0.0) if t.best_candidate is not None else None
        for t, b in zip(tasks, bests, strict=True)
    ]
    return RunOverview(
        run=run,
        tasks=tuple(tasks),
        fast_p=tuple(fast_p(for_p, fast_p_grid(for_p))),
        geomean=geomean([b for b in bests if b is not None]),
        correct_tasks=sum(1 for t in tasks if t.best_candidate is not None),
        interpreter=any(t.interpreter for t in tasks),
    )


def _tasks(s: Session, run_id: str, config: dict[str, Any]) -> list[TaskOverview]:
    per_task = int((config.get("budget") or {}).get("evaluations", 0) or 0)
    config_profile = str((config.get("evaluation") or {}).get("profile") or DEFAULT_PROFILE)
    c = CandidateRow
    tasks = s.execute(
        select(RunTaskRow.name, RunTaskRow.task_id)
        .where(RunTaskRow.run_id == run_id)
        .order_by(RunTaskRow.position)
    ).all()
    out = []
    for name, task_id in tasks:
        counts: dict[Any, Any] = dict(
            s.execute(
                select(c.status, func.count())
                .where(c.run_id == run_id, c.task_id == task_id)
                .group_by(c.status)
            ).all()
        )
        evaluated = sum(n for st, n in counts.items() if st != "pending")
        # The fastest, ties to the oldest (no speedup: the oldest correct one). In two seeks of
        # ix_candidates_run_task_status_speedup: neither backend serves "speedup DESC NULLS LAST,
        # id" from it, and ordering the task's correct candidates costs 50-80 ms at 10^5.
        mine = (c.run_id == run_id, c.task_id == task_id, c.status == "correct")
        top = s.scalar(select(func.max(c.speedup)).where(*mine))
        tied = c.speedup.is_(None) if top is None else c.speedup == top
        best_id = s.scalar(select(func.min(c.id)).where(*mine, tied))
        ev = None
        if best_id is not None:
            ev = s.scalars(
                select(EvaluationRow)
                .where(EvaluationRow.candidate_id == best_id)
                .order_by(EvaluationRow.id.desc())
                .limit(1)
            ).first()
        out.append(
            TaskOverview(
                task=name,
                best_candidate=best_id,
                speedup_eager=ev.speedup_eager if ev else None,
                speedup_compile=ev.speedup_compile if ev else None,
                runtime_ms=ev.runtime_ms if ev else None,
                eager_ms=ev.eager_ms if ev else None,
                compile_ms=ev.compile_ms if ev else None,
                # The library's evaluations.profile (migration 0004) is what the verdict used.
                profile=ev.profile if ev is not None else config_profile,
                device=ev.device if ev else "",
                interpreter=bool(ev.interpreter) if ev else False,
                evaluations=evaluated,
                correct=int(counts.get("correct", 0)),
                budget=per_task,
                sol_share=ev.sol_share if ev else None,
                bottleneck=ev.bottleneck if ev else None,
                speedup_low=ev.speedup_low if ev else None,
                speedup_high=ev.speedup_high if ev else None,
                confirmed=bool(ev.confirmed) if ev else False,
            )
        )
    return out
