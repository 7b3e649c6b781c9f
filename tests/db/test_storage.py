"""Behaviour of ``SolutionLibrary`` through its public API, on a SQLite file and on PostgreSQL:
the SQLite file (persistence, WAL) and concurrent writers.

Every test gets an empty library (``library_url``: a fresh SQLite file or a fresh PostgreSQL
database), so no test sees another's rows.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from evokernel.db import SolutionLibrary
from evokernel.types import LLMCall, Proposal
from tests.db.helpers import correct, count_task_rows, make_task, new_candidate


def run_together(writers: int, write: Callable[[int], None]) -> None:
    """Start ``write(i)`` for every writer at once (a barrier) and re-raise what any of them raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(writers)

    def guarded(index: int) -> None:
        barrier.wait()
        try:
            write(index)
        except BaseException as exc:  # noqa: BLE001 - re-raised below in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


# ---- SQLite file: persistence, concurrency, WAL ---------------------------------------------------------
def test_reopened_sqlite_file_sees_everything(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "library.db"  # parent folder is created on open
    first = SolutionLibrary(path)
    rid = first.create_run("persist", {"k": 1})
    first.register_task(rid, make_task())
    first.ensure_islands(rid, "relu", 2)
    parent = new_candidate(first, rid, "parent")
    child = new_candidate(first, rid, "child", island=1, generation=1, parents=(parent,))
    first.add_proposal(rid, Proposal(task="relu", operator="mutate"))  # left open by a "crash"
    first.record_evaluation(child, correct(3.0))
    first.record_llm_call(rid, None, LLMCall(model="m", prompt_tokens=10, cost_usd=0.5))
    first.put_baseline("h", "cpu", "v", "eager", 4.0)
    first.log_event(rid, "start")
    first.close()

    again = SolutionLibrary(str(path))
    assert again.get_run(rid).config == {"k": 1}
    assert again.run_task_hashes(rid) == {"relu": make_task().source_hash}
    assert again.ensure_islands(rid, "relu", 2) == [0, 1]
    assert [sc.candidate.id for sc in again.candidates(run_id=rid, task="relu")] == [parent, child]
    assert again.get_candidate(child).candidate.parents == (parent,)
    assert [sc.candidate.id for sc in again.top(rid, "relu", 1)] == [child]
    assert [p.seq for p in again.open_proposals(rid, "relu")] == [2]
    assert again.add_proposal(rid, Proposal(task="relu", operator="mutate")).seq == 3
    assert again.llm_usage(rid)["cost_usd"] == pytest.approx(0.5)
    assert again.get_baseline("h", "cpu", "v", "eager") == 4.0
    assert again.events(rid) == [("start", "", {})]
    again.close()


def test_sqlite_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "library.db"
    SolutionLibrary(path).close()
    # WAL is a property of the file, so a plain connection that set nothing must report it.
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_concurrent_writers_lose_nothing(library_url: str) -> None:
    # Two library objects (as two processes would have) add proposals for the same (run, task) at the
    # same time. Each must get its row and a unique, gap-free seq.
    per_writer = 200
    setup = SolutionLibrary(library_url)
    rid = setup.create_run("concurrent", {})
    setup.register_task(rid, make_task())
    writers = [SolutionLibrary(library_url), SolutionLibrary(library_url)]
    got: list[list[int]] = [[], []]

    def write(index: int) -> None:
        for _ in range(per_writer):
            proposal = writers[index].add_proposal(rid, Proposal(task="relu", operator=f"w{index}"))
            assert proposal.seq is not None
            got[index].append(proposal.seq)

    run_together(len(writers), write)
    assert all(len(seqs) == per_writer for seqs in got)
    total = 2 * per_writer
    assert sorted(got[0] + got[1]) == list(range(total))
    stored = setup.open_proposals(rid, "relu")
    assert [p.seq for p in stored] == list(range(total))
    assert sum(p.operator == "w0" for p in stored) == per_writer
    assert setup.count_proposals(rid, "relu") == total
    for library in [setup, *writers]:
        library.close()


def test_concurrent_runs_register_the_same_tasks(library_url: str) -> None:
    # Runs of a sweep start together and register the same tasks: the (name, hash) dedup must hold
    # without one run failing on the other's insert.
    tasks = [make_task(f"task{i}") for i in range(40)]
    writers = [SolutionLibrary(library_url), SolutionLibrary(library_url)]
    runs = [w.create_run(f"sweep-{i}", {}) for i, w in enumerate(writers)]

    def write(index: int) -> None:
        for position, task in enumerate(tasks):
            writers[index].register_task(runs[index], task, position)

    run_together(len(writers), write)
    assert count_task_rows(writers[0].url) == len(tasks)
    expected = {t.name: t.source_hash for t in tasks}
    assert [w.run_task_hashes(r) for w, r in zip(writers, runs, strict=True)] == [expected, expected]
    for library in writers:
        library.close()
