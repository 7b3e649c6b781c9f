"""Behaviour of ``SolutionLibrary`` through its public API, on a SQLite file and on PostgreSQL:
runs, tasks and islands.

Every test gets an empty library (``library_url``: a fresh SQLite file or a fresh PostgreSQL
database), so no test sees another's rows.
"""

from __future__ import annotations

import pytest

from evokernel.db import SolutionLibrary
from evokernel.exceptions import LibraryError, RunNotFoundError
from evokernel.types import Proposal
from tests.db.helpers import REFERENCE, count_task_rows, make_task


# ---- runs -----------------------------------------------------------------------------------------
def test_runs_create_get_list_and_status(lib: SolutionLibrary) -> None:
    config = {"strategy": "pike_b", "islands": {"count": 4}, "models": ["a", "b"]}
    first = lib.create_run("first", config, seed=3)
    second = lib.create_run("second", {})

    info = lib.get_run(first)
    assert (info.id, info.name, info.config, info.seed, info.status) == (first, "first", config, 3, "running")
    assert info.finished_at is None
    assert [r.id for r in lib.list_runs()] == [first, second]

    lib.set_run_status(first, "finished")
    done = lib.get_run(first)
    assert done.status == "finished"
    assert done.finished_at is not None and done.finished_at >= done.created_at
    # Resuming puts a run back to running and clears its finish time.
    lib.set_run_status(first, "running")
    assert lib.get_run(first).finished_at is None
    assert lib.get_run(second).status == "running"


def test_get_unknown_run_raises(lib: SolutionLibrary) -> None:
    with pytest.raises(RunNotFoundError, match="no run 'nope'"):
        lib.get_run("nope")
    assert issubclass(RunNotFoundError, LibraryError)


# ---- tasks and islands ------------------------------------------------------------------------------
def test_register_task_dedups_by_name_and_hash_across_runs(lib: SolutionLibrary) -> None:
    a = lib.create_run("a", {})
    b = lib.create_run("b", {})
    task = make_task()
    lib.register_task(a, task)
    lib.register_task(a, task)  # idempotent within a run (resume registers again)
    lib.register_task(b, task)
    assert count_task_rows(lib.url) == 1

    changed = make_task(source=REFERENCE + "# edited\n")
    lib.register_task(b, make_task("gelu"), position=1)
    c = lib.create_run("c", {})
    lib.register_task(c, changed)  # same name, new source: a different task
    assert count_task_rows(lib.url) == 3

    assert lib.run_task_hashes(a) == {"relu": task.source_hash}
    assert lib.run_task_hashes(b) == {"relu": task.source_hash, "gelu": make_task("gelu").source_hash}
    assert lib.run_task_hashes(c) == {"relu": changed.source_hash}


def test_unregistered_task_is_an_error(lib: SolutionLibrary, run_id: str) -> None:
    with pytest.raises(LibraryError, match="not registered"):
        lib.add_proposal(run_id, Proposal(task="missing", operator="seed"))


def test_islands_are_created_once_and_can_grow(lib: SolutionLibrary, run_id: str) -> None:
    assert lib.ensure_islands(run_id, "relu", 3) == [0, 1, 2]
    assert lib.ensure_islands(run_id, "relu", 3) == [0, 1, 2]
    assert lib.ensure_islands(run_id, "relu", 5) == [0, 1, 2, 3, 4]
    # Asking for fewer never forgets islands that exist.
    assert lib.ensure_islands(run_id, "relu", 2) == [0, 1, 2, 3, 4]
