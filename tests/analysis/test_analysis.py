"""The analysis queries on a real SQLite library filled by a real (instant) engine run."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import pytest

from evokernel import analysis
from evokernel.config.loading import to_dict
from evokernel.conformance import InstantMutator, instant_config, instant_task, run_instant
from evokernel.db import SolutionLibrary
from evokernel.exceptions import AnalysisError, RunNotFoundError
from evokernel.types import Status

TASKS = [instant_task("alpha"), instant_task("beta")]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    path = tmp_path_factory.mktemp("analysis") / "lib.db"
    config = instant_config("greedy", None, path, TASKS, evaluations=12)
    mutator = InstantMutator(incorrect_rate=0.4, uses_llm=True, cost_usd=0.01)
    run_id = run_instant(config, TASKS, mutator=mutator)
    return str(path), run_id


def test_list_runs_counts_what_the_library_holds(filled: tuple[str, str]) -> None:
    path, run_id = filled
    lib = SolutionLibrary(path)
    (row,) = analysis.list_runs(lib)
    assert row.id == run_id and row.sweep_id is None and row.status == "finished"
    assert row.tasks == 2 and row.budget == 24
    assert row.evaluations == sum(lib.count_evaluated(run_id, t.name) for t in TASKS) == 24
    assert row.usd == pytest.approx(lib.llm_usage(run_id)["cost_usd"])
    assert row.best_speedup == max(lib.top(run_id, t.name, 1)[0].speedup for t in TASKS)
    assert analysis.resolve_target(lib) == ("run", run_id)
    with pytest.raises(RunNotFoundError):
        analysis.resolve_target(lib, "nope")


def test_run_overview_fast_p_and_geomean(filled: tuple[str, str]) -> None:
    path, run_id = filled
    lib = SolutionLibrary(path)
    view = analysis.run_overview(lib, run_id)
    bests = {t.name: lib.top(run_id, t.name, 1)[0] for t in TASKS}
    assert [t.task for t in view.tasks] == ["alpha", "beta"]
    for t in view.tasks:
        assert t.best_candidate == bests[t.task].candidate.id
        assert t.speedup_eager == pytest.approx(bests[t.task].speedup)
        assert t.profile == "strict" and t.evaluations == 12
        assert t.correct == len(lib.candidates(run_id, t.task, status=Status.CORRECT))
    expected = math.exp(sum(math.log(b.speedup) for b in bests.values()) / 2)
    assert view.geomean == pytest.approx(expected)
    shares = dict(view.fast_p)
    assert shares[0.0] == 1.0  # both tasks have a correct kernel
    low, high = sorted(b.speedup for b in bests.values())
    assert shares[low] == 0.5 and shares[high] == 0.0  # strictly faster than p
    assert [s for _p, s in view.fast_p] == sorted((s for _p, s in view.fast_p), reverse=True)


def test_best_so_far_is_a_running_maximum(filled: tuple[str, str]) -> None:
    path, run_id = filled
    lib = SolutionLibrary(path)
    for axis in analysis.AXES:
        points = analysis.best_so_far(lib, run_id, "alpha", x=axis)
        assert len(points) == 12
        xs = [p.x for p in points]
        assert xs == sorted(xs)
        bests = [p.best for p in points if p.best is not None]
        assert bests == sorted(bests)
        assert points[-1].best == pytest.approx(lib.top(run_id, "alpha", 1)[0].speedup)
    usd = analysis.best_so_far(lib, run_id, "alpha", x="usd")
    assert usd[-1].x <= lib.llm_usage(run_id)["cost_usd"] + 1e-9 and usd[-1].x > 0
    with pytest.raises(AnalysisError, match="x must be one of"):
        analysis.best_so_far(lib, run_id, "alpha", x="gpu_hours")


def test_failures_lineage_detail_and_usage(filled: tuple[str, str]) -> None:
    path, run_id = filled
    lib = SolutionLibrary(path)
    failures = analysis.failure_counts(lib, run_id)
    incorrect = sum(len(lib.candidates(run_id, t.name, status=Status.INCORRECT)) for t in TASKS)
    assert incorrect > 0
    assert sum(f.count for f in failures if f.status == "incorrect") == incorrect
    assert {(f.stage, f.reason) for f in failures} == {("correctness", "marked incorrect")}

    nodes = analysis.lineage(lib, run_id, "alpha")
    assert len(nodes) == len(lib.candidates(run_id, "alpha"))
    best = lib.top(run_id, "alpha", 1)[0].candidate
    chain = analysis.ancestry(nodes, best.id)
    assert chain[-1].candidate == best.id and chain[0].parents == ()
    assert all(b.parents[0] == a.candidate for a, b in itertools.pairwise(chain))

    detail = analysis.candidate_detail(lib, best.id)
    assert detail.source == best.source and detail.task == "alpha"
    assert set(detail.parent_sources) == set(best.parents)
    assert detail.evaluations[-1].speedup_eager == pytest.approx(lib.top(run_id, "alpha", 1)[0].speedup)
    if best.operator != "seed_file":
        assert detail.node.model == "instant" and len(detail.llm_calls) == 1

    usage = analysis.llm_usage(lib, run_id)
    total = lib.llm_usage(run_id)
    assert sum(u.calls for u in usage) == total["calls"]
    assert sum(u.cost_usd for u in usage) == pytest.approx(total["cost_usd"])
    assert {u.task for u in usage} <= {"alpha", "beta"}

    history = analysis.island_history(lib, run_id)
    assert sum(g.candidates for g in history.generations) == len(lib.candidates(run_id, "alpha")) + len(
        lib.candidates(run_id, "beta")
    )


def test_sweep_grouping_over_seeds(tmp_path: Path) -> None:
    path = tmp_path / "sweep.db"
    for cell, (strategy, seed) in enumerate([(s, k) for s in ("greedy", "random") for k in (0, 1)]):
        config = instant_config(strategy, None, path, TASKS[:1], evaluations=4)
        config.seed = seed
        stored = to_dict(config)
        stored["sweep"] = {"id": "sw1", "cell": cell, "point": {"strategy.name": strategy, "seed": seed}}
        lib = SolutionLibrary(path)
        run_id = lib.create_run("cell", stored, seed)
        lib.register_task(run_id, TASKS[0], 0)
        lib.close()
        run_instant(dataclasses.replace(config), TASKS[:1], resume=run_id)
    lib = SolutionLibrary(path)
    (sweep,) = analysis.list_sweeps(lib)
    assert sweep.id == "sw1" and len(sweep.cells) == 4 and sweep.status == "finished"
    assert analysis.resolve_target(lib) == ("sweep", "sw1")
    table = analysis.sweep_table(lib, "sw1")
    assert table.columns == ("strategy.name",)
    assert [g.point for g in table.groups] == [{"strategy.name": "greedy"}, {"strategy.name": "random"}]
    for group in table.groups:
        assert group.seeds == (0, 1) and group.evaluations.mean == 4.0 and group.evaluations.n == 2
        views = [table.overviews[r] for r in group.runs]
        values = [v.tasks[0].speedup_eager for v in views]
        assert group.best["alpha"].mean == pytest.approx(sum(values) / 2)  # type: ignore[arg-type]


def test_every_query_runs_on_both_backends(library_url: str) -> None:
    config = instant_config("greedy", None, library_url, TASKS[:1], evaluations=6)
    run_id = run_instant(config, TASKS[:1], mutator=InstantMutator(incorrect_rate=0.5, uses_llm=True))
    lib = SolutionLibrary(library_url)
    view = analysis.run_overview(lib, run_id)
    assert view.tasks[0].evaluations == 6
    assert view.tasks[0].correct == len(lib.candidates(run_id, "alpha", status=Status.CORRECT))
    assert len(analysis.best_so_far(lib, run_id, "alpha", x="wall_s")) == 6
    assert sum(f.count for f in analysis.failure_counts(lib, run_id)) == 6 - view.tasks[0].correct
    assert sum(u.calls for u in analysis.llm_usage(lib, run_id)) == lib.llm_usage(run_id)["calls"]
    assert sum(g.correct for g in analysis.island_history(lib, run_id).generations) == view.tasks[0].correct
    assert len(analysis.lineage(lib, run_id, "alpha")) == 6
