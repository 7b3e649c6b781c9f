"""Behaviour of ``SolutionLibrary`` through its public API, on a SQLite file and on PostgreSQL.

Every test gets an empty library (``library_url``: a fresh SQLite file or a fresh PostgreSQL
database), so no test sees another's rows.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select

from evokernel.db import SolutionLibrary
from evokernel.db.models import TaskRow
from evokernel.exceptions import LibraryError, RunNotFoundError
from evokernel.types import Evaluation, LLMCall, Proposal, Status, Task

REFERENCE = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def make_task(name: str = "relu", source: str = REFERENCE) -> Task:
    return Task(name=name, path=f"/tasks/{name}.py", source=source, level=1, variants=({"n": 8},))


def correct(speedup: float | None, **extra: Any) -> Evaluation:
    return Evaluation(status=Status.CORRECT, runtime_ms=1.0, eager_ms=2.0, speedup_eager=speedup, **extra)


@pytest.fixture
def lib(library_url: str) -> Iterator[SolutionLibrary]:
    library = SolutionLibrary(library_url)
    yield library
    library.close()


@pytest.fixture
def run_id(lib: SolutionLibrary) -> str:
    rid = lib.create_run("test-run", {"strategy": "greedy", "budget": {"evaluations": 10}}, seed=7)
    lib.register_task(rid, make_task())
    return rid


def new_candidate(
    lib: SolutionLibrary,
    run_id: str,
    source: str,
    *,
    island: int = 0,
    generation: int = 0,
    parents: tuple[int, ...] = (),
    task: str = "relu",
) -> int:
    proposal = lib.add_proposal(
        run_id, Proposal(task=task, operator="mutate", island=island, generation=generation, parents=parents)
    )
    return lib.add_candidate(run_id, proposal, source).id


def count_task_rows(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(TaskRow)).scalar_one())
    finally:
        engine.dispose()


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
    )
    lib.record_evaluation(cid, good)
    scored = lib.get_candidate(cid)
    assert scored.evaluation == good
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


# ---- llm calls, baselines, events --------------------------------------------------------------------
def test_llm_calls_and_usage(lib: SolutionLibrary, run_id: str) -> None:
    other = lib.create_run("other", {})
    assert lib.llm_usage(run_id) == {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}

    proposal = lib.add_proposal(run_id, Proposal(task="relu", operator="mutate"))
    calls = [
        LLMCall(model="gpt-x", prompt_tokens=1000, completion_tokens=200, cost_usd=0.0125, latency_s=3.5,
                prompt_hash="abc", prompt="write a kernel", reply="```python\n...```"),
        LLMCall(model="gpt-x", prompt_tokens=1500, completion_tokens=0, cost_usd=0.0, outcome="rate_limited",
                error="429 Too Many Requests"),
        LLMCall(model="claude-y", prompt_tokens=500, completion_tokens=300, cost_usd=0.25),
    ]  # fmt: skip
    lib.record_llm_call(run_id, proposal.id, calls[0])
    lib.record_llm_call(run_id, proposal.id, calls[1])
    lib.record_llm_call(run_id, None, calls[2])  # e.g. an idea-generation call tied to no proposal
    lib.record_llm_call(other, None, LLMCall(model="gpt-x", prompt_tokens=7, cost_usd=9.0))

    assert lib.llm_calls(run_id) == calls
    usage = lib.llm_usage(run_id)
    assert usage["calls"] == 3
    assert usage["prompt_tokens"] == 3000
    assert usage["completion_tokens"] == 500
    assert usage["cost_usd"] == pytest.approx(0.2625)
    assert lib.llm_usage(other)["cost_usd"] == pytest.approx(9.0)


def test_baselines_get_put_upsert(lib: SolutionLibrary) -> None:
    key = ("hash1", "NVIDIA H100", "torch 2.5.1 / triton 3.1.0 / cuda 12.4")
    assert lib.get_baseline(*key, "eager") is None

    lib.put_baseline(*key, "eager", 2.0, iqr_ms=0.1)
    lib.put_baseline(*key, "compile", 1.5)
    lib.put_baseline(*key, "eager", 3.0, variant="batch=8")
    assert lib.get_baseline(*key, "eager") == 2.0
    assert lib.get_baseline(*key, "compile") == 1.5
    assert lib.get_baseline(*key, "eager", variant="batch=8") == 3.0
    # Another device or software stack is a different baseline.
    assert lib.get_baseline("hash1", "NVIDIA H200", key[2], "eager") is None
    assert lib.get_baseline("hash1", key[1], "torch 2.6.0 / triton 3.2.0 / cuda 12.6", "eager") is None

    lib.put_baseline(*key, "eager", 1.8, iqr_ms=0.05)  # re-measured: replaced, not duplicated
    assert lib.get_baseline(*key, "eager") == 1.8


def test_events(lib: SolutionLibrary, run_id: str) -> None:
    other = lib.create_run("other", {})
    assert lib.events(run_id) == []
    lib.log_event(run_id, "start", "run started", {"resume": False})
    lib.log_event(other, "start")
    lib.log_event(run_id, "migration", "island 0 -> 1", {"from": 0, "to": 1, "candidates": [3, 5]})
    lib.log_event(run_id, "finish")
    assert lib.events(run_id) == [
        ("start", "run started", {"resume": False}),
        ("migration", "island 0 -> 1", {"from": 0, "to": 1, "candidates": [3, 5]}),
        ("finish", "", {}),
    ]
    assert lib.events(other) == [("start", "", {})]


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
    errors: list[BaseException] = []
    got: list[list[int]] = [[], []]
    barrier = threading.Barrier(len(writers))

    def write(index: int) -> None:
        barrier.wait()
        try:
            for _ in range(per_writer):
                proposal = writers[index].add_proposal(rid, Proposal(task="relu", operator=f"w{index}"))
                assert proposal.seq is not None
                got[index].append(proposal.seq)
        except BaseException as exc:  # noqa: BLE001 - re-raised below in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
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
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(writers))

    def write(index: int) -> None:
        barrier.wait()
        try:
            for position, task in enumerate(tasks):
                writers[index].register_task(runs[index], task, position)
        except BaseException as exc:  # noqa: BLE001 - re-raised below in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert count_task_rows(writers[0].url) == len(tasks)
    expected = {t.name: t.source_hash for t in tasks}
    assert [w.run_task_hashes(r) for w, r in zip(writers, runs, strict=True)] == [expected, expected]
    for library in writers:
        library.close()


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
