"""Who lives on an island, derived from candidates and island events alone.

A member is a candidate that was made on the island (a native) or arrived by migration or
reseeding (a migrant). A ``reset`` at generation g empties the island of every member whose
arrival (its generation for natives, the event's generation for migrants) is before g.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from evokernel.types import IslandEvent, Scored

MIGRATE = "migrate"
RESET = "reset"
RESEED = "reseed"
KINDS = (MIGRATE, RESET, RESEED)


@dataclass(frozen=True)
class Member:
    scored: Scored
    # True for candidates that arrived from another island: they never migrate again.
    migrant: bool = False

    @property
    def id(self) -> int:
        return self.scored.candidate.id


def reset_generation(events: Iterable[IslandEvent], island: int) -> int:
    """Generation of the island's latest reset (0 when it never was)."""
    return max((e.generation for e in events if e.kind == RESET and e.island == island), default=0)


def members(candidates: list[Scored], events: list[IslandEvent], island: int) -> list[Member]:
    """The island's population: natives then migrants, each in the order they arrived."""
    since = reset_generation(events, island)
    natives = [
        Member(sc) for sc in candidates if sc.candidate.island == island and sc.candidate.generation >= since
    ]
    native_ids = {m.id for m in natives}
    by_id = {sc.candidate.id: sc for sc in candidates}
    migrants: list[Member] = []
    seen: set[int] = set()
    for e in events:
        if e.island != island or e.kind not in (MIGRATE, RESEED) or e.generation < since:
            continue
        if e.candidate is None or e.candidate in seen or e.candidate in native_ids:
            continue
        scored = by_id.get(e.candidate)
        if scored is not None:
            seen.add(e.candidate)
            migrants.append(Member(scored, migrant=True))
    return natives + migrants


def ranked(population: Iterable[Member]) -> list[Member]:
    """Correct members, fastest first; ties go to the older candidate (deterministic)."""
    correct = [m for m in population if m.scored.evaluation is not None and m.scored.evaluation.ok]
    return sorted(correct, key=lambda m: (-m.scored.speedup, m.id))


class IslandsState(Protocol):
    """What migration and reset policies read of the islands as a boundary starts: bounded reads,
    never whole populations (:class:`evokernel.islands.index.IslandIndex` serves them from the
    library's island index, :class:`PopulationState` from member lists)."""

    def islands(self) -> list[int]: ...

    def best(self, island: int) -> Member | None:
        """The island's fastest correct member."""
        ...

    def natives(self, island: int, limit: int | None) -> int:
        """Correct natives of the island; counting may stop at ``limit``."""
        ...

    def top_natives(self, island: int, k: int) -> list[Member]:
        """The island's k fastest correct natives, best first."""
        ...

    def holding(self, candidates: list[int], islands: list[int]) -> set[tuple[int, int]]:
        """(island, candidate) pairs of these islands and candidates where the candidate lives."""
        ...


class PopulationState:
    """:class:`IslandsState` over member lists (tests, small libraries)."""

    def __init__(self, populations: dict[int, list[Member]]) -> None:
        self.populations = populations

    def islands(self) -> list[int]:
        return sorted(self.populations)

    def best(self, island: int) -> Member | None:
        top = ranked(self.populations[island])
        return top[0] if top else None

    def natives(self, island: int, limit: int | None) -> int:
        count = len(self.top_natives(island, len(self.populations[island])))
        return count if limit is None else min(count, limit)

    def top_natives(self, island: int, k: int) -> list[Member]:
        return [m for m in ranked(self.populations[island]) if not m.migrant][:k]

    def holding(self, candidates: list[int], islands: list[int]) -> set[tuple[int, int]]:
        wanted = set(candidates)
        return {(i, m.id) for i in islands for m in self.populations[i] if m.id in wanted}


def as_state(islands: IslandsState | dict[int, list[Member]]) -> IslandsState:
    return PopulationState(islands) if isinstance(islands, dict) else islands
