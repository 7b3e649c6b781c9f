"""The engine: the one place that sequences work, keeps budgets and makes resume exact.

Per task it loops: record the strategy's island events, ask it for proposals while there is
budget, record them *before* work starts, mutate each into a candidate (recorded together with
the proposal's close), evaluate it on the pool, record the evaluation. Mutations and evaluations
of all tasks are in flight at once under two limits (LLM requests, evaluations) so neither
starves the other. Run-level budgets (LLM calls, USD, wall time) are in :mod:`evokernel.run.budget`.

Budget invariant, kept at every moment: evaluated + pending candidates + open candidate proposals
<= budget.evaluations per task (``ideas`` proposals make no candidate and do not count). A
proposal whose mutation fails frees its slot. After a crash the library holds exactly that state,
so resume re-runs open proposals, evaluates pending candidates, and never counts anything twice.

What one job does (mutate, record, evaluate, and why its randomness does not depend on timing)
is in :mod:`evokernel.run.job`.

SIGINT: the first stops new work and lets work in flight finish (the run is then "interrupted",
with nothing open); the second cancels everything at once (open proposals and pending candidates
stay in the library, and ``--resume`` re-runs them). SIGTERM, what a batch scheduler sends before
it kills a job (Slurm waits 30 s by default), stops at once like a second SIGINT: the driver then
shuts its pool down and exits 143 instead of dying inside Ray's signal handler.

One driver per run: counters (evaluated, committed, the last generation, source hashes) are kept
in memory, loaded from the library at start, because this engine is the only writer of its run.
Mutators hear how each proposal they served ended (``Mutator.observe``), except candidates left
pending by a killed driver, whose request died with it.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from typing import Any

from evokernel.config.schema import ExperimentConfig
from evokernel.db import SolutionLibrary
from evokernel.exceptions import PluginError
from evokernel.mutators.base import Mutator
from evokernel.plugins import resolve
from evokernel.run.budget import RunBudget, Verdict, llm_calls_per_job
from evokernel.run.evaluator import Evaluator, HardwareInfo
from evokernel.run.job import SEED_FILE, ProposalJobs
from evokernel.run.state import TaskProgress
from evokernel.strategies.base import Strategy
from evokernel.strategies.view import IDEAS, RunView
from evokernel.types import Operator, Proposal, Task

__all__ = ["SEED_FILE", "Engine", "Evaluator", "HardwareInfo", "TaskProgress", "build_strategy"]


def build_strategy(config: ExperimentConfig) -> Strategy:
    """The configured strategy, one per task. The runner calls it once before the run is recorded
    or Ray starts, so a wrong ``module:Class`` path or parameter fails in a second, not after the
    pool's start-up."""
    cls: Any = resolve("strategies", config.strategy.name)
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise PluginError(
            f"strategy {config.strategy.name!r} resolves to {cls!r}, which is not a subclass "
            "of evokernel.strategies.base.Strategy"
        )
    strategy_cls: type[Strategy] = cls
    return strategy_cls.from_params(dict(config.strategy.params))


