"""``RunView``: the read-only window a strategy has on the library for one (run, task).

Strategies decide from what is recorded, never from private memory, so a strategy rebuilt after a
crash sees exactly what the killed one saw and proposes the same next step.

The view offers reads only; the library behind it is private. The one thing a read may cause is
bringing the island index -- a cache derived from recorded candidates and events, never a fact
of its own -- up to date: :meth:`RunView.island_index` asks the run's writer (``fold_index``,
which the engine grants) to fold finished generations in before reading it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, overload

from evokernel.exceptions import LibraryError
from evokernel.islands.index import CorrectPool, IslandIndex
from evokernel.islands.model import Member, members
from evokernel.types import IslandEvent, Operator, Proposal, Scored, Task

if TYPE_CHECKING:
    from evokernel.db import SolutionLibrary
    from evokernel.db.index import IndexState


class IndexFolder(Protocol):
    """The run's writer of the island index (:meth:`SolutionLibrary.advance_island_index`)."""

    def __call__(
        self,
        run_id: str,
        task: str,
        *,
        spec: str | None,
        cell_of: Callable[[Scored], str] | None,
        candidates_through: int,
        events_through: int,
    ) -> IndexState: ...


IDEAS = Operator.IDEAS


@dataclass(frozen=True)
class RunView:
    # Private: strategies read through the methods below (reads only). Positional first, as before.
    _library: SolutionLibrary = field(repr=False)
    run_id: str
    task: Task
    seed: int
    # Operators some configured mutator serves, e.g. {"seed_file", "tune"} or {..., "mutate", "fix",
    # "ideas"}; "ideas" is there when a mutator can brainstorm (LLMMutator.ideas).
    operators: frozenset[str]
    # Proposals of this task whose work is not finished (kept by the engine).
    in_flight: int = 0
    # Islands the strategy runs for this task (rows 0..islands-1 exist in the library).
    islands: int = 1
    # The engine, the only writer of its run, knows the highest generation it recorded: passing it
    # saves a query per call (None: ask the library).
    known_last_generation: int | None = None
    # The run's island-index writer (the engine passes its library's); None: island_index() raises.
    fold_index: IndexFolder | None = field(default=None, repr=False, compare=False)

    def candidates(
        self, island: int | None = None, generation: int | None = None, before: int | None = None
    ) -> list[Scored]:
        """Candidates *made on* an island (natives), oldest first; ``before``: generations below it.
        See :meth:`population` for an island's members."""
        return self._library.candidates(
            self.run_id, self.task.name, island=island, generation=generation, before=before
        )

    def summaries(self, before: int | None = None) -> list[Scored]:
        """All candidates (natives of every island) without lineage, with only status and speedup
        in their evaluation. O(candidates): for reports and checks; a boundary step that must stay
        flat reads :meth:`top`, :meth:`correct` or the island index (:mod:`evokernel.islands.index`)."""
        return self._library.summaries(self.run_id, self.task.name, before=before)

    def top(self, k: int, island: int | None = None, before: int | None = None) -> list[Scored]:
        """The k fastest correct candidates, best first; ``before``: generations below it."""
        return self._library.top(self.run_id, self.task.name, k, island=island, before=before)

    def correct(self, before: int) -> Sequence[Scored]:
        """Every correct candidate of generations < ``before``, numbered generation by generation
        (fastest first within one), as a sequence whose ``len`` and indexing are one indexed query
        each: draw from it with ``rng.choice`` / ``rng.sample`` at any library size. Its items carry
        the candidate id and speedup only (:meth:`SolutionLibrary.get_candidate` has the rest).
        Generation ``before - 1`` must be finished (see :mod:`evokernel.db.index`)."""
        # No islands: the pool does not depend on them, and each would cost a count and a top read.
        index = self.island_index(0, before, spec=None, cell_of=None, with_events=False)
        return _Scoreds(index.pool())

    def candidate(self, candidate_id: int) -> Scored:
        """One candidate with its source and lineage (e.g. a parent named by a proposal)."""
        return self._library.get_candidate(candidate_id)

    def has_island_events(self, generation: int) -> bool:
        """Whether island events are recorded for ``generation``."""
        return self._library.has_island_events(self.run_id, self.task.name, generation)

    def island_index(
        self,
        islands: int,
        generation: int,
        *,
        spec: str | None,
        cell_of: Callable[[Scored], str] | None,
        with_events: bool,
    ) -> IslandIndex:
        """Islands ``0..islands-1`` as ``generation`` starts, read from the library's island index
        (see :class:`~evokernel.islands.index.IslandIndex`; ``spec`` and ``cell_of`` name the
        MAP-Elites grid it keeps). Generations before ``generation`` must be finished."""
        if self.fold_index is None:
            raise LibraryError("this RunView was built without the run's island-index writer (fold_index)")
        events_through = generation if with_events else generation - 1
        state = self.fold_index(
            self.run_id,
            self.task.name,
            spec=spec,
            cell_of=cell_of,
            candidates_through=generation - 1,
            events_through=events_through,
        )
        return IslandIndex(
            self._library, self.run_id, self.task.name, islands, generation, state, with_events
        )

    def proposals(self, generation: int | None = None, operator: str | None = None) -> list[Proposal]:
        """Recorded proposals (open, done and failed), in recording order."""
        return self._library.proposals(self.run_id, self.task.name, generation=generation, operator=operator)

    def proposals_made(self, generation: int | None = None, candidates_only: bool = False) -> int:
        """Proposals recorded for the task (all states), optionally of one generation;
        ``candidates_only``: without ``ideas`` proposals, which make no candidate."""
        exclude = IDEAS if candidates_only else None
        return self._library.count_proposals(
            self.run_id, self.task.name, generation=generation, exclude_operator=exclude
        )

    def last_generation(self) -> int:
        """Highest generation any proposal was made for, -1 before the first."""
        if self.known_last_generation is not None:
            return self.known_last_generation
        return self._library.last_generation(self.run_id, self.task.name)

    def ideas(self, generation: int, island: int = 0) -> tuple[str, ...] | None:
        """Ideas of the generation's finished ``ideas`` proposal; () if it failed, None if there is
        none yet or it is still open."""
        found = [p for p in self.proposals(generation=generation, operator=IDEAS) if p.island == island]
        if not found or found[-1].state == "open":
            return None
        return found[-1].ideas

    def island_events(self) -> list[IslandEvent]:
        return self._library.island_events(self.run_id, self.task.name)

    def population(
        self, island: int, candidates: list[Scored] | None = None, before: int | None = None
    ) -> list[Member]:
        """Members of ``island``: natives since its last reset, plus migrants and reseeds
        (``before``: as generation ``before`` starts, i.e. from generations below it).

        Pass ``candidates`` (all of the task's, same ``before``) when asking for several islands.
        """
        everyone = self.candidates(before=before) if candidates is None else candidates
        events = self.island_events()
        if before is not None:
            events = [e for e in events if e.generation <= before]
        return members(everyone, events, island)

    def rng(self, *salt: object) -> random.Random:
        """A generator that depends only on the run seed, the task and ``salt``: resume-stable."""
        key = "|".join(map(str, (self.seed, self.task.name, *salt)))
        return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


class _Scoreds(Sequence[Scored]):
    """A sequence of members seen as their :class:`Scored`."""

    def __init__(self, members: CorrectPool) -> None:
        self.members = members

    def __len__(self) -> int:
        return len(self.members)

    @overload
    def __getitem__(self, index: int) -> Scored: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Scored]: ...

    def __getitem__(self, index: int | slice) -> Scored | Sequence[Scored]:
        if isinstance(index, slice):
            return [m.scored for m in self.members[index]]
        return self.members[index].scored
