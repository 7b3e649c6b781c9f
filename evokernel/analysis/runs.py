"""Runs and sweeps as a list: what ``evokernel runs``, the report's index and the dashboard's
front page show. A sweep is the set of runs whose stored config names it (``sweep.id``); there
is no sweep table, so a sweep's cells are found, resumed and reported from their runs alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, LLMCallRow, RunTaskRow
from evokernel.db.models import RunRow as RunModel
from evokernel.exceptions import RunNotFoundError
from evokernel.types import format_speedup


@dataclass(frozen=True)
class RunRow:
    """One run. ``evaluations`` counts candidates with a final verdict; ``budget`` is what the
    config allows (``budget.evaluations`` x tasks); ``best_speedup`` is the fastest correct
    candidate of any task (vs eager), ``best_low``/``best_high`` its 95 % interval (None: not
    measured paired); ``cell`` and ``point`` are set for a sweep's cells."""

    id: str
    name: str
    sweep_id: str | None
    cell: int | None
    point: dict[str, Any]
    status: str
    started: str
    finished: str | None
    tasks: int
    evaluations: int
    budget: int
    best_speedup: float | None
    usd: float
    config: dict[str, Any]
    best_low: float | None = None
    best_high: float | None = None

    @property
    def best_text(self) -> str:
        """The best speedup as every table shows it (``-`` without one)."""
        return format_speedup(self.best_speedup, self.best_low, self.best_high) if self.best_speedup else "-"


@dataclass(frozen=True)
class SweepRow:
    """A sweep: its cells in cell order, the axes (keys that vary) and a status folded over them
    (``finished`` only when every cell finished; ``running`` if any runs; else ``interrupted``)."""

    id: str
    name: str
    axes: tuple[str, ...]
    cells: tuple[RunRow, ...]
    status: str
    started: str


def sweep_membership(config: dict[str, Any]) -> tuple[str | None, int | None, dict[str, Any]]:
    """(sweep id, cell index, axis values) stored in a run's config; (None, None, {}) for plain runs."""
    sweep = config.get("sweep") or {}
    return sweep.get("id"), sweep.get("cell"), dict(sweep.get("point") or {})


def _interval(s: Session, run_id: str, task_id: int, best: float) -> tuple[float | None, float | None]:
    """The 95 % interval of a run's best speedup: one seek of ix_candidates_run_task_status_speedup
    and one row (the oldest of tied bests, as the overview picks)."""
    c = CandidateRow
    mine = (c.run_id == run_id, c.task_id == task_id, c.status == "correct", c.speedup == best)
    row = s.execute(select(c.speedup_low, c.speedup_high).where(*mine).order_by(c.id).limit(1)).first()
    return (row[0], row[1]) if row is not None else (None, None)


def list_runs(lib: SolutionLibrary) -> list[RunRow]:
    """Every run, oldest first, with its totals: a few grouped index scans (see :func:`run_rows`)."""
    return lib.read(lambda s: run_rows(s))


