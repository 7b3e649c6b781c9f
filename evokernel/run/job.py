"""One proposal's work: mutate it (or brainstorm ideas), record the candidate, evaluate it, and
tell the strategy and the mutator how it went. The engine (:mod:`evokernel.run.engine`) owns one
:class:`ProposalJobs` and hands it each recorded proposal; it sequences the jobs and keeps the
budgets, the jobs do the work and settle what they spent.

What each request is built from, reproducibly, is :mod:`evokernel.run.request_inputs`'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from evokernel.config.schema import ExperimentConfig
from evokernel.db import SolutionLibrary
from evokernel.mutators.base import MutationRequest, MutationResult, Mutator
from evokernel.run.budget import RunBudget
from evokernel.run.confirm import confirmed, enabled, promoted, would_be_best
from evokernel.run.elastic import ElasticLimit
from evokernel.run.evaluator import Evaluator
from evokernel.run.request_inputs import RequestContext, avoided_sources, build_request
from evokernel.run.state import TaskProgress
from evokernel.strategies.view import IDEAS, RunView
from evokernel.types import (
    Candidate,
    Evaluation,
    LLMCall,
    Operator,
    Proposal,
    Scored,
    source_hash,
)

SEED_FILE = Operator.SEED_FILE
# Seconds between pool health lines in the progress output.
HEALTH_EVERY_S = 30.0
FIX_PRIORITY = 1


class ProposalJobs:
    """Runs recorded proposals as asyncio jobs under the run's two concurrency limits (LLM
    requests, evaluations), each job ending in a recorded candidate and evaluation or a failed
    proposal. ``view`` builds the strategy's read-only view of a task (the engine's, so that
    ``in_flight`` and the last generation are current)."""

    def __init__(
        self,
        config: ExperimentConfig,
        library: SolutionLibrary,
        pool: Evaluator,
        run_id: str,
        mutators: list[Mutator],
        budget: RunBudget,
        view: Callable[[TaskProgress], RunView],
        on_event: Callable[[str, dict[str, object]], None],
    ) -> None:
        self.config = config
        self.library = library
        self.pool = pool
        self.run_id = run_id
        self.budget = budget
        self.view = view
        self.on_event = on_event
        self.mutators: dict[str, Mutator] = {}  # operator -> the first configured mutator serving it
        for mutator in mutators:
            for op in mutator.operators:
                self.mutators.setdefault(op, mutator)
        self.ideas_mutator = next((m for m in mutators if m.can_brainstorm), None)
        learned = library.model_stats(run_id)
        if learned:  # a resumed run: the model selector continues from what the library kept
            for mutator in mutators:
                mutator.restore_model_state(learned)
        # Default: twice what the pool runs at once (actors x candidates per actor), so it never idles;
        # read at each entry, as the pool grows and shrinks with the cluster's nodes (elastic.py).
        self._eval_limit = ElasticLimit(
            lambda: config.concurrency.evaluations or 2 * int(getattr(pool, "capacity", pool.size))
        )
        self._llm_limit = asyncio.Semaphore(max(1, config.concurrency.llm))
        # Set whenever an LLM job settles its spending: a task waiting for budget looks again.
        self.released = asyncio.Event()
        self.hardware = ""  # the pool's device, described for prompts; set once the run starts
        self.software = ""  # the pool's torch / triton versions, for prompts; set with hardware
        self._health_at = 0.0

    @property
    def operators(self) -> frozenset[str]:
        """Operators some part of the run serves (what a strategy may propose)."""
        ops = {SEED_FILE, *self.mutators}
        if self.ideas_mutator is not None:
            ops.add(IDEAS)
        return frozenset(ops)

    def start(self, progress: TaskProgress, proposal: Proposal, reserved: bool = False) -> None:
        """Start the job of a recorded proposal (``reserved``: its LLM budget is already held)."""
        self._spawn(progress, self._process(progress, proposal, reserved))

    def resume(self, progress: TaskProgress, candidate: Candidate) -> None:
        """Evaluate a candidate a killed driver recorded but never evaluated."""
        self._spawn(progress, self._evaluate(progress, candidate, None, None))

    def uses_llm(self, operator: str) -> bool:
        if operator == IDEAS:
            return self.ideas_mutator is not None
        mutator = self.mutators.get(operator)
        return mutator is not None and mutator.uses_llm

    def _spawn(self, progress: TaskProgress, coro: Coroutine[Any, Any, None]) -> None:
        job = asyncio.ensure_future(coro)
        progress.in_flight.add(job)
        job.add_done_callback(lambda done: self._finished(progress, done))

    def _finished(self, progress: TaskProgress, job: asyncio.Task[None]) -> None:
        progress.in_flight.discard(job)
        if not job.cancelled() and job.exception() is not None and progress.failure is None:
            progress.failure = job.exception()

    # ---- one proposal -----------------------------------------------------------------------------
    async def _process(self, progress: TaskProgress, proposal: Proposal, reserved: bool = False) -> None:
        lib = self.library
        assert proposal.id is not None
        uses_llm = self.uses_llm(proposal.operator)
        if uses_llm and not reserved:  # re-run of an open proposal after a crash
            self.budget.reserved_jobs += 1
        calls: tuple[LLMCall, ...] = ()
        try:
            if proposal.operator == IDEAS:
                calls = await self._ideas(progress, proposal)
                return
            request, result = await self._mutate(progress, proposal)
            calls = result.llm_calls
        finally:
            if uses_llm:
                self.budget.settle(calls)
                self.released.set()
        source = result.source
        if source is None or request is None:
            self._fail(progress, proposal, result.error or "no candidate", result.raw_reply, request, result)
            return
        if source_hash(source) in request.avoid:
            self._fail(
                progress, proposal, "duplicate of a candidate of an earlier generation", "", request, result
            )
            return
        candidate = lib.add_candidate(self.run_id, proposal, source)
        progress.add_hash(candidate.source_hash, candidate.generation, proposal.seq or 0)
        if progress.avoid_cache is not None and candidate.generation < progress.avoid_cache[0]:
            progress.avoid_cache = None
        progress.failed_streak = 0
        await self._evaluate(progress, candidate, request, result)

    async def _mutate(
        self, progress: TaskProgress, proposal: Proposal
    ) -> tuple[MutationRequest | None, MutationResult]:
        task, lib = progress.task, self.library
        if proposal.operator == SEED_FILE:
            if task.seed_source is None:
                return None, MutationResult(None, error=f"task {task.name} has no seed implementation")
            request = MutationRequest(proposal=proposal, task=task, avoid=avoided_sources(progress, proposal))
            return request, MutationResult(task.seed_source)
        mutator = self.mutators.get(proposal.operator)
        if mutator is None:
            error = f"no configured mutator serves operator {proposal.operator!r}"
            return None, MutationResult(None, error=error)
        request = build_request(self._context(), progress, proposal, mutator)
        if self.uses_llm(proposal.operator):
            async with self._llm_limit:
                result = await mutator.mutate(request)
        else:
            result = await mutator.mutate(request)
        for call in result.llm_calls:
            lib.record_llm_call(self.run_id, proposal.id, call)
        return request, result

    async def _ideas(self, progress: TaskProgress, proposal: Proposal) -> tuple[LLMCall, ...]:
        lib, mutator = self.library, self.ideas_mutator
        assert proposal.id is not None
        if mutator is None:
            lib.fail_proposal(proposal.id, "no configured mutator can brainstorm ideas")
            return ()
        request = build_request(self._context(), progress, proposal, mutator, ideas=True)
        async with self._llm_limit:
            result = await mutator.ideas(request, proposal.count)
        for call in result.llm_calls:
            lib.record_llm_call(self.run_id, proposal.id, call)
        if result.ideas:
            lib.finish_ideas(proposal.id, tuple(result.ideas), result.raw_reply)
        else:
            lib.fail_proposal(proposal.id, result.error or "no ideas", result.raw_reply)
            self.on_event(
                "mutation_failed", {"task": progress.task.name, "proposal": proposal, "error": result.error}
            )
        return tuple(result.llm_calls)

    def _context(self) -> RequestContext:
        llm = self.config.mutators.llm.language
        return RequestContext(self.library, self.run_id, self.config.seed, llm, self.hardware, self.software)

    def _fail(
        self,
        progress: TaskProgress,
        proposal: Proposal,
        error: str,
        raw_reply: str,
        request: MutationRequest | None,
        result: MutationResult,
    ) -> None:
        assert proposal.id is not None
        self.library.fail_proposal(proposal.id, error, raw_reply)
        progress.committed -= 1
        progress.failed_streak += 1
        self.on_event("mutation_failed", {"task": progress.task.name, "proposal": proposal, "error": error})
        if request is not None:
            self._observe_mutator(proposal, request, result, None)

    def _observe_mutator(
        self, proposal: Proposal, request: MutationRequest, result: MutationResult, ev: Evaluation | None
    ) -> None:
        mutator = self.mutators.get(proposal.operator)
        if mutator is not None:
            mutator.observe(request, result, ev)
            state = mutator.model_state()
            if state:  # the model bandit's state, kept so reports show it and a resume continues it
                self.library.record_model_stats(self.run_id, state)

    async def _evaluate(
        self,
        progress: TaskProgress,
        candidate: Candidate,
        request: MutationRequest | None,
        result: MutationResult | None,
    ) -> None:
        priority = FIX_PRIORITY if candidate.operator == Operator.FIX else 0
        async with self._eval_limit:
            evaluation = await self.pool.evaluate(
                progress.task, candidate.source, tenant=self.run_id, priority=priority
            )
            confirming = enabled(self.config.evaluation.confirm_best, getattr(self.pool, "device", ""))
            if confirming and would_be_best(evaluation, progress.best):
                evaluation = await confirmed(
                    self.pool, progress.task, candidate.source, evaluation, progress.best, self.run_id
                )
        self.library.record_evaluation(candidate.id, evaluation)
        progress.evaluated += 1
        scored = Scored(candidate, evaluation)
        progress.remember(scored)
        if request is not None and result is not None:
            self._observe_mutator(request.proposal, request, result, evaluation)
        progress.strategy.observe(self.view(progress), scored)
        if promoted(evaluation, progress.best):
            progress.best = scored
        self.on_event(
            "evaluated",
            {
                "task": progress.task.name,
                "scored": scored,
                "done": progress.evaluated,
                "budget": self.config.budget.evaluations,
                "best": progress.best,
            },
        )
        if time.monotonic() - self._health_at > HEALTH_EVERY_S:
            self._health_at = time.monotonic()
            health = self.pool.health()
            if health:
                self.on_event("pool_health", {"health": health})
