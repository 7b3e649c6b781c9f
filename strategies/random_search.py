"""Random sampling, a baseline with no selection pressure: fitness never picks a parent.

``from_seed`` (default): every generation draws ``batch`` independent samples from the seed
generation (repeated sampling, the usual best-of-N baseline). Otherwise each parent is drawn
uniformly from every correct candidate of earlier generations, fast or slow (a random walk).
"""

from __future__ import annotations

from evokernel.exceptions import ConfigError
from evokernel.strategies.base import GenerationalStrategy
from evokernel.strategies.common import correct, initial_generation, mutation_operator
from evokernel.strategies.view import RunView
from evokernel.types import Proposal


class RandomSearch(GenerationalStrategy):
    name = "random"

    def __init__(
        self,
        batch: int = 4,
        from_seed: bool = True,
        operator: str = "auto",
        max_generations: int | None = None,
    ) -> None:
        if batch < 1:
            raise ConfigError("random needs batch >= 1 (proposals per generation)")
        self.batch = batch
        self.from_seed = from_seed
        self.operator = operator
        self.max_generations = max_generations

    def plan(self, view: RunView, generation: int) -> list[Proposal]:
        task = view.task.name
        if generation == 0:
            return initial_generation(view, self.batch)
        # The walk draws through view.correct: one indexed lookup per draw, not a read of every
        # candidate (seconds a generation at 100k).
        pool = correct(view.candidates(generation=0)) if self.from_seed else view.correct(generation)
        if not pool:
            return []
        rng = view.rng("random", generation)
        op = mutation_operator(view, self.operator)
        return [
            Proposal(
                task=task,
                operator=op,
                generation=generation,
                parents=(rng.choice(pool).candidate.id,),
                branch=b,
            )
            for b in range(self.batch)
        ]
