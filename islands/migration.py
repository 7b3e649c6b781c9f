"""Migration policies: which members copy to which island at a migration boundary.

A policy reads the islands through :class:`~evokernel.islands.model.IslandsState` (bounded reads:
counts, top natives, who lives where) and returns ``migrate`` events; the strategy decides when
(every M generations) and records them through the engine. Only natives migrate (migrants never
migrate again), and a candidate is never copied to an island it already lives on.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from typing import ClassVar

from evokernel.islands.model import MIGRATE, IslandsState, Member, as_state
from evokernel.types import IslandEvent


class MigrationPolicy(ABC):
    """``fraction`` of each island's correct natives (at least one, if it has any, and at most
    ``max_migrants``) migrate.

    The cap keeps a boundary bounded in a large library: the top tenth of 300k natives is 30k
    copies. OpenEvolve bounds it through its population size (1000 programs over all islands); an
    island under ``max_migrants / fraction`` natives (500 at the defaults) is not affected.
    """

    name: ClassVar[str]

    def __init__(self, fraction: float = 0.1, max_migrants: int | None = 50) -> None:
        self.fraction = fraction
        self.max_migrants = max_migrants

    def emigrants(self, islands: IslandsState | dict[int, list[Member]], island: int) -> list[Member]:
        state = as_state(islands)
        cap = self.max_migrants
        # Past cap / fraction natives the share is capped: counting further would read for nothing.
        limit = None if cap is None else (math.ceil(cap / self.fraction) if self.fraction > 0 else 1)
        natives = state.natives(island, limit)
        if not natives:
            return []
        k = max(1, math.ceil(self.fraction * natives))
        return state.top_natives(island, k if cap is None else min(k, cap))

    @abstractmethod
    def destinations(self, island: int, islands: int, rng: random.Random) -> list[int]:
        """Islands that ``island``'s emigrants copy to."""

    def moves(
        self, islands: IslandsState | dict[int, list[Member]], generation: int, rng: random.Random
    ) -> list[IslandEvent]:
        state = as_state(islands)
        indices = state.islands()
        events: list[IslandEvent] = []
        for island in indices:
            targets = self.destinations(island, len(indices), rng)
            leaving = self.emigrants(state, island) if targets else []
            present = state.holding([m.id for m in leaving], targets) if leaving else set()
            for member in leaving:
                for dest in targets:
                    if (dest, member.id) not in present:
                        present.add((dest, member.id))
                        events.append(IslandEvent(MIGRATE, generation, dest, member.id, island))
        return events


class RingMigration(MigrationPolicy):
    """Copy to both neighbours on a ring (island i -> i-1 and i+1), as in PIKE-O / OpenEvolve."""

    name = "ring"

    def destinations(self, island: int, islands: int, rng: random.Random) -> list[int]:
        if islands < 2:
            return []
        return sorted({(island - 1) % islands, (island + 1) % islands})


class RandomMigration(MigrationPolicy):
    """Copy to one other island drawn at random (from the resume-stable generator given)."""

    name = "random"

    def destinations(self, island: int, islands: int, rng: random.Random) -> list[int]:
        others = [i for i in range(islands) if i != island]
        return [rng.choice(others)] if others else []


class NoMigration(MigrationPolicy):
    name = "none"

    def destinations(self, island: int, islands: int, rng: random.Random) -> list[int]:
        return []


MIGRATION_POLICIES: dict[str, type[MigrationPolicy]] = {
    cls.name: cls for cls in (RingMigration, RandomMigration, NoMigration)
}
