"""Behaviour of ``SolutionLibrary`` through its public API, on a SQLite file and on PostgreSQL:
proposals, candidates and evaluations.

Every test gets an empty library (``library_url``: a fresh SQLite file or a fresh PostgreSQL
database), so no test sees another's rows.
"""

from __future__ import annotations

from typing import Any

import pytest

from evokernel.db import SolutionLibrary
from evokernel.exceptions import LibraryError
from evokernel.types import Evaluation, LLMCall, Proposal, Status
from tests.db.helpers import correct, make_task, new_candidate


# ---- proposals ---------------------------------------------------------------------------------------
def test_proposal_seq_is_consecutive_per_run_and_task(lib: SolutionLibrary, run_id: str) -> None:
    lib.register_task(run_id, make_task("gelu"), position=1)
    other_run = lib.create_run("other", {})
    lib.register_task(other_run, make_task())

    relu = [lib.add_proposal(run_id, Proposal(task="relu", operator="seed")) for _ in range(4)]
    gelu = [lib.add_proposal(run_id, Proposal(task="gelu", operator="seed")) for _ in range(2)]
    other = lib.add_proposal(other_run, Proposal(task="relu", operator="seed"))

    assert [p.seq for p in relu] == [0, 1, 2, 3]
    assert [p.seq for p in gelu] == [0, 1]
    assert other.seq == 0
    ids = [p.id for p in [*relu, *gelu, other]]
    assert None not in ids and len(set(ids)) == len(ids)


def test_proposal_round_trip_and_open_failed_counts(lib: SolutionLibrary, run_id: str) -> None:
    p0 = lib.add_proposal(
        run_id,
        Proposal(task="relu", operator="crossover", island=2, generation=5, parents=(11, 4), idea="fuse"),
    )
    assert (p0.task, p0.operator, p0.island, p0.generation, p0.parents, p0.idea, p0.seq) == (
        "relu", "crossover", 2, 5, (11, 4), "fuse", 0,
    )  # fmt: skip
    p1 = lib.add_proposal(run_id, Proposal(task="relu", operator="mutate"))
    p2 = lib.add_proposal(run_id, Proposal(task="relu", operator="mutate"))
    assert lib.open_proposals(run_id, "relu") == [p0, p1, p2]

    assert p1.id is not None
    lib.fail_proposal(p1.id, "no code block in reply", raw_reply="I cannot do that")
    lib.add_candidate(run_id, p2, "class ModelNew: pass\n")
    assert lib.open_proposals(run_id, "relu") == [p0]
    assert lib.count_proposals(run_id, "relu") == 3
    assert lib.count_proposals(run_id, "relu", state="open") == 1
    assert lib.count_proposals(run_id, "relu", state="failed") == 1
    assert lib.count_proposals(run_id, "relu", state="done") == 1


def test_trailing_failed_proposals(lib: SolutionLibrary, run_id: str) -> None:
    assert lib.trailing_failed_proposals(run_id, "relu") == 0
    done = lib.add_proposal(run_id, Proposal(task="relu", operator="seed"))
    lib.add_candidate(run_id, done, "a")
    failed = [lib.add_proposal(run_id, Proposal(task="relu", operator="mutate")) for _ in range(3)]
    still_open = lib.add_proposal(run_id, Proposal(task="relu", operator="mutate"))
    for p in failed:
        assert p.id is not None
        lib.fail_proposal(p.id, "bad reply")
    # Open proposals neither count nor break the streak: their outcome is not known yet.
    assert lib.trailing_failed_proposals(run_id, "relu") == 3
    lib.add_candidate(run_id, still_open, "b")
    assert lib.trailing_failed_proposals(run_id, "relu") == 0


