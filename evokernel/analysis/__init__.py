"""The queries behind reports, exports and the dashboard: ONE place that reads a library for people.

Pure reads over a :class:`~evokernel.db.SolutionLibrary` (through ``SolutionLibrary.read``),
returning frozen dataclasses; nothing here writes. Each function's docstring names the indexes
it relies on, so a report on a library of a million candidates stays a handful of index walks.

- runs and sweeps: :func:`list_runs`, :func:`list_sweeps`, :func:`get_sweep`, :func:`resolve_target`
- one run: :func:`run_overview` (per task best, fast_p, geomean), :func:`best_so_far` and its steps
  :func:`best_steps`, :func:`failure_counts`, :func:`llm_usage`, :func:`island_history` and per
  island :func:`island_summary`
- candidates: :func:`lineage`, :func:`ancestry`, :func:`candidate_detail`
- a sweep: :func:`sweep_table` (cells grouped over seeds, mean and spread)
"""

from __future__ import annotations

from evokernel.analysis.best_steps import BestSteps, best_steps
from evokernel.analysis.convergence import AXES, ConvergencePoint, best_so_far
from evokernel.analysis.failures import FailureCount, failure_counts
from evokernel.analysis.island_summary import IslandSummaries, IslandSummary, island_summary
from evokernel.analysis.lineage import CandidateDetail, Node, ancestry, candidate_detail, lineage
from evokernel.analysis.models import ModelLearning, learning_lines, model_learning
from evokernel.analysis.overview import RunOverview, TaskOverview, fast_p, geomean, run_overview
from evokernel.analysis.runs import RunRow, SweepRow, get_sweep, list_runs, list_sweeps, resolve_target
from evokernel.analysis.sweeps import Stat, SweepGroup, SweepTable, sweep_table
from evokernel.analysis.usage import (
    IslandGeneration,
    IslandHistory,
    IslandMove,
    ModelUsage,
    island_history,
    llm_usage,
)

__all__ = [
    "AXES",
    "BestSteps",
    "CandidateDetail",
    "ConvergencePoint",
    "FailureCount",
    "IslandGeneration",
    "IslandHistory",
    "IslandMove",
    "IslandSummaries",
    "IslandSummary",
    "ModelLearning",
    "ModelUsage",
    "Node",
    "RunOverview",
    "RunRow",
    "Stat",
    "SweepGroup",
    "SweepRow",
    "SweepTable",
    "TaskOverview",
    "ancestry",
    "best_so_far",
    "best_steps",
    "candidate_detail",
    "failure_counts",
    "fast_p",
    "geomean",
    "get_sweep",
    "island_history",
    "island_summary",
    "learning_lines",
    "lineage",
    "list_runs",
    "list_sweeps",
    "llm_usage",
    "model_learning",
    "resolve_target",
    "run_overview",
    "sweep_table",
]
