"""The dashboard's JSON: the analysis module's dataclasses made browser-ready.

Every figure comes from :mod:`evokernel.analysis` (one place computes a run's figures for the
terminal, the HTML report and this page); this module only reshapes them -- drops what a page does
not draw, thins long curves to their steps, and adds the per-parent diffs of a candidate.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any

from evokernel import analysis
from evokernel.analysis.island_summary import island_summary
from evokernel.analysis.pool_activity import pool_activity
from evokernel.analysis.tree_window import DEFAULT_LIMIT, tree_window
from evokernel.db import SolutionLibrary
from evokernel.exceptions import AnalysisError

# Longest tree window a client may ask for: Cytoscape's canvas renderer stays interactive to here.
MAX_TREE_NODES = 10_000


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples and dicts as JSON values; NaN and infinities as null (JSON has none)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def runs(lib: SolutionLibrary) -> dict[str, Any]:
    rows = analysis.list_runs(lib)
    sweeps = analysis.list_sweeps(lib, rows)
    listed = [{k: v for k, v in jsonable(r).items() if k != "config"} for r in reversed(rows)]
    return {
        "runs": listed,
        "sweeps": [
            {
                "id": sw.id,
                "name": sw.name,
                "axes": list(sw.axes),
                "status": sw.status,
                "started": sw.started,
                "cells": [c.id for c in sw.cells],
            }
            for sw in reversed(sweeps)
        ],
    }


def sweep(lib: SolutionLibrary, sweep_id: str) -> dict[str, Any]:
    """A sweep's page: its cells (each a run) and the cells grouped by point, mean and spread over
    seeds (:func:`evokernel.analysis.sweep_table`, the table the HTML report prints)."""
    table = analysis.sweep_table(lib, sweep_id)
    row = table.sweep
    cells = [{k: v for k, v in jsonable(c).items() if k != "config"} for c in row.cells]
    return {
        "sweep": {"id": row.id, "name": row.name, "axes": list(row.axes), "status": row.status,
                  "started": row.started},
        "cells": cells,
        "columns": list(table.columns),
        "tasks": [t.task for t in next(iter(table.overviews.values())).tasks] if table.overviews else [],
        "groups": [jsonable(g) for g in table.groups],
    }  # fmt: skip


def run(lib: SolutionLibrary, run_id: str) -> dict[str, Any]:
    overview = analysis.run_overview(lib, run_id)
    return {
        "overview": jsonable(overview),
        "usage": jsonable(analysis.llm_usage(lib, run_id)),
        "pool": jsonable(pool_activity(lib, run_id)),
    }


def best(lib: SolutionLibrary, run_id: str, x: str) -> dict[str, Any]:
    """Per task the best-so-far curve as its steps (the points where the best changed, plus the
    first and last: a step chart of those is the same picture, and 10^5 points per task are not
    read or sent; :func:`evokernel.analysis.best_steps`)."""
    out: dict[str, Any] = {}
    for task in lib.run_task_hashes(run_id):  # the run's task names without run_overview's counts
        steps = analysis.best_steps(lib, run_id, task, x)
        kept = steps.points
        out[task] = {
            "evaluated": steps.evaluated,
            "points": [[p.x, p.best, p.best_candidate, p.n] for p in kept if p.best is not None]
            + ([[kept[-1].x, None, None, kept[-1].n]] if kept and kept[-1].best is None else []),
        }
    return {"x": x, "tasks": out}


def islands(lib: SolutionLibrary, run_id: str) -> dict[str, Any]:
    """Per task and island: totals, the running best at each generation where it rose (to the last
    generation), and the task's island events. All tasks in one answer, so switching the page's
    task select costs nothing (:func:`evokernel.analysis.island_summary.island_summary`)."""
    summary = island_summary(lib, run_id)
    out: dict[str, Any] = {}
    for isl in summary.islands:
        task = out.setdefault(isl.task, {"islands": [], "events": []})
        curve: list[list[Any]] = [list(point) for point in isl.curve]
        if curve and isl.last_generation > curve[-1][0]:  # the step line runs to now
            curve.append([isl.last_generation, isl.best])
        task["islands"].append(
            {
                "island": isl.island,
                "candidates": isl.candidates,
                "correct": isl.correct,
                "best": isl.best,
                "curve": curve,
                "last_generation": isl.last_generation,
            }
        )
    for task, shown in out.items():
        # Plain ints and strings: vars() is jsonable() without its walk (10^4 events in a long run).
        events = [dict(vars(e)) for e in summary.events if e.task == task]
        shown["events"] = events
        for isl in shown["islands"]:
            mine = [e for e in events if e["island"] == isl["island"]]
            isl["migrants_in"] = sum(1 for e in mine if e["kind"] == "migrate")
            isl["migrants_out"] = sum(
                1 for e in events if e["kind"] == "migrate" and e["from_island"] == isl["island"]
            )
            isl["resets"] = sum(1 for e in mine if e["kind"] == "reset")
    return {"tasks": out}


def failures(lib: SolutionLibrary, run_id: str) -> dict[str, Any]:
    return {"failures": jsonable(analysis.failure_counts(lib, run_id))}


def tree(lib: SolutionLibrary, run_id: str, task: str, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    if not 1 <= limit <= MAX_TREE_NODES:
        raise AnalysisError(f"limit must be between 1 and {MAX_TREE_NODES}, not {limit}")
    return jsonable(tree_window(lib, run_id, task, limit))


def candidate(lib: SolutionLibrary, candidate_id: int) -> dict[str, Any]:
    detail = analysis.candidate_detail(lib, candidate_id)
    out: dict[str, Any] = jsonable(detail)
    out["diffs"] = [
        {"parent": pid, "diff": unified_diff(src, detail.source, "kernel.py", "kernel.py")}
        for pid, src in detail.parent_sources.items()
    ]
    return out


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """A git-style unified diff (what diff2html renders); empty when the sources are equal."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), before_name, after_name, n=3
    )
    body = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return f"diff --git a/{before_name} b/{after_name}\n{body}" if body else ""
