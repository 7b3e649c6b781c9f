"""Instant in-process stand-ins for the slow parts of a run -- evaluator, mutator, hardware,
reporter -- and the helpers that start a run on them. The conformance checks (:mod:`.kit`) run
strategies on them; tests and benchmarks reuse them to exercise the real engine and library
without Ray, a GPU or an LLM.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
from pathlib import Path
from typing import Any, ClassVar

from evokernel.config.schema import ExperimentConfig
from evokernel.mutators.base import IdeasResult, MutationRequest, MutationResult, Mutator
from evokernel.types import Evaluation, LLMCall, Operator, Status, Task

INCORRECT_MARK = "# evokernel-test: incorrect"
SEED_SOURCE = "class ModelNew:  # instant test seed\n    pass\n"


def instant_task(name: str = "instant") -> Task:
    """A task the instant parts understand (its files are never read)."""
    return Task(
        name=name,
        path=f"<instant:{name}>",
        source=f"class Model:  # instant reference {name}\n    pass\n",
        seed_source=SEED_SOURCE,
    )


def _unit(text: str, salt: str = "") -> float:
    """A number in [0, 1) fixed by ``text``."""
    return int.from_bytes(hashlib.sha256(f"{salt}|{text}".encode()).digest()[:8], "big") / 2**64


@dataclasses.dataclass(frozen=True)
class InstantHardware:
    name: str = "in-process instant evaluator"

    def describe(self) -> str:
        return self.name


class InstantEvaluator:
    """Evaluates at once (or after ``delay_s`` times a per-source factor in [0, 2)): a source with
    :data:`INCORRECT_MARK` is incorrect, any other is correct with a speedup in [0.5, 3) fixed by
    its text. ``jitter_salt`` changes which sources finish first, not the verdicts."""

    device = "in-process"
    scale = "given"

    def __init__(self, size: int = 2, delay_s: float = 0.0, jitter_salt: str = "") -> None:
        self.size = size
        self.delay_s = delay_s
        self.jitter_salt = jitter_salt
        self.evaluated = 0

    async def hardware(self) -> InstantHardware:
        return InstantHardware()

    def health(self) -> dict[str, Any]:
        return {}  # no pool line in the progress output

    async def evaluate(self, task: Task, source: str, *, tenant: str = "", priority: int = 0) -> Evaluation:
        if self.delay_s:
            await asyncio.sleep(self.delay_s * 2 * _unit(source, self.jitter_salt))
        self.evaluated += 1
        if INCORRECT_MARK in source:
            return Evaluation(status=Status.INCORRECT, reason="marked incorrect", stage="correctness")
        speedup = 0.5 + 2.5 * _unit(source)
        return Evaluation(
            status=Status.CORRECT,
            runtime_ms=1.0 / speedup,
            eager_ms=1.0,
            speedup_eager=speedup,
            device="instant",
        )


class InstantMutator(Mutator):
    """Serves every operator at once. A child is its first parent's source plus a line naming the
    proposal's randomness, marked incorrect with probability ``incorrect_rate`` (a fix clears the
    mark with probability ``fix_rate``). ``uses_llm`` makes each call report one
    :class:`~evokernel.types.LLMCall` costing ``cost_usd``, to exercise LLM budgets."""

    name: ClassVar[str] = "instant"
    operators: ClassVar[tuple[str, ...]] = tuple(
        op for op in Operator if op not in (Operator.SEED_FILE, Operator.IDEAS)
    )
    can_brainstorm: ClassVar[bool] = True

    def __init__(
        self,
        incorrect_rate: float = 0.2,
        fix_rate: float = 0.5,
        uses_llm: bool = False,
        cost_usd: float = 0.0,
        delay_s: float = 0.0,
    ) -> None:
        self.incorrect_rate = incorrect_rate
        self.fix_rate = fix_rate
        self.uses_llm = uses_llm
        self.cost_usd = cost_usd
        self.delay_s = delay_s
        self.observed: list[tuple[int | None, Status | None]] = []

    def _calls(self) -> tuple[LLMCall, ...]:
        return (LLMCall(model="instant", cost_usd=self.cost_usd),) if self.uses_llm else ()

    async def mutate(self, request: MutationRequest) -> MutationResult:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        rng = random.Random(request.rng_seed)
        base = request.parents[0].candidate.source if request.parents else SEED_SOURCE
        base = base.replace(INCORRECT_MARK + "\n", "")
        child = f"{base}# {request.proposal.operator} {request.rng_seed:x}\n"
        bad = rng.random() < (
            1 - self.fix_rate if request.proposal.operator == Operator.FIX else self.incorrect_rate
        )
        if bad:
            child += INCORRECT_MARK + "\n"
        return MutationResult(child, llm_calls=self._calls())

    async def ideas(self, request: MutationRequest, count: int) -> IdeasResult:
        ideas = tuple(f"idea {i} for generation {request.proposal.generation}" for i in range(count))
        return IdeasResult(ideas, llm_calls=self._calls())

    def observe(
        self, request: MutationRequest, result: MutationResult, evaluation: Evaluation | None
    ) -> None:
        self.observed.append((request.proposal.id, evaluation.status if evaluation else None))


class QuietReporter:
    """A :class:`~evokernel.run.progress.Reporter` that prints nothing."""

    def say(self, message: str) -> None:
        pass

    def start(self, *args: Any) -> None:
        pass

    def event(self, kind: str, data: dict[str, Any]) -> None:
        pass

    def finish(self, *args: Any) -> None:
        pass


def instant_config(
    strategy: str, params: dict[str, Any] | None, library: str | Path, tasks: list[Task], **budget: Any
) -> ExperimentConfig:
    config = ExperimentConfig(name="conformance", tasks=[t.path for t in tasks], library=str(library))
    config.strategy.name = strategy
    config.strategy.params = dict(params or {})
    for key, value in budget.items():
        setattr(config.budget, key, value)
    return config


def run_instant(
    config: ExperimentConfig,
    tasks: list[Task],
    *,
    evaluator: InstantEvaluator | None = None,
    mutator: Mutator | None = None,
    resume: str | None = None,
    overrides: tuple[str, ...] = (),
) -> str:
    """Run (or resume) ``config`` on instant parts; returns the run id."""
    from evokernel.run.runner import run_experiment

    summary = run_experiment(
        config,
        resume=resume,
        overrides=overrides,
        reporter=QuietReporter(),
        pool=evaluator or InstantEvaluator(),
        mutators=[mutator or InstantMutator()],
        tasks=tasks,
    )
    return summary.run_id