def run_rows(s: Session, run_id: str | None = None, evaluated: dict[str, int] | None = None) -> list[RunRow]:
    """The rows of every run, or of ``run_id`` only. Counts walk ix_candidates_run_task_status
    (unless ``evaluated`` gives them), each task's best is one seek of
    ix_candidates_run_task_status_speedup and costs sum ix_llm_calls_run_usage, all index-only:
    ~0.2 s for a library of 1M evaluations (docs/benchmarks.md); one run reads only its own
    index ranges."""
    c, call, rt = CandidateRow, LLMCallRow, RunTaskRow

    def of_run(stmt: Any, column: Any) -> Any:
        return stmt if run_id is None else stmt.where(column == run_id)

    if evaluated is None:
        evaluated = dict(
            s.execute(
                of_run(select(c.run_id, func.count()).where(c.status != "pending"), c.run_id).group_by(
                    c.run_id
                )
            ).all()
        )
    task_best = (
        select(func.max(c.speedup))
        .where(c.run_id == rt.run_id, c.task_id == rt.task_id, c.status == "correct")
        .scalar_subquery()
    )
    best: dict[Any, Any] = {}
    best_task: dict[Any, Any] = {}
    ntasks: dict[Any, int] = {}
    for rid, task_id, speedup in s.execute(of_run(select(rt.run_id, rt.task_id, task_best), rt.run_id)):
        ntasks[rid] = ntasks.get(rid, 0) + 1
        if speedup is not None and (best.get(rid) is None or speedup > best[rid]):
            best[rid], best_task[rid] = speedup, task_id
    interval = {rid: _interval(s, rid, best_task[rid], top) for rid, top in best.items()}
    usd: dict[Any, Any] = dict(
        s.execute(
            of_run(select(call.run_id, func.sum(call.cost_usd)), call.run_id).group_by(call.run_id)
        ).all()
    )
    out = []
    runs = of_run(select(RunModel), RunModel.id).order_by(RunModel.created_at, RunModel.id)
    for r in s.scalars(runs):
        sweep_id, cell, point = sweep_membership(r.config)
        per_task = int((r.config.get("budget") or {}).get("evaluations", 0) or 0)
        tasks = int(ntasks.get(r.id, 0))
        out.append(
            RunRow(
                id=r.id,
                name=r.name,
                sweep_id=sweep_id,
                cell=cell,
                point=point,
                status=r.status,
                started=r.created_at.isoformat(timespec="seconds"),
                finished=r.finished_at.isoformat(timespec="seconds") if r.finished_at else None,
                tasks=tasks,
                evaluations=int(evaluated.get(r.id, 0)),
                budget=per_task * tasks,
                best_speedup=best.get(r.id),
                usd=float(usd.get(r.id) or 0.0),
                config=r.config,
                best_low=interval.get(r.id, (None, None))[0],
                best_high=interval.get(r.id, (None, None))[1],
            )
        )
    return out


def list_sweeps(lib: SolutionLibrary, runs: list[RunRow] | None = None) -> list[SweepRow]:
    """Sweeps, oldest first (from :func:`list_runs`; pass its result to save the queries)."""
    groups: dict[str, list[RunRow]] = {}
    for run in list_runs(lib) if runs is None else runs:
        if run.sweep_id is not None:
            groups.setdefault(run.sweep_id, []).append(run)
    out = []
    for sweep_id, cells in groups.items():
        cells.sort(key=lambda r: (r.cell if r.cell is not None else 0, r.started))
        statuses = {c.status for c in cells}
        status = (
            "finished" if statuses == {"finished"} else "running" if "running" in statuses else "interrupted"
        )
        axes = tuple(cells[0].point)
        name = str((cells[0].config.get("sweep") or {}).get("name") or cells[0].name)
        out.append(SweepRow(sweep_id, name, axes, tuple(cells), status, min(c.started for c in cells)))
    return sorted(out, key=lambda sw: sw.started)


def get_sweep(lib: SolutionLibrary, sweep_id: str) -> SweepRow:
    for sweep in list_sweeps(lib):
        if sweep.id == sweep_id:
            return sweep
    raise RunNotFoundError(f"no sweep {sweep_id!r} in the library")


def resolve_target(lib: SolutionLibrary, target: str | None = None) -> tuple[str, str]:
    """("run" | "sweep", id) for a run id, a sweep id, or None (the latest sweep or run: whichever
    started last; a sweep's cells count as their sweep)."""
    runs = list_runs(lib)
    if target is None:
        if not runs:
            raise RunNotFoundError("the library has no runs yet")
        last = runs[-1]
        return ("sweep", last.sweep_id) if last.sweep_id else ("run", last.id)
    if any(r.id == target for r in runs):
        return "run", target
    if any(r.sweep_id == target for r in runs):
        return "sweep", target
    raise RunNotFoundError(f"no run or sweep {target!r} in the library")