# ---- candidates and evaluations --------------------------------------------------------------------
def test_add_candidate_closes_proposal_and_records_lineage_in_order(
    lib: SolutionLibrary, run_id: str
) -> None:
    a = new_candidate(lib, run_id, "a")
    b = new_candidate(lib, run_id, "b")
    c = new_candidate(lib, run_id, "c")
    # Parent order matters (first parent = the one the prompt is built around), so it is kept as given,
    # not sorted by id.
    proposal = lib.add_proposal(
        run_id, Proposal(task="relu", operator="crossover", island=1, generation=2, parents=(c, a, b))
    )
    child = lib.add_candidate(run_id, proposal, "child source")
    assert child.parents == (c, a, b)
    assert (child.run_id, child.task, child.proposal_id, child.island, child.generation, child.operator) == (
        run_id, "relu", proposal.id, 1, 2, "crossover",
    )  # fmt: skip
    assert child.source == "child source"
    assert lib.open_proposals(run_id, "relu") == []

    fetched = lib.get_candidate(child.id)
    assert fetched.candidate == child
    assert fetched.evaluation is None
    assert lib.get_candidate(a).candidate.parents == ()


def test_add_candidate_is_atomic(lib: SolutionLibrary, run_id: str) -> None:
    # A parent that does not exist violates the lineage foreign key: the whole write must roll back,
    # leaving the proposal open (so resume re-runs it) and no candidate behind.
    proposal = lib.add_proposal(run_id, Proposal(task="relu", operator="mutate", parents=(999_999,)))
    with pytest.raises(LibraryError):
        lib.add_candidate(run_id, proposal, "orphan")
    assert lib.open_proposals(run_id, "relu") == [proposal]
    assert lib.candidates(run_id, "relu") == []

    # One candidate per proposal: a second one for the same proposal is refused.
    ok = lib.add_proposal(run_id, Proposal(task="relu", operator="mutate"))
    lib.add_candidate(run_id, ok, "first")
    with pytest.raises(LibraryError):
        lib.add_candidate(run_id, ok, "second")
    assert [sc.candidate.source for sc in lib.candidates(run_id, "relu")] == ["first"]


def test_record_evaluation_updates_status_and_speedup(lib: SolutionLibrary, run_id: str) -> None:
    cid = new_candidate(lib, run_id, "k")
    assert lib.get_candidate(cid).speedup == 0.0
    assert [c.id for c in lib.pending_candidates(run_id, "relu")] == [cid]

    wrong = Evaluation(
        status=Status.INCORRECT, reason="max abs error 3.1 > 1e-4", stage="correctness", speedup_eager=9.0
    )
    lib.record_evaluation(cid, wrong)
    scored = lib.get_candidate(cid)
    assert scored.evaluation == wrong
    # An incorrect kernel is never fast, whatever its timing said.
    assert scored.speedup == 0.0
    assert lib.top(run_id, "relu", 5) == []

    # Re-evaluation (e.g. on another device): the latest evaluation wins.
    good = correct(
        2.5,
        device="NVIDIA H100",
        runtime_iqr_ms=0.01,
        runtime_cv=0.02,
        compile_ms=1.5,
        speedup_compile=1.5,
        feedback="fine",
        duration_s=3.2,
        details={"variants": [{"n": 8, "max_abs_error": 1e-6}], "checks": ["no_torch_fallback"]},
        profile="kernelbench-v0",
    )
    lib.record_evaluation(cid, good)
    scored = lib.get_candidate(cid)
    assert scored.evaluation == good  # the verdict profile included
    assert scored.evaluation is not None and scored.evaluation.profile == "kernelbench-v0"
    assert scored.speedup == 2.5
    assert lib.pending_candidates(run_id, "relu") == []
    assert [sc.candidate.id for sc in lib.top(run_id, "relu", 5)] == [cid]


def test_candidates_filters(lib: SolutionLibrary, run_id: str) -> None:
    a = new_candidate(lib, run_id, "a", island=0, generation=0)
    b = new_candidate(lib, run_id, "b", island=1, generation=1, parents=(a,))
    c = new_candidate(lib, run_id, "c", island=1, generation=2, parents=(b,))
    d = new_candidate(lib, run_id, "d", island=0, generation=1, parents=(a,))
    lib.record_evaluation(a, correct(1.0))
    lib.record_evaluation(b, Evaluation(status=Status.COMPILE_ERROR, reason="syntax error"))
    lib.record_evaluation(c, correct(1.2))

    def ids(**kw: Any) -> list[int]:
        return [sc.candidate.id for sc in lib.candidates(run_id, "relu", **kw)]

    assert ids() == [a, b, c, d]  # oldest first
    assert ids(island=1) == [b, c]
    assert ids(status=Status.CORRECT) == [a, c]
    assert ids(status=Status.PENDING) == [d]
    assert ids(generation=1) == [b, d]
    assert ids(island=0, generation=1) == [d]
    assert ids(island=7) == []
    by_id = {sc.candidate.id: sc for sc in lib.candidates(run_id, "relu")}
    assert by_id[c].candidate.parents == (b,)
    assert by_id[b].evaluation is not None and by_id[b].evaluation.status is Status.COMPILE_ERROR


