"""PIKE-B-style elite branching over one island (first form).

Generations are synchronous, as PIKE-B's phases are: generation 0 is the task's seed
implementation (or, with an LLM, ``branches`` LLM-written seeds); every later generation makes
``branches`` proposals whose parents are the ``top_k`` fastest correct candidates so far, spread
over the branches round-robin, each mutated alone (one parent, mutation only). The next
generation starts only when the previous one is fully evaluated, so the same evaluations always
lead to the same proposals. With an LLM and no correct candidate yet, the failed candidates of
the last generation are sent to the ``fix`` operator instead.

The ideas call, per-branch lineage and bounded fix rounds of the full PIKE-B come with the
strategies issue; the parameters here keep PIKE-B's names and defaults.
"""

from __future__ import annotations

from evokernel.strategies.base import Strategy
from evokernel.types import Proposal, Status
from evokernel.view import RunView


class PikeB(Strategy):
    name = "pike_b"

    def __init__(
        self, branches: int = 10, top_k: int = 4, max_phases: int | None = None, operator: str = "auto"
    ) -> None:
        if branches < 1 or top_k < 1:
            from evokernel.exceptions import ConfigError

            raise ConfigError("pike_b needs branches >= 1 and top_k >= 1")
        self.branches = branches
        self.top_k = top_k
        self.max_phases = max_phases
        self.operator = operator

    def _mutation_operator(self, view: RunView) -> str:
        if self.operator != "auto":
            return self.operator
        return "mutate" if "mutate" in view.operators else "tune"

    def propose(self, view: RunView, capacity: int) -> list[Proposal]:
        gen = view.last_generation()
        if gen >= 0:
            # Fill the current generation first (capacity may have split it), then wait for it.
            missing = self._size(view, gen) - view.proposals_made(generation=gen)
            if missing > 0:
                return self._generation(
                    view, gen, min(missing, capacity), view.proposals_made(generation=gen)
                )
            if view.in_flight:
                return []
        next_gen = gen + 1
        if self.max_phases is not None and next_gen > self.max_phases:
            return []
        return self._generation(view, next_gen, min(self._size(view, next_gen), capacity), 0)

    def _size(self, view: RunView, gen: int) -> int:
        if gen == 0 and view.task.seed_source is not None and "seed_file" in view.operators:
            return 1
        return self.branches

    def _generation(self, view: RunView, gen: int, count: int, start: int) -> list[Proposal]:
        task = view.task.name
        if gen == 0:
            if view.task.seed_source is not None and "seed_file" in view.operators:
                return [Proposal(task=task, operator="seed_file", generation=0)][:count]
            if "seed" in view.operators:
                return [Proposal(task=task, operator="seed", generation=0) for _ in range(count)]
            return []
        elites = view.top(self.top_k)
        if elites:
            op = self._mutation_operator(view)
            return [
                Proposal(
                    task=task,
                    operator=op,
                    generation=gen,
                    parents=(elites[(start + b) % len(elites)].candidate.id,),
                )
                for b in range(count)
            ]
        if "fix" not in view.operators:
            return []
        failed = [
            sc
            for sc in view.candidates(generation=gen - 1)
            if sc.evaluation is not None and sc.evaluation.status is not Status.CORRECT
        ]
        if not failed:
            return []
        return [
            Proposal(
                task=task,
                operator="fix",
                generation=gen,
                parents=(failed[(start + b) % len(failed)].candidate.id,),
            )
            for b in range(count)
        ]
