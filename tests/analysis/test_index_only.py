"""The index-only analysis queries (migration 0005) give exactly what whole-row reads give, on a real
library written by an engine run and by the dashboard fixture, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from evokernel import analysis
from evokernel.conformance import InstantEvaluator, InstantMutator, instant_config, run_instant
from evokernel.dashboard import api
from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, EvaluationRow
from evokernel.types import LLMCall, Proposal
from tests.analysis import naive
from tests.analysis.test_analysis import TASKS
from tests.dashboard.fixture_library import add, build, correct


@pytest.fixture
def library(library_url: str) -> tuple[SolutionLibrary, str, str]:
    """(library, engine run, fixture run). The fixture run also gets a failed proposal, an LLM
    call without a proposal, in its "softmax" task a re-evaluated candidate, and three sessions."""
    fixture = build(library_url)
    config = instant_config("greedy", None, library_url, TASKS, evaluations=30)
    mutator = InstantMutator(incorrect_rate=0.4, uses_llm=True, cost_usd=0.01)
    # Four evaluations at a time with per-source delays (0-100 ms): first evaluations leave
    # candidate order. 0-4 ms did not always: where recording a candidate took longer than that
    # (PostgreSQL in a loaded full suite on 2 cores), each finished before the next began.
    evaluator = InstantEvaluator(size=4, delay_s=0.05)
    engine_run = run_instant(config, TASKS, mutator=mutator, evaluator=evaluator)
    lib = SolutionLibrary(library_url)
    proposal = lib.add_proposal(fixture.run_id, Proposal(task="relu", operator="mutate", generation=4))
    assert proposal.id is not None
    lib.fail_proposal(proposal.id, "no code block in the reply\nreply was 2 lines", "")
    lib.record_llm_call(fixture.run_id, None, LLMCall(model="fake/brainstorm", cost_usd=0.002, latency_s=0.5))
    softmax = [c.candidate.id for c in lib.candidates(fixture.run_id, "softmax")]
    lib.record_evaluation(softmax[-1], correct(2.5))  # was a timeout: now faster than anything
    # Sessions on the time axis: the first was killed (it ends at its last evaluation), the second
    # interrupted (it ends at that event), the third still runs.
    lib.log_event(fixture.run_id, "resumed", "", {})
    add(lib, fixture.run_id, "relu", "# after the resume\n", correct(2.2), generation=5)
    lib.log_event(fixture.run_id, "interrupted", "", {})
    lib.log_event(fixture.run_id, "resumed", "", {})
    add(lib, fixture.run_id, "relu", "# and later\n", correct(1.1), generation=6, llm=False)
    add(lib, fixture.run_id, "softmax", "# later still\n", correct(0.9), generation=6, llm=False)
    return lib, engine_run, fixture.run_id


def test_index_only_queries_equal_whole_row_reads(library: tuple[SolutionLibrary, str, str]) -> None:
    lib, *runs = library
    totals = naive.run_totals(lib)
    listed = analysis.list_runs(lib)
    assert {r.id for r in listed} == set(runs)
    for row in listed:
        evaluated, best, usd, tasks = totals[row.id]
        assert (row.evaluations, row.best_speedup, row.tasks) == (evaluated, best, tasks)
        assert row.usd == pytest.approx(usd, rel=1e-12)  # summed in another order
        assert analysis.run_overview(lib, row.id).run == row
    for run_id in runs:
        usage, expected = analysis.llm_usage(lib, run_id), naive.llm_usage(lib, run_id)
        assert [
            (u.task, u.model, u.calls, u.failed, u.prompt_tokens, u.completion_tokens) for u in usage
        ] == [(u.task, u.model, u.calls, u.failed, u.prompt_tokens, u.completion_tokens) for u in expected]
        for got, want in zip(usage, expected, strict=True):
            assert got.cost_usd == pytest.approx(want.cost_usd, rel=1e-12)
            assert got.mean_latency_s == pytest.approx(want.mean_latency_s, rel=1e-12)
        assert api.islands(lib, run_id) == naive.islands_json(lib, run_id)
        history = analysis.island_history(lib, run_id)
        assert list(history.generations) == naive.island_generations(lib, run_id)
        for task in lib.run_task_hashes(run_id):
            one = analysis.island_history(lib, run_id, task)
            assert one.generations == tuple(g for g in history.generations if g.task == task)
            assert one.events == tuple(e for e in history.events if e.task == task)
            for x in analysis.AXES:
                steps = analysis.best_steps(lib, run_id, task, x)
                evaluated, points = naive.steps(lib, run_id, task, x)
                assert steps.evaluated == evaluated
                assert [(p.n, p.best, p.best_candidate) for p in steps.points] == [
                    (p.n, p.best, p.best_candidate) for p in points
                ], (run_id, task, x)
                # Dollars are summed per interval between steps, not call by call.
                rel = 1e-12 if x == "usd" else 0
                assert [p.x for p in steps.points] == pytest.approx([p.x for p in points], rel=rel, abs=0)
        assert analysis.failure_counts(lib, run_id) == naive.failure_counts(lib, run_id)


def test_the_queries_see_what_they_must(library: tuple[SolutionLibrary, str, str]) -> None:
    # Guards the comparison above: the library holds each case the fast paths must get right.
    lib, engine_run, fixture_run = library
    steps = analysis.best_steps(lib, engine_run, "alpha")
    assert steps.evaluated == 30 and len(steps.points) >= 3  # first, a record, last at least
    c, e = CandidateRow, EvaluationRow
    evaluated = lib.read(
        lambda s: list(
            s.scalars(
                select(e.candidate_id)
                .join(c, c.id == e.candidate_id)
                .where(c.run_id == engine_run)
                .order_by(e.id)
            )
        )
    )
    assert evaluated != sorted(evaluated)  # first evaluations out of candidate order
    failures = analysis.failure_counts(lib, fixture_run)
    assert ("mutation", "no code block in the reply") in {(f.stage, f.reason) for f in failures}
    assert "timeout" not in {f.status for f in failures}  # re-evaluated: its latest verdict counts
    # The curve follows first verdicts: the re-evaluation's 2.5 x is not a step (the candidate's
    # latest verdict, which the overview shows, is).
    assert analysis.best_steps(lib, fixture_run, "softmax").points[-1].best == pytest.approx(1.0)
    assert analysis.run_overview(lib, fixture_run).tasks[1].speedup_eager == pytest.approx(2.5)
    assert "" in {u.task for u in analysis.llm_usage(lib, fixture_run)}