def test_top_orders_by_speedup_and_keeps_only_correct(lib: SolutionLibrary, run_id: str) -> None:
    slow = new_candidate(lib, run_id, "slow", island=0)
    fast = new_candidate(lib, run_id, "fast", island=1)
    tie_old = new_candidate(lib, run_id, "tie old", island=0)
    tie_new = new_candidate(lib, run_id, "tie new", island=1)
    broken = new_candidate(lib, run_id, "broken", island=0)
    unknown = new_candidate(lib, run_id, "no baseline", island=0)
    new_candidate(lib, run_id, "pending", island=0)
    lib.record_evaluation(slow, correct(0.5))
    lib.record_evaluation(fast, correct(4.0))
    lib.record_evaluation(tie_new, correct(2.0))
    lib.record_evaluation(tie_old, correct(2.0))
    lib.record_evaluation(
        broken, Evaluation(status=Status.RUNTIME_ERROR, reason="illegal address", speedup_eager=99)
    )
    # Correct but without a speedup (no eager baseline): ranks below every measured speedup on both
    # backends (PostgreSQL sorts NULL first in DESC unless told otherwise).
    lib.record_evaluation(unknown, correct(None))

    top = lib.top(run_id, "relu", 10)
    assert [sc.candidate.id for sc in top] == [fast, tie_old, tie_new, slow, unknown]
    assert [sc.speedup for sc in top] == [4.0, 2.0, 2.0, 0.5, 0.0]
    assert [sc.candidate.id for sc in lib.top(run_id, "relu", 2)] == [fast, tie_old]
    assert [sc.candidate.id for sc in lib.top(run_id, "relu", 3, island=0)] == [tie_old, slow, unknown]
    assert lib.top(run_id, "relu", 0) == []


def test_count_evaluated(lib: SolutionLibrary, run_id: str) -> None:
    lib.register_task(run_id, make_task("gelu"), position=1)
    other = lib.create_run("other", {})
    lib.register_task(other, make_task())
    a = new_candidate(lib, run_id, "a")
    b = new_candidate(lib, run_id, "b")
    new_candidate(lib, run_id, "pending")
    g = new_candidate(lib, run_id, "g", task="gelu")
    o = new_candidate(lib, other, "o")
    lib.record_evaluation(a, correct(1.0))
    lib.record_evaluation(a, correct(1.1))  # evaluated twice, counts once
    lib.record_evaluation(b, Evaluation(status=Status.TIMEOUT, reason="> 60 s"))
    lib.record_evaluation(g, Evaluation(status=Status.REJECTED, reason="calls torch.matmul"))
    lib.record_evaluation(o, correct(1.0))

    assert lib.count_evaluated(run_id) == 3
    assert lib.count_evaluated(run_id, "relu") == 2
    assert lib.count_evaluated(run_id, "gelu") == 1
    assert lib.count_evaluated(other) == 1


# ---- additions of migration 0002: branches, ideas, island events, generation reads ---------------


def test_add_proposals_records_a_batch_in_order_with_branches(lib: SolutionLibrary, run_id: str) -> None:
    batch = [Proposal("relu", "mutate", generation=1, branch=b, idea=f"idea {b}") for b in range(3)]
    recorded = lib.add_proposals(run_id, batch)
    assert [p.seq for p in recorded] == [0, 1, 2]
    assert [(p.branch, p.idea, p.state) for p in lib.proposals(run_id, "relu", generation=1)] == [
        (0, "idea 0", "open"),
        (1, "idea 1", "open"),
        (2, "idea 2", "open"),
    ]
    with pytest.raises(LibraryError, match="one task at a time"):
        lib.add_proposals(run_id, [Proposal("relu", "mutate"), Proposal("other", "mutate")])


