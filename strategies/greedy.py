"""Greedy hill-climbing, a baseline: every generation mutates the single best candidate so far.

Generation 0 is the seed; generation g makes ``batch`` proposals, all with the best correct
candidate of generations < g as their one parent (``branch`` tells them apart, so each draws
different randomness). With no correct candidate yet and an LLM configured, the failures of the
last generation go to the ``fix`` operator instead.
"""

from __future__ import annotations

from evokernel.exceptions import ConfigError
from evokernel.strategies.base import GenerationalStrategy
from evokernel.strategies.common import failed, initial_generation, mutation_operator
from evokernel.strategies.view import RunView
from evokernel.types import Operator, Proposal


class Greedy(GenerationalStrategy):
    name = "greedy"

    def __init__(self, batch: int = 4, operator: str = "auto", max_generations: int | None = None) -> None:
        if batch < 1:
            raise ConfigError("greedy needs batch >= 1 (proposals per generation)")
        self.batch = batch
        self.operator = operator
        self.max_generations = max_generations

    def plan(self, view: RunView, generation: int) -> list[Proposal]:
        task = view.task.name
        if generation == 0:
            return initial_generation(view, self.batch)
        best = view.top(1, before=generation)
        if best:
            op = mutation_operator(view, self.operator)
            parent = best[0].candidate.id
            return [
                Proposal(task=task, operator=op, generation=generation, parents=(parent,), branch=b)
                for b in range(self.batch)
            ]
        if Operator.FIX not in view.operators:
            return []
        broken = failed(view.candidates(generation=generation - 1))[: self.batch]
        return [
            Proposal(
                task=task, operator=Operator.FIX, generation=generation, parents=(sc.candidate.id,), branch=b
            )
            for b, sc in enumerate(broken)
        ]
