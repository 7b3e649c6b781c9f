"""The baselines: greedy always climbs from the single best so far; random ignores fitness."""

from __future__ import annotations

from pathlib import Path

from evokernel.conformance import InstantMutator
from tests.strategies.helpers import instant_run


def test_greedy_mutates_the_best_of_earlier_generations(tmp_path: Path) -> None:
    lib, run = instant_run(
        tmp_path, "greedy", {"batch": 3}, mutator=InstantMutator(incorrect_rate=0.3), evaluations=19
    )
    cands = lib.candidates(run, "t0")
    for gen in range(1, max(sc.candidate.generation for sc in cands) + 1):
        earlier = [sc for sc in cands if sc.candidate.generation < gen and sc.evaluation and sc.evaluation.ok]
        best = max(earlier, key=lambda sc: (sc.speedup, -sc.candidate.id)).candidate.id
        children = [sc for sc in cands if sc.candidate.generation == gen]
        assert children and {sc.candidate.parents for sc in children} == {(best,)}
        assert [sc.candidate.branch for sc in children] == list(range(len(children)))


def test_random_search_samples_from_the_seed_generation_only(tmp_path: Path) -> None:
    lib, run = instant_run(tmp_path, "random", {"batch": 4}, evaluations=17)
    cands = lib.candidates(run, "t0")
    seed = [sc.candidate.id for sc in cands if sc.candidate.generation == 0]
    assert len(seed) == 1 and all(sc.candidate.parents == (seed[0],) for sc in cands[1:])
    assert len({sc.candidate.source_hash for sc in cands}) == 17  # independent samples


def test_random_walk_draws_parents_regardless_of_fitness(tmp_path: Path) -> None:
    lib, run = instant_run(tmp_path, "random", {"batch": 4, "from_seed": False}, evaluations=41)
    cands = {sc.candidate.id: sc for sc in lib.candidates(run, "t0")}
    ranks = []
    for sc in cands.values():
        if sc.candidate.generation < 2:
            continue
        earlier = sorted(
            (c for c in cands.values() if c.candidate.generation < sc.candidate.generation and c.speedup),
            key=lambda c: -c.speedup,
        )
        ranks.append([c.candidate.id for c in earlier].index(sc.candidate.parents[0]) / len(earlier))
    # No selection pressure: parents sit all over the ranking, not at its top.
    assert max(ranks) > 0.5 and sum(ranks) / len(ranks) > 0.25
