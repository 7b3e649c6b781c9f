"""The engine: the one place that sequences work, keeps budgets and makes resume exact.

Per task it loops: ask the strategy for proposals while there is budget and room, record each
proposal *before* work starts, mutate it into a candidate (recorded together with the proposal's
close), evaluate it on the pool, record the evaluation. Mutations and evaluations of all tasks
are in flight at once under two limits (LLM calls, evaluations) so neither starves the other.

Budget invariant, kept at every moment: evaluated + pending candidates + open proposals
<= budget.evaluations per task. A proposal whose mutation fails frees its slot. After a crash
the library holds exactly that state, so resume re-runs open proposals, evaluates pending
candidates, and never counts anything twice.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from evokernel.config_schema import ExperimentConfig
from evokernel.db import SolutionLibrary
from evokernel.mutators.base import MutationRequest, Mutator
from evokernel.pool import EvaluatorPool
from evokernel.registry import resolve
from evokernel.strategies.base import Strategy
from evokernel.types import Candidate, Evaluation, Proposal, Scored, Task, source_hash
from evokernel.view import RunView

SEED_FILE = "seed_file"


@dataclass
class TaskProgress:
    task: Task
    strategy: Strategy
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    stopped: str = ""


class Engine:
    def __init__(
        self,
        config: ExperimentConfig,
        library: SolutionLibrary,
        pool: EvaluatorPool,
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
        self.mutators: dict[str, Mutator] = {}
        for mutator in mutators:
            for op in mutator.operators:
                self.mutators.setdefault(op, mutator)
        self.operators = frozenset({SEED_FILE, *self.mutators})
        workers = pool.size
        self._eval_limit = asyncio.Semaphore(config.concurrency.evaluations or 2 * workers)
        self._llm_limit = asyncio.Semaphore(max(1, config.concurrency.llm))
        self._per_task_limit = config.concurrency.evaluations or 2 * workers
        self._hardware = ""

    def _strategy(self) -> Strategy:
        cls = resolve("strategies", self.config.strategy.name)
        return cls.from_params(dict(self.config.strategy.params))

    def _view(self, progress: TaskProgress) -> RunView:
        return RunView(
            self.library,
            self.run_id,
            progress.task,
            self.config.seed,
            self.operators,
            in_flight=len(progress.in_flight),
        )

    async def run(self) -> dict[str, str]:
        """Run every task to its budget; returns task name -> why it stopped."""
        self._hardware = (await self.pool.hardware()).describe()
        progresses = [TaskProgress(task, self._strategy()) for task in self.tasks]
        await asyncio.gather(*(self._run_task(p) for p in progresses))
        return {p.task.name: p.stopped for p in progresses}

    async def _run_task(self, progress: TaskProgress) -> None:
        task, lib, run = progress.task, self.library, self.run_id
        budget = self.config.budget.evaluations
        # Resume: finish what a killed driver left, before asking for anything new.
        for cand in lib.pending_candidates(run, task.name):
            self._spawn(progress, self._evaluate(progress, cand))
        for proposal in lib.open_proposals(run, task.name):
            self._spawn(progress, self._process(progress, proposal))
        while True:
            failures = lib.trailing_failed_proposals(run, task.name)
            if failures >= self.config.budget.max_failed_mutations:
                progress.stopped = f"{failures} proposals in a row produced no candidate"
                break
            used = lib.count_evaluated(run, task.name) + len(progress.in_flight)
            room = min(budget - used, self._per_task_limit - len(progress.in_flight))
            proposals: list[Proposal] = []
            if room > 0:
                proposals = progress.strategy.propose(self._view(progress), room)[:room]
                for proposal in proposals:
                    recorded = lib.add_proposal(run, proposal)
                    self._spawn(progress, self._process(progress, recorded))
            if not progress.in_flight:
                if used >= budget:
                    progress.stopped = f"budget of {budget} evaluations reached"
                elif not proposals:
                    progress.stopped = "the strategy has nothing more to propose"
                    if lib.count_evaluated(run, task.name) == 0:
                        progress.stopped += self._why_nothing(task)
                if progress.stopped:
                    break
                continue
            await asyncio.wait(progress.in_flight, return_when=asyncio.FIRST_COMPLETED)
        lib.log_event(run, "task_done", progress.stopped, {"task": task.name})
        self.on_event("task_done", {"task": task.name, "reason": progress.stopped})

    def _why_nothing(self, task: Task) -> str:
        if task.seed_source is None and "seed" not in self.operators:
            return (
                f" (task {task.name} has no seed implementation and no LLM is configured: set "
                "mutators.llm.model to let an LLM write one)"
            )
        return ""

    def _spawn(self, progress: TaskProgress, coro: object) -> None:
        job = asyncio.ensure_future(coro)  # type: ignore[call-overload]
        progress.in_flight.add(job)
        job.add_done_callback(progress.in_flight.discard)

    def _rng_seed(self, task: str, seq: int | None) -> int:
        key = f"{self.config.seed}|{task}|{seq}".encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")

    async def _process(self, progress: TaskProgress, proposal: Proposal) -> None:
        task, lib = progress.task, self.library
        assert proposal.id is not None
        if proposal.operator == SEED_FILE:
            if task.seed_source is None:
                lib.fail_proposal(proposal.id, f"task {task.name} has no seed implementation")
                return
            source = task.seed_source
        else:
            mutator = self.mutators.get(proposal.operator)
            if mutator is None:
                lib.fail_proposal(proposal.id, f"no configured mutator serves operator {proposal.operator!r}")
                return
            parents = tuple(lib.get_candidate(pid) for pid in proposal.parents)
            known = frozenset(sc.candidate.source_hash for sc in lib.candidates(self.run_id, task.name))
            request = MutationRequest(
                proposal=proposal,
                task=task,
                parents=parents,
                rng_seed=self._rng_seed(task.name, proposal.seq),
                hardware=self._hardware,
                language=self.config.mutators.llm.language,
                avoid=known,
            )
            uses_llm = mutator.name != "tune"
            if uses_llm:
                async with self._llm_limit:
                    result = await mutator.mutate(request)
            else:
                result = await mutator.mutate(request)
            for call in result.llm_calls:
                lib.record_llm_call(self.run_id, proposal.id, call)
            if result.source is None:
                lib.fail_proposal(proposal.id, result.error, result.raw_reply)
                self.on_event(
                    "mutation_failed", {"task": task.name, "proposal": proposal, "error": result.error}
                )
                return
            if source_hash(result.source) in known:
                lib.fail_proposal(proposal.id, "duplicate of a candidate already in the library")
                return
            source = result.source
        candidate = lib.add_candidate(self.run_id, proposal, source)
        await self._evaluate(progress, candidate)

    async def _evaluate(self, progress: TaskProgress, candidate: Candidate) -> None:
        async with self._eval_limit:
            evaluation: Evaluation = await self.pool.evaluate(progress.task, candidate.source)
        self.library.record_evaluation(candidate.id, evaluation)
        scored = Scored(candidate, evaluation)
        progress.strategy.observe(self._view(progress), scored)
        best = self.library.top(self.run_id, progress.task.name, 1)
        self.on_event(
            "evaluated",
            {
                "task": progress.task.name,
                "scored": scored,
                "done": self.library.count_evaluated(self.run_id, progress.task.name),
                "budget": self.config.budget.evaluations,
                "best": best[0] if best else None,
            },
        )
