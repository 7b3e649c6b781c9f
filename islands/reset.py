"""Reset policies: which islands start over, and from what.

FunSearch's policy: every so often the weaker half of the islands (by their best score, ties
broken at random) is emptied, and each is reseeded with the best member of an island drawn from
the surviving half. Weak islands stop wasting budget, strong lineages spread, and the reseeded
islands diverge again from there.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import ClassVar

from evokernel.islands.model import RESEED, RESET, Member, best_speedup, ranked
from evokernel.types import IslandEvent


class ResetPolicy(ABC):
    name: ClassVar[str]

    @abstractmethod
    def events(
        self, populations: dict[int, list[Member]], generation: int, rng: random.Random
    ) -> list[IslandEvent]:
        """``reset`` and ``reseed`` events for the boundary before ``generation``."""


class FunSearchReset(ResetPolicy):
    name = "funsearch"

    def events(
        self, populations: dict[int, list[Member]], generation: int, rng: random.Random
    ) -> list[IslandEvent]:
        islands = sorted(populations)
        if len(islands) < 2:
            return []
        # FunSearch adds tiny noise to the scores so equal islands are ordered at random.
        order = sorted(islands, key=lambda i: best_speedup(populations[i]) + rng.random() * 1e-6)
        weaker, stronger = order[: len(islands) // 2], order[len(islands) // 2 :]
        out: list[IslandEvent] = []
        for island in sorted(weaker):
            donor = rng.choice(stronger)
            top = ranked(populations[donor])
            out.append(IslandEvent(RESET, generation, island))
            if top:
                out.append(IslandEvent(RESEED, generation, island, top[0].id, donor))
        return out


class NoReset(ResetPolicy):
    name = "none"

    def events(
        self, populations: dict[int, list[Member]], generation: int, rng: random.Random
    ) -> list[IslandEvent]:
        return []


RESET_POLICIES: dict[str, type[ResetPolicy]] = {cls.name: cls for cls in (FunSearchReset, NoReset)}
