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

from evokernel.islands.model import RESEED, RESET, IslandsState, Member, as_state
from evokernel.types import IslandEvent


class ResetPolicy(ABC):
    name: ClassVar[str]

    @abstractmethod
    def events(
        self, islands: IslandsState | dict[int, list[Member]], generation: int, rng: random.Random
    ) -> list[IslandEvent]:
        """``reset`` and ``reseed`` events for the boundary before ``generation``."""


class FunSearchReset(ResetPolicy):
    name = "funsearch"

    def events(
        self, islands: IslandsState | dict[int, list[Member]], generation: int, rng: random.Random
    ) -> list[IslandEvent]:
        state = as_state(islands)
        indices = state.islands()
        if len(indices) < 2:
            return []
        best = {i: state.best(i) for i in indices}
        # FunSearch adds tiny noise to the scores so equal islands are ordered at random.
        order = sorted(indices, key=lambda i: _speedup(best[i]) + rng.random() * 1e-6)
        weaker, stronger = order[: len(indices) // 2], order[len(indices) // 2 :]
        out: list[IslandEvent] = []
        for island in sorted(weaker):
            donor = rng.choice(stronger)
            top = best[donor]
            out.append(IslandEvent(RESET, generation, island))
            if top is not None:
                out.append(IslandEvent(RESEED, generation, island, top.id, donor))
        return out


def _speedup(member: Member | None) -> float:
    return member.scored.speedup if member is not None else 0.0


class NoReset(ResetPolicy):
    name = "none"

    def events(
        self, islands: IslandsState | dict[int, list[Member]], generation: int, rng: random.Random
    ) -> list[IslandEvent]:
        return []


RESET_POLICIES: dict[str, type[ResetPolicy]] = {cls.name: cls for cls in (FunSearchReset, NoReset)}