def test_ideas_proposals_close_with_their_ideas_and_are_not_mutation_failures(
    lib: SolutionLibrary, run_id: str
) -> None:
    ideas = lib.add_proposal(run_id, Proposal("relu", "ideas", generation=1, count=4))
    assert ideas.count == 4
    lib.finish_ideas(ideas.id or 0, ("tile", "fuse"), raw_reply="1. tile\n2. fuse")
    (done,) = lib.proposals(run_id, "relu", operator="ideas")
    assert done.state == "done" and done.ideas == ("tile", "fuse")
    failed = lib.add_proposal(run_id, Proposal("relu", "mutate", generation=1))
    lib.fail_proposal(failed.id or 0, "no code")
    again = lib.add_proposal(run_id, Proposal("relu", "ideas", generation=2))
    lib.fail_proposal(again.id or 0, "no ideas")
    assert lib.trailing_failed_proposals(run_id, "relu") == 1  # the failed ideas call is not counted


def test_candidates_and_top_before_a_generation(lib: SolutionLibrary, run_id: str) -> None:
    ids = [new_candidate(lib, run_id, f"g{g}", generation=g) for g in range(4)]
    for cid, speedup in zip(ids, (1.0, 3.0, None, 5.0), strict=True):
        lib.record_evaluation(cid, correct(speedup))
    assert [sc.candidate.id for sc in lib.candidates(run_id, "relu", before=2)] == ids[:2]
    # Unmeasured correct candidates rank after every measured one, on both backends.
    assert [sc.candidate.id for sc in lib.top(run_id, "relu", 4)] == [ids[3], ids[1], ids[0], ids[2]]
    assert [sc.candidate.id for sc in lib.top(run_id, "relu", 4, before=3)] == [ids[1], ids[0], ids[2]]
    hashes = lib.source_hashes(run_id, "relu")
    assert sorted(g for g, _seq in hashes.values()) == [0, 1, 2, 3]


def test_candidate_branch_comes_from_its_proposal(lib: SolutionLibrary, run_id: str) -> None:
    proposal = lib.add_proposal(run_id, Proposal("relu", "fix", generation=2, branch=7))
    cand = lib.add_candidate(run_id, proposal, "src")
    assert cand.branch == 7 and lib.get_candidate(cand.id).candidate.branch == 7


def test_island_events_round_trip_in_order(lib: SolutionLibrary, run_id: str) -> None:
    from evokernel.types import IslandEvent

    a = new_candidate(lib, run_id, "a", island=0)
    events = [
        IslandEvent("migrate", 5, 1, a, 0),
        IslandEvent("reset", 5, 2),
        IslandEvent("reseed", 5, 2, a, 0),
    ]
    lib.record_island_events(run_id, "relu", events)
    assert lib.island_events(run_id, "relu") == events


def test_max_proposal_cost_sums_the_calls_of_each_proposal(lib: SolutionLibrary, run_id: str) -> None:
    assert lib.max_proposal_cost(run_id) == 0.0
    one, two = (lib.add_proposal(run_id, Proposal("relu", "mutate")) for _ in range(2))
    for pid, cost in ((one.id, 0.25), (one.id, 0.5), (two.id, 0.5)):
        lib.record_llm_call(run_id, pid, LLMCall(model="m", cost_usd=cost))
    assert lib.max_proposal_cost(run_id) == pytest.approx(0.75)


def test_summaries_are_light_and_ordered(lib: SolutionLibrary, run_id: str) -> None:
    ids = [new_candidate(lib, run_id, f"s{g}", generation=g, island=g % 2) for g in range(3)]
    lib.record_evaluation(ids[0], correct(2.0))
    lib.record_evaluation(ids[1], Evaluation(status=Status.INCORRECT, reason="off by one"))
    got = lib.summaries(run_id, "relu")
    assert [sc.candidate.id for sc in got] == ids and [sc.candidate.island for sc in got] == [0, 1, 0]
    assert (
        got[0].speedup == 2.0 and got[1].evaluation is not None and got[1].evaluation.reason == "off by one"
    )
    assert got[2].evaluation is None  # pending
    assert [sc.candidate.id for sc in lib.summaries(run_id, "relu", before=1)] == ids[:1]
