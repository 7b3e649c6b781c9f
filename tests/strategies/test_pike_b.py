"""PIKE-B's phase and branch structure, on the real engine and library with instant parts."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from evokernel.conformance import InstantMutator, instant_config, instant_task, run_instant
from evokernel.conformance.instant import INCORRECT_MARK, SEED_SOURCE
from evokernel.db import SolutionLibrary
from evokernel.mutators.base import MutationRequest, MutationResult
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


def test_llm_seeds_of_phase_0_start_from_ideas_one_per_branch(tmp_path: Path) -> None:
    task = dataclasses.replace(instant_task("t0"), seed_source=None)  # no seed file: LLM seeds
    config = instant_config(
        "pike_b", {"branches": 3, "max_phases": 1}, tmp_path / "lib.db", [task], evaluations=20
    )
    run = run_instant(config, [task], mutator=InstantMutator(incorrect_rate=0.0))
    props = SolutionLibrary(tmp_path / "lib.db").proposals(run, "t0")
    ideas = generation(props, 0, "ideas")
    assert len(ideas) == 1 and ideas[0].count == 3 and ideas[0].parents == () and ideas[0].state == "done"
    seeds = generation(props, 0, "seed")
    assert [p.branch for p in seeds] == [0, 1, 2]
    assert [p.idea for p in seeds] == list(ideas[0].ideas)
    assert props.index(ideas[0]) < props.index(seeds[0])  # the seeds wait for the ideas
    # With ideas off, phase 0 is plain seeds, as before.
    config = instant_config(
        "pike_b", {"branches": 3, "max_phases": 0, "ideas": False}, tmp_path / "off.db", [task], evaluations=3
    )
    run = run_instant(config, [task], mutator=InstantMutator(incorrect_rate=0.0))
    plain = SolutionLibrary(tmp_path / "off.db").proposals(run, "t0")
    assert [p.operator for p in plain] == ["seed"] * 3 and all(p.idea is None for p in plain)


def test_requests_carry_the_best_kernels_of_related_tasks_never_their_own(tmp_path: Path) -> None:
    class Remembering(InstantMutator):
        exemplar_count = 2

        def __init__(self) -> None:
            super().__init__(incorrect_rate=0.0)
            self.seen: list[tuple[str, tuple[str, ...]]] = []

        async def mutate(self, request: MutationRequest) -> MutationResult:
            self.seen.append((request.task.name, tuple(e.task for e in request.exemplars)))
            return await super().mutate(request)

    mutator = Remembering()
    instant_run(tmp_path, "pike_b", {"branches": 2, "max_phases": 3}, tasks=2, mutator=mutator, evaluations=7)
    shown = [(task, others) for task, others in mutator.seen if others]
    assert shown, "after the first phase each task has the other's best kernel to show"
    assert all(task not in others and len(others) == 1 for task, others in shown)


def test_a_source_that_failed_twice_in_a_phase_is_fixed_once(tmp_path: Path) -> None:
    class Twins(InstantMutator):
        async def mutate(self, request: MutationRequest) -> MutationResult:
            if request.proposal.operator == "mutate":  # every branch writes the same broken file
                await asyncio.sleep(0.05)  # all three in flight at once: none sees another's
                return MutationResult(f"{SEED_SOURCE}# same\n{INCORRECT_MARK}\n")
            return await super().mutate(request)

    params = {"branches": 3, "max_phases": 1, "fix_rounds": 1, "ideas": False}
    lib, run = instant_run(tmp_path, "pike_b", params, mutator=Twins(fix_rate=1.0), evaluations=20)
    props = lib.proposals(run, "t0")
    copies = [sc for sc in lib.candidates(run, "t0") if sc.candidate.operator == "mutate"]
    assert len(copies) == 3 and len({sc.candidate.source_hash for sc in copies}) == 1
    assert len(generation(props, 1, "mutate")) == 3
    assert len(generation(props, 1, "fix")) == 1
