"""PIKE-O: parent sampling ratios (statistically), MAP-Elites cells, migration and reset in runs."""

from __future__ import annotations

import math
import random
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from evokernel.conformance import InstantMutator
from evokernel.exceptions import ConfigError
from evokernel.islands.model import Member
from evokernel.strategies.pike_o import EXPLOITATION, EXPLORATION, RANDOM, PikeO
from evokernel.types import Candidate, Evaluation, Scored, Status
from tests.strategies.helpers import by_proposal, instant_run

DRAWS = 20_000


def member(cid: int, speedup: float = 1.0, source: str = "x") -> Member:
    cand = Candidate(cid, "run", "t", cid, 0, 1, "tune", (), source)
    return Member(Scored(cand, Evaluation(status=Status.CORRECT, speedup_eager=speedup)))


@pytest.mark.parametrize("ratios", [(0.2, 0.7), (0.5, 0.3)])
def test_parent_sampling_follows_the_configured_ratios(ratios: tuple[float, float]) -> None:
    explore, exploit = ratios
    strategy = PikeO(exploration_ratio=explore, exploitation_ratio=exploit)
    grid, archive, everyone = [member(i) for i in range(5)], [member(i) for i in range(10, 13)], [member(20)]
    pools = {EXPLORATION: grid, EXPLOITATION: archive, RANDOM: everyone}
    rng = random.Random(7)
    kinds: Counter[str] = Counter()
    picks: Counter[int] = Counter()
    for _ in range(DRAWS):
        picked = strategy.sample_parent(rng, grid, archive, everyone)
        assert picked is not None
        kind, parent = picked
        assert parent in pools[kind]  # each kind draws from its own pool
        kinds[kind] += 1
        picks[parent.id] += 1
    for kind, p in ((EXPLORATION, explore), (EXPLOITATION, exploit), (RANDOM, 1 - explore - exploit)):
        sigma = math.sqrt(p * (1 - p) / DRAWS)
        assert abs(kinds[kind] / DRAWS - p) < 5 * sigma, (kind, kinds[kind] / DRAWS, p)
    # Uniform within a pool: each grid cell gets a fifth of the exploration draws.
    share = [picks[i] / kinds[EXPLORATION] for i in range(5)]
    assert max(share) - min(share) < 0.05


def test_an_empty_pool_falls_back_to_the_next_kind() -> None:
    strategy = PikeO(exploration_ratio=1.0, exploitation_ratio=0.0)
    picked = strategy.sample_parent(random.Random(0), [], [member(3)], [member(4)])
    assert picked is not None and picked[0] == EXPLOITATION
    assert strategy.sample_parent(random.Random(0), [], [], []) is None


def test_map_elites_keeps_the_fastest_member_per_cell() -> None:
    strategy = PikeO(features=["code_length", "kernel_count"], bins=4)
    short, long_ = "s" * 100, "l" * 5000
    kernel = long_ + "@triton.jit"
    pop = [member(1, 1.0, short), member(2, 2.0, short), member(3, 1.5, long_), member(4, 0.5, kernel)]
    cells = strategy.grid(pop)
    assert {cell: m.id for cell, m in cells.items()} == {(0, 0): 2, (3, 0): 3, (3, 1): 4}


def test_bottleneck_feature_keeps_memory_and_compute_bound_lines_apart() -> None:
    def profiled(cid: int, speedup: float, bottleneck: str | None) -> Member:
        profile = {"status": "ok", "bottleneck": bottleneck} if bottleneck else {}
        cand = Candidate(cid, "run", "t", cid, 0, 1, "mutate", (), "x")
        ev = Evaluation(status=Status.CORRECT, speedup_eager=speedup, details={"profiling": profile})
        return Member(Scored(cand, ev))

    strategy = PikeO(features=["bottleneck"], bins=8)
    pop = [profiled(1, 3.0, "memory-bound"), profiled(2, 1.2, "compute-bound"), profiled(3, 2.0, None)]
    pop.append(profiled(4, 1.0, "memory-bound"))  # slower than #1: not an elite
    assert {cell: m.id for cell, m in strategy.grid(pop).items()} == {(1,): 1, (2,): 2, (0,): 3}
    # The island index folds candidate rows: the bottleneck column reaches the feature there too.
    from evokernel.db.index import light_scored

    assert strategy.cell(light_scored(5, 0, 1, "x", 1.0, "compute-bound")) == (2,)
    assert PikeO(features=["bottleneck"], bins=2).cell(light_scored(6, 0, 1, "x", 1.0, "latency-bound")) == (
        1,
    )


