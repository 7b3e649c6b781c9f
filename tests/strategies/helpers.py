"""Runs on the instant in-process parts of evokernel.conformance, for strategy and engine tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evokernel.conformance import InstantEvaluator, InstantMutator, instant_config, instant_task, run_instant
from evokernel.db import SolutionLibrary
from evokernel.types import Proposal, Scored


def instant_run(
    tmp_path: Path,
    strategy: str,
    params: dict[str, Any],
    *,
    tasks: int = 1,
    mutator: InstantMutator | None = None,
    evaluator: InstantEvaluator | None = None,
    **budget: Any,
) -> tuple[SolutionLibrary, str]:
    task_list = [instant_task(f"t{i}") for i in range(tasks)]
    config = instant_config(strategy, params, tmp_path / "lib.db", task_list, **budget)
    run_id = run_instant(config, task_list, mutator=mutator, evaluator=evaluator)
    return SolutionLibrary(tmp_path / "lib.db"), run_id


def by_proposal(lib: SolutionLibrary, run_id: str, task: str) -> dict[int, Scored]:
    return {sc.candidate.proposal_id: sc for sc in lib.candidates(run_id, task)}


def generation(props: list[Proposal], gen: int, operator: str | None = None) -> list[Proposal]:
    return [p for p in props if p.generation == gen and (operator is None or p.operator == operator)]
