"""`evokernel export --dataset`: one row per evaluated candidate, every column documented."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evokernel.cli import main
from evokernel.conformance import InstantMutator, instant_config, instant_task, run_instant
from evokernel.db import SolutionLibrary
from evokernel.exceptions import ExportError
from evokernel.export.dataset import COLUMNS, export_dataset
from evokernel.types import Status

DOCS = Path(__file__).resolve().parents[2] / "docs" / "export.md"


def test_rows_hold_pairs_prompts_and_contrasts(tmp_path: Path) -> None:
    tasks = [instant_task("alpha"), instant_task("beta")]
    config = instant_config("greedy", None, tmp_path / "l.db", tasks, evaluations=8)
    run_id = run_instant(
        config, tasks, mutator=InstantMutator(incorrect_rate=0.4, uses_llm=True, cost_usd=0.01)
    )
    out = tmp_path / "rows.jsonl"
    assert main(["export", "--library", str(tmp_path / "l.db"), "--dataset", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    lib = SolutionLibrary(tmp_path / "l.db")
    assert len(rows) == lib.count_evaluated(run_id) == 16
    assert all(list(r) == list(COLUMNS) for r in rows)
    by_id = {r["candidate_id"]: r for r in rows}
    for task in tasks:
        for sc in lib.candidates(run_id, task.name):
            row = by_id[sc.candidate.id]
            assert row["candidate_source"] == sc.candidate.source and row["task_source"] == task.source
            assert row["verdict"] == sc.evaluation.status.value
            assert row["parent_ids"] == list(sc.candidate.parents)
            if sc.candidate.parents:
                parent = by_id[sc.candidate.parents[0]]
                assert row["parent_speedup_eager"] == parent["speedup_eager"]
                assert row["model"] == "instant" and row["cost_usd"] == pytest.approx(0.01)
            else:
                assert row["operator"] == "seed_file" and row["model"] is None and row["prompt"] == ""
            if sc.evaluation.status is Status.INCORRECT:
                assert row["speedup_eager"] is None and row["reason"] == "marked incorrect"
    one = tmp_path / "alpha.jsonl"
    assert export_dataset(lib, run_id, one, task="alpha") == 8


def test_parquet_needs_pyarrow_or_writes_it(tmp_path: Path) -> None:
    task = instant_task("alpha")
    run_instant(instant_config("greedy", None, tmp_path / "l.db", [task], evaluations=3), [task])
    lib = SolutionLibrary(tmp_path / "l.db")
    try:
        import pyarrow.parquet as pq
    except ImportError:
        with pytest.raises(ExportError, match="writing Parquet needs pyarrow"):
            export_dataset(lib, None, tmp_path / "rows.parquet")
        return
    assert export_dataset(lib, None, tmp_path / "rows.parquet") == 3
    assert pq.read_table(tmp_path / "rows.parquet").num_rows == 3


def test_every_column_is_documented() -> None:
    documented = re.findall(r"^\| `(\w+)` \|", DOCS.read_text(), flags=re.M)
    assert documented == list(COLUMNS)


def test_the_docs_describe_each_column_as_the_code_does() -> None:
    documented = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", DOCS.read_text(), flags=re.M))
    assert documented == COLUMNS


def test_a_correct_rows_stage_is_what_the_docs_say(tmp_path: Path) -> None:
    from evokernel.evaluation.verdict import correct_evaluation
    from evokernel.types import Proposal

    # The verdict every correct candidate gets (evaluation/verdict.py), recorded as a run records it.
    timing = {"median_ms": 1.0, "iqr_ms": 0.01, "cv": 0.01}
    paired = {"a_ms": 1.0, "b_ms": 2.0, "ratio": 2.0, "low": 1.9, "high": 2.1}
    verdict = correct_evaluation(timing, {"eager": {"median_ms": 2.0}}, 0.0, "correct", {}, paired)
    lib = SolutionLibrary(tmp_path / "l.db")
    run_id = lib.create_run("one", {"budget": {"evaluations": 1}})
    lib.register_task(run_id, instant_task("alpha"))
    cand = lib.add_candidate(
        run_id, lib.add_proposal(run_id, Proposal(task="alpha", operator="tune")), "x = 1\n"
    )
    lib.record_evaluation(cand.id, verdict)
    export_dataset(lib, run_id, tmp_path / "rows.jsonl")
    (row,) = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert row["verdict"] == "correct" and row["stage"] == "timing"
    assert "`timing` for correct" in COLUMNS["stage"]  # the docs were "empty for correct"