def test_bad_parameters_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="unknown feature"):
        PikeO(features=["colour"])
    with pytest.raises(ConfigError, match="exploration \\+ exploitation"):
        PikeO(exploration_ratio=0.6, exploitation_ratio=0.6)
    with pytest.raises(ConfigError, match="max_migrants"):
        PikeO(max_migrants=0)


def test_islands_migration_every_m_generations_and_migrants_stay(tmp_path: Path) -> None:
    params = {"islands": 3, "batch": 2, "migration_interval": 2, "migration_rate": 0.5, "max_generations": 7}
    lib, run = instant_run(tmp_path, "pike_o", params, evaluations=500)
    with sqlite3.connect(tmp_path / "lib.db") as conn:
        assert conn.execute("select count(*) from islands").fetchone()[0] == 3  # islands are rows
    cands = {sc.candidate.id: sc for sc in lib.candidates(run, "t0")}
    events = lib.island_events(run, "t0")
    # Generation 0 seeds island 0; islands 1 and 2 start from a reseed of the best at generation 1.
    assert [sc.candidate.island for sc in cands.values() if sc.candidate.generation == 0] == [0]
    assert sorted((e.kind, e.generation, e.island) for e in events if e.generation == 1) == [
        ("reseed", 1, 1),
        ("reseed", 1, 2),
    ]
    migrations = [e for e in events if e.kind == "migrate"]
    assert migrations and {e.generation for e in migrations} <= {2, 4, 6}
    for e in migrations:
        assert e.candidate is not None and e.from_island is not None
        assert cands[e.candidate].candidate.island == e.from_island  # only natives migrate
        assert e.island in {(e.from_island - 1) % 3, (e.from_island + 1) % 3} - {e.from_island}  # ring
    # With 3 islands both ring neighbours are the other two: a migrant goes to both.
    for e in migrations:
        both = {m.island for m in migrations if m.candidate == e.candidate and m.generation == e.generation}
        assert both == {0, 1, 2} - {e.from_island}
    for pid, sc in by_proposal(lib, run, "t0").items():
        (proposal,) = [p for p in lib.proposals(run, "t0") if p.id == pid]
        assert sc.candidate.island == proposal.island  # a child lands on its proposal's island
    assert {p.island for p in lib.proposals(run, "t0") if p.generation > 0} == {0, 1, 2}


def test_funsearch_reset_runs_every_interval(tmp_path: Path) -> None:
    params = {"islands": 4, "batch": 2, "reset": "funsearch", "reset_interval": 3, "max_generations": 7}
    lib, run = instant_run(tmp_path, "pike_o", params, evaluations=500)
    resets = [e for e in lib.island_events(run, "t0") if e.kind == "reset"]
    assert sorted({e.generation for e in resets}) == [3, 6]
    assert all(len([r for r in resets if r.generation == g]) == 2 for g in (3, 6))  # the weaker half of 4


def test_failed_candidates_get_fixes_in_the_next_generation_up_to_max_fix_attempts(tmp_path: Path) -> None:
    attempts = 2
    params = {"islands": 2, "batch": 3, "max_generations": 6, "max_fix_attempts": attempts}
    mutator = InstantMutator(incorrect_rate=0.5, fix_rate=0.3)
    lib, run = instant_run(tmp_path, "pike_o", params, mutator=mutator, evaluations=500)
    props = lib.proposals(run, "t0")
    cands = by_proposal(lib, run, "t0")
    by_id = {sc.candidate.id: sc for sc in cands.values()}
    fixes = [p for p in props if p.operator == "fix"]
    assert fixes, "half the children fail: some must be fixed"
    last = max(p.generation for p in props)
    for sc in cands.values():
        depth, node = 0, sc
        while node.candidate.operator == "fix":
            depth += 1
            node = by_id[node.candidate.parents[0]]
        assert depth <= attempts
        children = [p for p in fixes if p.parents == (sc.candidate.id,)]
        failed = sc.evaluation is not None and sc.evaluation.status is not Status.CORRECT
        due = failed and depth < attempts and sc.candidate.generation < last
        assert len(children) == (1 if due else 0)
        for child in children:  # the next generation, the same island, a slot after the batches
            assert child.generation == sc.candidate.generation + 1 and child.island == sc.candidate.island
            assert child.branch >= 2 * 3
    assert lib.get_run(run).status == "finished"
    off_lib, off_run = instant_run(
        tmp_path / "off",
        "pike_o",
        {**params, "max_fix_attempts": 0},
        mutator=InstantMutator(0.5),
        evaluations=60,
    )
    assert not [p for p in off_lib.proposals(off_run, "t0") if p.operator == "fix"]
