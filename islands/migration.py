"""Migration policies: which members copy to which island at a migration boundary.

A policy sees every island's population and returns ``migrate`` events; the strategy decides when
(every M generations) and records them through the engine. Only natives migrate (migrants never
migrate again), and a candidate is never copied to an island it already lives on.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from typing import ClassVar

from evokernel.islands.model import MIGRATE, Member, ranked
from evokernel.types import IslandEvent


class MigrationPolicy(ABC):
    """``fraction`` of each island's correct natives (at least one, if it has any) migrate."""

    name: ClassVar[str]

    def __init__(self, fraction: float = 0.1) -> None:
        self.fraction = fraction

    def emigrants(self, population: list[Member]) -> list[Member]:
        natives = [m for m in ranked(population) if not m.migrant]
        if not natives:
            return []
        return natives[: max(1, math.ceil(self.fraction * len(natives)))]

    @abstractmethod
    def destinations(self, island: int, islands: int, rng: random.Random) -> list[int]:
        """Islands that ``island``'s emigrants copy to."""

    def moves(
        self, populations: dict[int, list[Member]], generation: int, rng: random.Random
    ) -> list[IslandEvent]:
        islands = len(populations)
        present = {i: {m.id for m in pop} for i, pop in populations.items()}
        events: list[IslandEvent] = []
        for island in sorted(populations):
            targets = self.destinations(island, islands, rng)
            for member in self.emigrants(populations[island]):
                for dest in targets:
                    if member.id not in present[dest]:
                        present[dest].add(member.id)
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
