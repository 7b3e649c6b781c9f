"""A sweep as one table: cells grouped by their axis values over seeds, mean and spread of each
figure. Seeds are the axis named ``seed`` (``seed=0,1,2``); every other axis is a column."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from evokernel.analysis.overview import RunOverview, run_overview
from evokernel.analysis.runs import SweepRow, get_sweep
from evokernel.db import SolutionLibrary

SEED_AXIS = "seed"


@dataclass(frozen=True)
class Stat:
    """Mean and sample standard deviation over ``n`` values (stdev 0.0 for one value); None when
    no cell had the figure (e.g. no correct kernel, so no geomean)."""

    mean: float | None
    stdev: float
    n: int

    @staticmethod
    def of(values: list[float | None]) -> Stat:
        have = [v for v in values if v is not None]
        if not have:
            return Stat(None, 0.0, 0)
        return Stat(statistics.fmean(have), statistics.stdev(have) if len(have) > 1 else 0.0, len(have))


@dataclass(frozen=True)
class SweepGroup:
    """The cells sharing ``point`` (every axis but the seed). ``best`` maps task -> best speedup."""

    point: dict[str, Any]
    runs: tuple[str, ...]
    seeds: tuple[Any, ...]
    geomean: Stat
    correct_share: Stat
    evaluations: Stat
    usd: Stat
    best: dict[str, Stat]


@dataclass(frozen=True)
class SweepTable:
    sweep: SweepRow
    columns: tuple[str, ...]
    groups: tuple[SweepGroup, ...]
    overviews: dict[str, RunOverview]


def sweep_table(lib: SolutionLibrary, sweep_id: str) -> SweepTable:
    """One :func:`run_overview` per cell, grouped by point (cell order kept)."""
    sweep = get_sweep(lib, sweep_id)
    overviews = {cell.id: run_overview(lib, cell.id) for cell in sweep.cells}
    columns = tuple(a for a in sweep.axes if a != SEED_AXIS)
    grouped: dict[tuple[str, ...], list[str]] = {}
    for cell in sweep.cells:
        grouped.setdefault(tuple(repr(cell.point.get(a)) for a in columns), []).append(cell.id)
    groups = []
    by_id = {c.id: c for c in sweep.cells}
    for run_ids in grouped.values():
        views = [overviews[r] for r in run_ids]
        tasks = [t.task for t in views[0].tasks]
        groups.append(
            SweepGroup(
                point={a: by_id[run_ids[0]].point.get(a) for a in columns},
                runs=tuple(run_ids),
                seeds=tuple(by_id[r].point.get(SEED_AXIS, by_id[r].config.get("seed")) for r in run_ids),
                geomean=Stat.of([v.geomean for v in views]),
                correct_share=Stat.of([v.correct_tasks / max(len(v.tasks), 1) for v in views]),
                evaluations=Stat.of([float(v.run.evaluations) for v in views]),
                usd=Stat.of([v.run.usd for v in views]),
                best={
                    task: Stat.of(
                        [next((t.speedup_eager for t in v.tasks if t.task == task), None) for v in views]
                    )
                    for task in tasks
                },
            )
        )
    return SweepTable(sweep, columns, tuple(groups), overviews)
