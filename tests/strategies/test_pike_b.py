"""PIKE-B's phase and branch structure, on the real engine and library with instant parts."""

from __future__ import annotations

from pathlib import Path

from evokernel.conformance import InstantMutator
from evokernel.types import Status
from tests.strategies.helpers import by_proposal, generation, instant_run

BRANCHES, TOP_K, FIX_ROUNDS, PHASES = 5, 2, 2, 3


def test_phases_branches_ideas_and_fix_rounds(tmp_path: Path) -> None:
    params = {"branches": BRANCHES, "top_k": TOP_K, "fix_rounds": FIX_ROUNDS, "max_phases": PHASES}
    mutator = InstantMutator(incorrect_rate=0.4, fix_rate=0.3)
    lib, run = instant_run(tmp_path, "pike_b", params, mutator=mutator, evaluations=500)
    props = lib.proposals(run, "t0")
    cands = by_proposal(lib, run, "t0")
    by_id = {sc.candidate.id: sc for sc in cands.values()}
    assert max(p.generation for p in props) == PHASES  # at most P phases after the seed phase
    assert [p.operator for p in generation(props, 0)] == ["seed_file"]
    fixes_seen = 0
    for phase in range(1, PHASES + 1):
        ideas = generation(props, phase, "ideas")
        assert len(ideas) == 1 and ideas[0].count == BRANCHES and ideas[0].state == "done"
        roots = generation(props, phase, "mutate")
        assert [p.branch for p in roots] == list(range(BRANCHES))
        assert [p.idea for p in roots] == list(ideas[0].ideas)  # branch b gets idea b
        assert all(len(p.parents) == 1 for p in roots)  # mutation only, one parent
        # Parents: the best correct candidate of each branch of the previous phase only, top k,
        # spread over the branches in contiguous bins.
        previous = [sc for sc in cands.values() if sc.candidate.generation == phase - 1]
        best: dict[int, tuple[float, int]] = {}
        for sc in previous:
            if sc.evaluation is not None and sc.evaluation.ok:
                key = (sc.speedup, -sc.candidate.id)
                best[sc.candidate.branch] = max(best.get(sc.candidate.branch, key), key)
        elites = [-cid for _s, cid in sorted(best.values(), reverse=True)][:TOP_K]
        assert elites, "instant parts with fix_rate 0.3 leave a correct candidate per phase"
        assert [p.parents[0] for p in roots] == [elites[b * len(elites) // BRANCHES] for b in range(BRANCHES)]
        # Fixes: every failed candidate of the phase is fixed once per round, on its branch, as its
        # child, until the lineage has used its rounds.
        for sc in (sc for sc in cands.values() if sc.candidate.generation == phase):
            depth, node = 0, sc
            while node.candidate.operator == "fix":
                depth += 1
                node = by_id[node.candidate.parents[0]]
            assert depth <= FIX_ROUNDS
            children = [p for p in generation(props, phase, "fix") if p.parents == (sc.candidate.id,)]
            failed = sc.evaluation is not None and sc.evaluation.status is not Status.CORRECT
            assert len(children) == (1 if failed and depth < FIX_ROUNDS else 0)
            assert all(c.branch == sc.candidate.branch for c in children)
            fixes_seen += len(children)
    assert fixes_seen > 0
    assert lib.get_run(run).status == "finished"


def test_without_ideas_or_fix_the_tune_quickstart_shape_remains(tmp_path: Path) -> None:
    # What the quickstart runs: no LLM, so no ideas and no fix operator; phases of branches only.
    class TuneOnly(InstantMutator):
        operators = ("tune",)
        can_brainstorm = False  # like the tune mutator

    mutator = TuneOnly(incorrect_rate=0.0)
    lib, run = instant_run(tmp_path, "pike_b", {"branches": 4, "top_k": 2}, mutator=mutator, evaluations=13)
    cands = lib.candidates(run, "t0")
    assert [sc.candidate.generation for sc in cands] == [0] + [1] * 4 + [2] * 4 + [3] * 4
    assert {sc.candidate.operator for sc in cands[1:]} == {"tune"}
