"""The strategy plug-in kind: decides what to try next and who survives.

Lifecycle (one strategy object per task of a run, built again on resume):

1. The engine constructs the class with the ``strategy.params`` of the config as keyword
   arguments (:meth:`Strategy.from_params`; an unknown parameter is a
   :class:`~evokernel.exceptions.ConfigError`) and makes sure islands ``0..islands-1`` exist.
2. Before asking for work, the engine calls :meth:`Strategy.island_events`: membership changes
   due now (migration, reset, reseed). It records them in one transaction; the strategy then sees
   them through the view, so it must return none once they are recorded.
3. Whenever there is budget left, the engine calls :meth:`Strategy.propose` with a
   :class:`~evokernel.strategies.view.RunView` and a ``capacity`` (evaluations the budget still allows). The
   strategy returns at most ``capacity`` proposals (an ``ideas`` proposal makes no candidate and
   does not count). The engine records them all before any work starts, then runs them under its
   concurrency limits. Returning none while work is in flight means "wait for results"; returning
   none when nothing is in flight ends the task (the strategy has nothing left to try).
4. After each evaluation the engine calls :meth:`Strategy.observe` (optional hook).
5. :meth:`Strategy.survivors` says which members of an island parents are drawn from after a
   generation (reports and island policies use it; the default is every correct member).

A strategy reads only the view (never the pool or the mutators) and keeps no state that is not
derivable from the library: that is what makes ``--resume`` exact. Randomness comes from
``view.rng(...)``, which depends only on the run seed, the task and the salt given. A strategy
whose next generation depends only on finished generations (see :class:`GenerationalStrategy`)
also makes the same choices whatever order evaluations finish in, so a seed reproduces a run
given the same LLM replies and evaluations. ``evokernel.conformance`` checks these rules for a class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from evokernel.islands.model import Member, ranked
from evokernel.plugins import construct
from evokernel.strategies.view import RunView
from evokernel.types import IslandEvent, Proposal, Scored


class Strategy(ABC):
    name: ClassVar[str]
    # Islands per task; a strategy with several sets this in __init__ from its params.
    islands: int = 1

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Strategy:
        return construct(cls, params, "strategy.params", "strategy")

    @abstractmethod
    def propose(self, view: RunView, capacity: int) -> list[Proposal]:
        """Up to ``capacity`` proposals for ``view.task``; see the module docstring."""

    def observe(self, view: RunView, scored: Scored) -> None:  # noqa: B027 - optional hook
        """Called once per finished evaluation."""

    def island_events(self, view: RunView) -> list[IslandEvent]:
        """Membership changes due before the next proposals (none by default)."""
        return []

    def survivors(self, view: RunView, island: int) -> list[Member]:
        """Members of ``island`` that the next generation's parents are drawn from, best first."""
        return ranked(view.population(island))


class GenerationalStrategy(Strategy):
    """Generation-synchronous skeleton: generation g+1 is planned only when all of g is finished,
    and :meth:`plan` may read only generations before the one it plans (pass ``before=``).

    So the plan of a generation is a pure function of finished work: a capacity that splits it, a
    crash in its middle, or evaluations finishing in another order change nothing.
    """

    max_generations: int | None = None
    # (run, task, generation) -> len(plan): a memo of a pure function of finished generations, so
    # it holds nothing the library does not (asking while work is in flight then costs one query).
    _plan_sizes: dict[tuple[str, str, int], int]

    @abstractmethod
    def plan(self, view: RunView, generation: int) -> list[Proposal]:
        """Every proposal of ``generation``, in a fixed order (reading generations < it only)."""

    def propose(self, view: RunView, capacity: int) -> list[Proposal]:
        gen = view.last_generation()
        if gen >= 0:
            made = self._made(view, gen)
            if made < self._plan_size(view, gen):
                return self.plan(view, gen)[made : made + capacity]
            if view.in_flight:
                return []
        nxt = gen + 1
        if self.max_generations is not None and nxt >= self.max_generations:
            return []
        planned = self.plan(view, nxt)
        self._remember(view, nxt, len(planned))
        return planned[:capacity]

    def generation_finished(self, view: RunView) -> int | None:
        """The next generation's number when the current one is fully made and finished, else None."""
        gen = view.last_generation()
        if view.in_flight:
            return None
        if gen >= 0 and self._made(view, gen) < self._plan_size(view, gen):
            return None
        return gen + 1

    @staticmethod
    def _made(view: RunView, gen: int) -> int:
        # ideas proposals make no candidate and are not in the plan
        return view.proposals_made(generation=gen, candidates_only=True)

    def plan_size(self, view: RunView, generation: int) -> int:
        """``len(self.plan(view, generation))``; override when it is cheaper to count than to plan
        (a fresh instance, e.g. after a resume, asks this for the generation under way)."""
        return len(self.plan(view, generation))

    def _plan_size(self, view: RunView, gen: int) -> int:
        key = (view.run_id, view.task.name, gen)
        sizes = self.__dict__.setdefault("_plan_sizes", {})
        if key not in sizes:
            self._remember(view, gen, self.plan_size(view, gen))
        return int(sizes[key])

    def _remember(self, view: RunView, gen: int, size: int) -> None:
        sizes = self.__dict__.setdefault("_plan_sizes", {})
        if len(sizes) > 64:  # only the current generation is ever asked again
            sizes.clear()
        sizes[(view.run_id, view.task.name, gen)] = size
