"""Island membership, migration and reset policies, on hand-made candidates and events."""

from __future__ import annotations

import random

import pytest

from evokernel.islands.migration import NoMigration, RandomMigration, RingMigration
from evokernel.islands.model import MIGRATE, RESEED, RESET, members, ranked
from evokernel.islands.reset import FunSearchReset, NoReset
from evokernel.plugins import resolve
from evokernel.types import Candidate, Evaluation, IslandEvent, Scored, Status


def scored(cid: int, island: int, generation: int, speedup: float | None) -> Scored:
    cand = Candidate(cid, "run", "task", cid, island, generation, "tune", (), f"# {cid}\n")
    if speedup is None:
        return Scored(cand, Evaluation(status=Status.INCORRECT, reason="wrong"))
    return Scored(cand, Evaluation(status=Status.CORRECT, speedup_eager=speedup))


def test_members_are_natives_since_the_last_reset_plus_migrants() -> None:
    cands = [scored(1, 0, 0, 1.0), scored(2, 1, 1, 2.0), scored(3, 1, 3, 1.5), scored(4, 0, 2, 3.0)]
    events = [
        IslandEvent(MIGRATE, 2, 1, 4, 0),  # 4 copies to island 1 at generation 2 ...
        IslandEvent(RESET, 3, 1),  # ... then island 1 is reset at 3: 2 and the migrant 4 go
        IslandEvent(RESEED, 3, 1, 1, 0),  # and it is reseeded with 1 from island 0
    ]
    one = members(cands, events, 1)
    assert [(m.id, m.migrant) for m in one] == [(3, False), (1, True)]
    zero = members(cands, events, 0)
    assert [(m.id, m.migrant) for m in zero] == [(1, False), (4, False)]
    assert [m.id for m in ranked(zero)] == [4, 1]


def test_ring_migration_copies_the_top_fraction_of_natives_to_both_neighbours() -> None:
    pops = {
        0: members([scored(1, 0, 1, 2.0), scored(2, 0, 1, 1.0), scored(3, 0, 1, None)], [], 0),
        1: members([scored(4, 1, 1, 5.0)], [], 1),
        2: members([scored(5, 2, 1, 0.5), scored(4, 1, 1, 5.0)], [IslandEvent(MIGRATE, 1, 2, 4, 1)], 2),
        3: [],
    }
    moves = RingMigration(fraction=0.5).moves(pops, 5, random.Random(0))
    got = {(e.candidate, e.from_island, e.island) for e in moves}
    # island 0: top half of 2 correct natives = candidate 1 -> islands 3 and 1
    # island 1: candidate 4 -> island 0 and island 2, where it already lives: not copied again
    # island 2: only its native 5 may leave (4 is a migrant there) -> islands 1 and 3
    assert got == {(1, 0, 3), (1, 0, 1), (4, 1, 0), (5, 2, 1), (5, 2, 3)}
    assert all(e.kind == MIGRATE and e.generation == 5 for e in moves)


def test_random_and_no_migration() -> None:
    pops = {i: members([scored(10 + i, i, 1, 1.0 + i)], [], i) for i in range(4)}
    moves = RandomMigration(fraction=1.0).moves(pops, 2, random.Random(3))
    assert len(moves) == 4 and all(e.island != e.from_island for e in moves)
    assert NoMigration().moves(pops, 2, random.Random(3)) == []
    assert RingMigration().moves({0: pops[0]}, 2, random.Random(0)) == []  # one island: nowhere to go


def test_funsearch_reset_empties_the_weaker_half_and_reseeds_from_survivors() -> None:
    pops = {i: members([scored(10 + i, i, 1, float(i + 1))], [], i) for i in range(4)}
    events = FunSearchReset().events(pops, 6, random.Random(1))
    resets = sorted(e.island for e in events if e.kind == RESET)
    assert resets == [0, 1]  # best speedups 1.0 and 2.0: the weaker half
    reseeds = [e for e in events if e.kind == RESEED]
    assert sorted(e.island for e in reseeds) == [0, 1]
    for e in reseeds:
        assert e.from_island in (2, 3) and e.candidate == 10 + e.from_island
    after = {i: members([m.scored for p in pops.values() for m in p], events, i) for i in range(4)}
    assert [m.migrant for m in after[0]] == [True] and after[0][0].id in (12, 13)
    assert NoReset().events(pops, 6, random.Random(1)) == []


@pytest.mark.parametrize(
    ("kind", "name", "cls"),
    [
        ("migrations", "ring", RingMigration),
        ("migrations", "none", NoMigration),
        ("resets", "funsearch", FunSearchReset),
    ],
)
def test_policies_resolve_by_name(kind: str, name: str, cls: type) -> None:
    assert resolve(kind, name) is cls


def test_migrants_are_capped_per_island_and_the_share_holds_below_the_cap() -> None:
    pops = {
        0: members([scored(i, 0, 1, float(i)) for i in range(1, 11)], [], 0),  # 10 correct natives
        1: members([scored(20, 1, 1, 1.0)], [], 1),
    }
    capped = RingMigration(fraction=0.5, max_migrants=3)
    assert [m.id for m in capped.emigrants(pops, 0)] == [10, 9, 8]  # half of 10 is 5, capped at 3
    assert [m.id for m in RingMigration(fraction=0.5, max_migrants=None).emigrants(pops, 0)] == [
        10,
        9,
        8,
        7,
        6,
    ]
    assert [m.id for m in capped.emigrants(pops, 1)] == [20]  # at least one
    moves = capped.moves(pops, 5, random.Random(0))
    assert sorted((e.candidate, e.island) for e in moves) == [(8, 1), (9, 1), (10, 1), (20, 0)]
