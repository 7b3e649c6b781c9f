"""An example custom strategy: tournament selection, kept beside the experiment that uses it.

Run it with ``strategy.name: experiments/custom_strategy/tournament.py:Tournament`` (a file path,
relative to where you run ``evokernel``) or, once in an installed package, ``my_pkg.module:Class``
or an entry point in the group ``evokernel.strategies``. Check it with the conformance suite::

    from evokernel.conformance import check_strategy
    check_strategy("experiments/custom_strategy/tournament.py:Tournament", {"size": 3}, workdir=tmp)

Each generation makes ``batch`` proposals; each parent is the fastest of ``size`` correct
candidates drawn at random from the generations before. Everything comes from the view and
``view.rng``, so a resumed run continues exactly.
"""

from __future__ import annotations

from evokernel.exceptions import ConfigError
from evokernel.strategies.base import GenerationalStrategy
from evokernel.strategies.common import initial_generation, mutation_operator
from evokernel.strategies.view import RunView
from evokernel.types import Proposal


class Tournament(GenerationalStrategy):
    name = "tournament"

    def __init__(self, batch: int = 4, size: int = 3, max_generations: int | None = None) -> None:
        if batch < 1 or size < 1:
            raise ConfigError("tournament needs batch >= 1 and size >= 1")
        self.batch = batch
        self.size = size
        self.max_generations = max_generations

    def plan(self, view: RunView, generation: int) -> list[Proposal]:
        if generation == 0:
            return initial_generation(view, self.batch)
        # view.correct draws by index (one query per draw), so a generation costs the same at 1M
        # candidates as at 10; view.candidates(before=...) would read every one of them.
        pool = view.correct(generation)
        if not pool:
            return []
        op = mutation_operator(view)
        out = []
        for branch in range(self.batch):
            rng = view.rng("tournament", generation, branch)
            entrants = rng.sample(pool, min(self.size, len(pool)))
            winner = max(entrants, key=lambda sc: (sc.speedup, -sc.candidate.id))
            out.append(Proposal(view.task.name, op, 0, generation, (winner.candidate.id,), branch=branch))
        return out
