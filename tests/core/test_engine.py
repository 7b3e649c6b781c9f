"""The engine on instant in-process parts: budgets of every kind, concurrency limits, mutator
feedback, several tasks. Real engine, real SQLite library; only evaluation and mutation are instant."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evokernel.conformance import InstantEvaluator, InstantMutator, instant_config, instant_task, run_instant
from evokernel.db import SolutionLibrary
from evokernel.exceptions import ConfigError
from evokernel.mutators.base import MutationRequest, MutationResult
from evokernel.types import Evaluation, Task

Run = tuple[SolutionLibrary, str, list[Task]]


def _run(tmp_path: Path, strategy: str, params: dict, *, tasks: int = 1, retries: int = 0,
         mutator: InstantMutator | None = None, evaluator: InstantEvaluator | None = None,
         concurrency: dict | None = None, **budget: object) -> Run:  # fmt: skip
    task_list = [instant_task(f"t{i}") for i in range(tasks)]
    config = instant_config(strategy, params, tmp_path / "lib.db", task_list, **budget)
    config.mutators.llm.max_retries = retries
    for key, value in (concurrency or {}).items():
        setattr(config.concurrency, key, value)
    run_id = run_instant(config, task_list, mutator=mutator, evaluator=evaluator)
    return SolutionLibrary(tmp_path / "lib.db"), run_id, task_list


def test_evaluation_budget_is_exact_per_task_with_several_tasks(tmp_path: Path) -> None:
    lib, run, tasks = _run(tmp_path, "greedy", {"batch": 3}, tasks=3, evaluations=10)
    for task in tasks:
        assert lib.count_evaluated(run, task.name) == 10
        assert len(lib.candidates(run, task.name)) == 10
        assert lib.count_proposals(run, task.name, state="open") == 0
    stopped = next(e[2]["stopped"] for e in lib.events(run) if e[0] == "finished")
    assert set(stopped.values()) == {"budget of 10 evaluations reached"}


@pytest.mark.parametrize(("retries", "limit"), [(0, 7), (2, 10)])
def test_llm_call_budget_is_never_overrun(tmp_path: Path, retries: int, limit: int) -> None:
    # A job may use retries + 1 calls, so it starts only if that many still fit next to what is
    # spent and reserved. These jobs use one call each, so the last one starts at limit - retries - 1
    # calls spent: with 2 retries and 10 calls, no job starts after the 8th call.
    mutator = InstantMutator(uses_llm=True)
    lib, run, _ = _run(tmp_path, "greedy", {"batch": 4}, tasks=2, retries=retries, mutator=mutator,
                       evaluations=100, llm_calls=limit)  # fmt: skip
    calls = len(lib.llm_calls(run))
    assert calls <= limit
    assert calls == limit - retries
    stopped = next(e[2]["stopped"] for e in lib.events(run) if e[0] == "finished")
    assert any("LLM call budget" in reason for reason in stopped.values())


def test_usd_budget_is_never_overrun(tmp_path: Path) -> None:
    mutator = InstantMutator(uses_llm=True, cost_usd=0.1)
    lib, run, _ = _run(
        tmp_path, "pike_b", {"branches": 4}, tasks=2, mutator=mutator, evaluations=100, usd=0.55
    )
    usage = lib.llm_usage(run)
    assert usage["cost_usd"] <= 0.55 and usage["calls"] == 5  # the 6th would spend 0.6


def test_wall_time_budget_stops_new_work_and_finishes_what_is_in_flight(tmp_path: Path) -> None:
    evaluator = InstantEvaluator(delay_s=0.05)
    lib, run, tasks = _run(
        tmp_path, "greedy", {"batch": 2}, evaluator=evaluator, evaluations=1000, wall_time_s=1.0
    )
    done = lib.count_evaluated(run, "t0")
    # Counts and the run's own records, not how soon it stopped (a figure of a loaded machine):
    # it stopped for its wall time, not before it (elapsed >= 1 s), long before its 1000
    # evaluations, with nothing left in flight.
    assert 0 < done < 100
    assert lib.count_proposals(run, "t0", state="open") == 0 and not lib.pending_candidates(run, "t0")
    finished = [e[2] for e in lib.events(run) if e[0] == "finished"]
    assert finished[0]["elapsed_s"] >= 1.0
    assert all("wall-time budget" in reason for reason in finished[0]["stopped"].values()), finished
    # Resuming a run whose wall time is spent starts nothing new.
    config = instant_config(
        "greedy", {"batch": 2}, tmp_path / "lib.db", tasks, evaluations=1000, wall_time_s=1.0
    )
    run_instant(config, tasks, resume=run)
    assert lib.count_evaluated(run, "t0") == done


def test_budget_values_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"budget\.usd must be positive"):
        _run(tmp_path, "greedy", {}, usd=0.0)


class CountingEvaluator(InstantEvaluator):
    def __init__(self) -> None:
        super().__init__(size=2, delay_s=0.02)
        self.now = self.peak = 0

    async def evaluate(self, task: Task, source: str, *, tenant: str = "", priority: int = 0) -> Evaluation:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            return await super().evaluate(task, source, tenant=tenant, priority=priority)
        finally:
            self.now -= 1


class CountingMutator(InstantMutator):
    def __init__(self) -> None:
        super().__init__(uses_llm=True, delay_s=0.02)
        self.now = self.peak = 0
        self.overlapped = False  # an LLM call ran while evaluations were running
        self.evaluator: CountingEvaluator | None = None

    async def mutate(self, request: MutationRequest) -> MutationResult:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(0)
            if self.evaluator is not None and self.evaluator.now:
                self.overlapped = True
            return await super().mutate(request)
        finally:
            self.now -= 1


def test_llm_and_evaluation_limits_are_separate(tmp_path: Path) -> None:
    evaluator, mutator = CountingEvaluator(), CountingMutator()
    mutator.evaluator = evaluator
    _run(tmp_path, "pike_b", {"branches": 8, "fix_rounds": 0, "ideas": False}, tasks=2, mutator=mutator,
         evaluator=evaluator, concurrency={"evaluations": 2, "llm": 3}, evaluations=25)  # fmt: skip
    assert evaluator.peak == 2 and mutator.peak == 3
    assert mutator.overlapped


def test_mutator_observe_once_per_finished_proposal(tmp_path: Path) -> None:
    mutator = InstantMutator(incorrect_rate=0.5)
    lib, run, _ = _run(tmp_path, "pike_b", {"branches": 3, "fix_rounds": 1}, mutator=mutator, evaluations=12)
    mutated = [p for p in lib.proposals(run, "t0") if p.operator not in ("seed_file", "ideas")]
    assert sorted(pid or 0 for pid, _ in mutator.observed) == sorted(p.id or 0 for p in mutated)
    statuses = {
        sc.candidate.proposal_id: sc.evaluation.status for sc in lib.candidates(run, "t0") if sc.evaluation
    }
    assert all(statuses.get(pid) == status for pid, status in mutator.observed)
