"""The dashboard's own queries (tree window, pool activity, change token) on the dashboard's
fixture library, plus a generated lineage larger than the window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evokernel.analysis.changes import library_version
from evokernel.analysis.pool_activity import pool_activity
from evokernel.analysis.tree_window import tree_window
from evokernel.db import SolutionLibrary
from evokernel.exceptions import AnalysisError
from evokernel.types import Proposal, Task
from tests.dashboard.fixture_library import REFERENCE, add, build, correct


@pytest.fixture
def lib(tmp_path: Path) -> Iterator[SolutionLibrary]:
    build(str(tmp_path / "lib.db"))
    library = SolutionLibrary(tmp_path / "lib.db")
    yield library
    library.close()


def test_small_tree_is_whole_with_ordered_parents(lib: SolutionLibrary) -> None:
    run_id = lib.list_runs()[0].id
    window = tree_window(lib, run_id, "relu")
    assert not window.truncated and window.total == len(window.nodes) == 7 and window.hidden_parents == 0
    by_id = {n.id: n for n in window.nodes}
    crossover = next(n for n in window.nodes if n.operator == "crossover")
    assert len(crossover.parents) == 2 and all(p in by_id for p in crossover.parents)
    assert {n.status for n in window.nodes} == {"correct", "compile_error", "incorrect", "rejected"}
    with pytest.raises(AnalysisError):
        tree_window(lib, run_id, "no-such-task")


def test_large_tree_keeps_the_best_lineage_and_the_newest(tmp_path: Path) -> None:
    lib = SolutionLibrary(tmp_path / "chain.db")
    run_id = lib.create_run("chain", {})
    lib.register_task(run_id, Task(name="t", path="/t.py", source=REFERENCE))
    # A chain of 60 ancestors ending in the best kernel, then 100 newer slow descendants of the seed.
    parent: tuple[int, ...] = ()
    chain = []
    for g in range(60):
        chain.append(
            add(lib, run_id, "t", f"# {g}\n", correct(1.0 + g / 10), parents=parent, generation=g, llm=False)
        )
        parent = (chain[-1],)
    newest = [
        add(lib, run_id, "t", f"# new {i}\n", correct(0.5), parents=(chain[0],), generation=100, llm=False)
        for i in range(100)
    ]
    window = tree_window(lib, run_id, "t", limit=80)
    ids = {n.id for n in window.nodes}
    assert window.truncated and window.total == 160 and len(ids) == 80
    assert set(chain[-40:]) <= ids  # the best one's ancestry, as far as half the window reaches
    assert len(ids & set(newest)) == 80 - len(ids & set(chain))  # the rest are the newest
    assert window.hidden_parents > 0  # the cut shows
    lib.close()


def test_pool_activity_reads_stage_times_and_lock_share(lib: SolutionLibrary) -> None:
    run_id = lib.list_runs()[0].id
    pool = pool_activity(lib, run_id)
    assert pool.evaluations == 9
    assert pool.stage_mean_s["build"] is not None and pool.stage_mean_s["start"] is None
    # Correct fixture evaluations hold the lock 0.7 s of 1.1 s; failures (0.3 s) recorded no lock.
    assert pool.gpu_lock_held_share == pytest.approx(5 * 0.7 / (5 * 1.1 + 4 * 0.3))
    assert pool.devices == {"cpu (interpreter)": 9}
    assert pool.pending_candidates == 0 and pool.open_proposals == 0
    lib.add_proposal(run_id, Proposal(task="relu", operator="mutate"))
    assert pool_activity(lib, run_id).open_proposals == 1


def test_version_changes_with_every_write(lib: SolutionLibrary) -> None:
    run_id = lib.list_runs()[0].id
    before = library_version(lib)
    assert library_version(lib) == before
    cid = add(lib, run_id, "relu", "# new\n", None, llm=False)
    after_candidate = library_version(lib)
    assert after_candidate != before
    lib.record_evaluation(cid, correct(3.0))
    after_evaluation = library_version(lib)
    assert after_evaluation != after_candidate
    lib.set_run_status(run_id, "finished")
    assert library_version(lib) != after_evaluation
