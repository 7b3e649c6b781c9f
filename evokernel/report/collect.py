"""What a report shows, gathered from the library through :mod:`evokernel.analysis`."""

from __future__ import annotations

from dataclasses import dataclass

from evokernel import analysis
from evokernel.analysis import (
    ConvergencePoint,
    FailureCount,
    ModelLearning,
    ModelUsage,
    Node,
    RunOverview,
    SweepTable,
)
from evokernel.db import SolutionLibrary


@dataclass(frozen=True)
class TaskReport:
    """One task of a run: its overview row, the best kernel's ancestry (oldest first), failures,
    LLM usage, and convergence against each of :data:`evokernel.analysis.AXES`."""

    name: str
    ancestry: tuple[Node, ...]
    failures: tuple[FailureCount, ...]
    usage: tuple[ModelUsage, ...]
    curves: dict[str, list[ConvergencePoint]]


@dataclass(frozen=True)
class RunReport:
    overview: RunOverview
    tasks: tuple[TaskReport, ...]
    library: str
    # The LLM model selector's state per model (empty without an LLM).
    models: tuple[ModelLearning, ...] = ()


@dataclass(frozen=True)
class SweepReport:
    table: SweepTable
    runs: dict[str, RunReport]
    library: str


def collect_run(lib: SolutionLibrary, run_id: str, library: str = "") -> RunReport:
    overview = analysis.run_overview(lib, run_id)
    failures = analysis.failure_counts(lib, run_id)
    usage = analysis.llm_usage(lib, run_id)
    tasks = []
    for t in overview.tasks:
        chain: list[Node] = []
        if t.best_candidate is not None:
            chain = analysis.ancestry(analysis.lineage(lib, run_id, t.task), t.best_candidate)
        tasks.append(
            TaskReport(
                name=t.task,
                ancestry=tuple(chain),
                failures=tuple(f for f in failures if f.task == t.task),
                usage=tuple(u for u in usage if u.task == t.task),
                curves={x: analysis.best_so_far(lib, run_id, t.task, x=x) for x in analysis.AXES},
            )
        )
    return RunReport(overview, tuple(tasks), library, tuple(analysis.model_learning(lib, run_id)))


def collect_sweep(lib: SolutionLibrary, sweep_id: str, library: str = "") -> SweepReport:
    table = analysis.sweep_table(lib, sweep_id)
    runs = {cell.id: collect_run(lib, cell.id, library) for cell in table.sweep.cells}
    return SweepReport(table, runs, library)


def collect(lib: SolutionLibrary, target: str | None, library: str = "") -> RunReport | SweepReport:
    """The report of a run id or sweep id, or of the latest sweep or run when ``target`` is None."""
    kind, ident = analysis.resolve_target(lib, target)
    return collect_sweep(lib, ident, library) if kind == "sweep" else collect_run(lib, ident, library)