class Engine:
    # False: the caller (a sweep driving several engines) owns SIGINT and SIGTERM and calls
    # interrupt() and terminate().
    handle_sigint = True

    def __init__(
        self,
        config: ExperimentConfig,
        library: SolutionLibrary,
        pool: Evaluator,
        mutators: list[Mutator],
        run_id: str,
        tasks: list[Task],
        on_event: Callable[[str, dict[str, object]], None] | None = None,
    ) -> None:
        self.config = config
        self.library = library
        self.pool = pool
        self.run_id = run_id
        self.tasks = tasks
        self.on_event = on_event or (lambda kind, data: None)
        per_job = llm_calls_per_job(mutators, default=config.mutators.llm.max_retries + 1)
        self.budget = RunBudget(config.budget, attempts_per_job=per_job)
        self.jobs = ProposalJobs(
            config, library, pool, run_id, mutators, self.budget, self._view, self.on_event
        )
        self.operators = self.jobs.operators
        self.stop_reason = ""  # set by SIGINT or the wall-time budget: no new work starts
        self.interrupted = False
        self.terminated = False  # SIGTERM: stopped at once
        self._sigints = 0
        self._main: asyncio.Task[Any] | None = None

    # ---- setup ----------------------------------------------------------------------------------
    def _view(self, progress: TaskProgress) -> RunView:
        return RunView(
            self.library,
            self.run_id,
            progress.task,
            self.config.seed,
            self.operators,
            in_flight=len(progress.in_flight),
            islands=progress.strategy.islands,
            known_last_generation=progress.last_generation,
            fold_index=self.library.advance_island_index,  # the index is derived: the run folds it
        )

    def _restore_budget(self) -> None:
        lib, run = self.library, self.run_id
        usage = lib.llm_usage(run)
        self.budget.spent_calls = int(usage["calls"])
        self.budget.spent_usd = float(usage["cost_usd"])
        self.budget.max_job_usd = lib.max_proposal_cost(run)
        self.budget.jobs_seen = 1 if usage["calls"] else 0
        self.budget.elapsed_before_s = sum(
            float(data.get("elapsed_s", 0.0))
            for kind, _msg, data in lib.events(run)
            if kind in ("finished", "interrupted")
        )

    def _progress(self, task: Task) -> TaskProgress:
        lib, run = self.library, self.run_id
        progress = TaskProgress(task, build_strategy(self.config))
        lib.ensure_islands(run, task.name, progress.strategy.islands)
        progress.evaluated = lib.count_evaluated(run, task.name)
        progress.failed_streak = lib.trailing_failed_proposals(
            run, task.name, limit=self.config.budget.max_failed_mutations
        )
        for digest, (gen, seq) in lib.source_hashes(run, task.name).items():
            progress.add_hash(digest, gen, seq)
        progress.best = next(iter(lib.top(run, task.name, 1)), None)
        progress.last_generation = lib.last_generation(run, task.name)
        return progress

    # ---- the loop ---------------------------------------------------------------------------------
    async def run(self) -> dict[str, str]:
        """Run every task to its budget; returns task name -> why it stopped."""
        self._main = asyncio.current_task()
        self._restore_budget()
        hardware = await self.pool.hardware()
        self.jobs.hardware = hardware.describe()
        self.jobs.software = str(getattr(hardware, "versions", "") or "")
        progresses = [self._progress(task) for task in self.tasks]
        loop = asyncio.get_running_loop()
        handled = self.handle_sigint and threading.current_thread() is threading.main_thread()
        if handled:
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            loop.add_signal_handler(signal.SIGTERM, self.terminate)
        try:
            await asyncio.gather(*(self._run_task(p) for p in progresses))
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)
                loop.remove_signal_handler(signal.SIGTERM)
        return {p.task.name: p.stopped for p in progresses}

    def interrupt(self) -> None:
        """What SIGINT does: the first call stops new work, the second cancels work in flight."""
        self._on_sigint()

    def terminate(self) -> None:
        """What SIGTERM does: stop at once, leaving open work in the library for ``--resume``."""
        if self.terminated:
            return
        self.interrupted = self.terminated = True
        self.stop_reason = "terminated (SIGTERM): stopped at once"
        self.library.log_event(self.run_id, "sigterm", "stopping at once")
        self.on_event("stopping", {"reason": "SIGTERM: stopping at once; --resume re-runs open work"})
        if self._main is not None:
            self._main.cancel()

    def _on_sigint(self) -> None:
        self._sigints += 1
        self.interrupted = True
        if self._sigints == 1:
            self.stop_reason = "interrupted (SIGINT): finished the work in flight"
            self.library.log_event(self.run_id, "sigint", "finishing work in flight")
            self.on_event(
                "stopping", {"reason": "SIGINT: finishing work in flight; Ctrl-C again stops at once"}
            )
        elif self._main is not None:
            self.library.log_event(self.run_id, "sigint", "stopping at once")
            self._main.cancel()

    async def _run_task(self, progress: TaskProgress) -> None:
        task, lib, run = progress.task, self.library, self.run_id
        budget = self.config.budget.evaluations
        # Resume: finish what a killed driver left, before asking for anything new.
        pending = lib.pending_candidates(run, task.name)
        opened = lib.open_proposals(run, task.name)
        progress.committed = progress.evaluated + len(pending) + sum(1 for p in opened if p.operator != IDEAS)
        for cand in pending:
            self.jobs.resume(progress, cand)
        for proposal in opened:
            self.jobs.start(progress, proposal)
        while True:
            if progress.failure is not None:
                raise progress.failure
            stop = self.stop_reason or self.budget.out_of_time()
            if progress.failed_streak >= self.config.budget.max_failed_mutations:
                stop = stop or f"{progress.failed_streak} proposals in a row produced no candidate"
            if stop:
                if not progress.in_flight:
                    progress.stopped = stop
                    break
                await self._wait(progress)
                continue
            room = budget - progress.committed
            started, blocked = 0, None
            if room > 0:
                started, blocked = self._start(progress, room)
            if progress.in_flight:
                await self._wait(progress)
                continue
            if started:
                continue
            if blocked is Verdict.WAIT:  # other tasks' LLM jobs hold the budget: wait for one
                self.jobs.released.clear()
                await self.jobs.released.wait()
                continue
            if room <= 0:
                progress.stopped = f"budget of {budget} evaluations reached"
            elif blocked is Verdict.EXHAUSTED:
                progress.stopped = self.budget.llm_verdict()[1]
            else:
                progress.stopped = "the strategy has nothing more to propose"
                if progress.evaluated == 0:
                    progress.stopped += self._why_nothing(task)
            break
        lib.log_event(run, "task_done", progress.stopped, {"task": task.name})
        self.on_event("task_done", {"task": task.name, "reason": progress.stopped})

    @staticmethod
    async def _wait(progress: TaskProgress) -> None:
        """Until some work finishes; a job that raised (a library error, a bug) stops the run."""
        if progress.in_flight:
            await asyncio.wait(progress.in_flight, return_when=asyncio.FIRST_COMPLETED)
        if progress.failure is not None:
            raise progress.failure

    def _start(self, progress: TaskProgress, room: int) -> tuple[int, Verdict | None]:
        """Record and start what the strategy proposes; returns (started, why the rest could not)."""
        strategy, task = progress.strategy, progress.task
        events = strategy.island_events(self._view(progress))
        if events:
            self.library.record_island_events(self.run_id, task.name, events)
        proposals = strategy.propose(self._view(progress), room)
        accepted: list[Proposal] = []
        blocked: Verdict | None = None
        slots = room
        for proposal in proposals:  # a prefix only: generational strategies count what was recorded
            if proposal.task != task.name:
                raise PluginError(
                    f"strategy {self.config.strategy.name!r} proposed for task {proposal.task!r} "
                    f"when asked for {task.name!r}"
                )
            makes_candidate = proposal.operator != IDEAS
            if makes_candidate and slots <= 0:
                break
            if self.jobs.uses_llm(proposal.operator) and not self.budget.reserve():
                blocked = self.budget.llm_verdict()[0]
                break
            accepted.append(proposal)
            slots -= makes_candidate
        for recorded in self.library.add_proposals(self.run_id, accepted):
            progress.last_generation = max(progress.last_generation, recorded.generation)
            if recorded.operator != IDEAS:
                progress.committed += 1
            self.jobs.start(progress, recorded, reserved=True)
        return len(accepted), blocked

    def _why_nothing(self, task: Task) -> str:
        if task.seed_source is None and Operator.SEED not in self.operators:
            return (
                f" (task {task.name} has no seed implementation and no LLM is configured: set "
                "mutators.llm.model to let an LLM write one)"
            )
        return ""
