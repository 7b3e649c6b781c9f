"""Every evaluated candidate of the chosen runs as one row: training-ready (reference, kernel) pairs.

KernelBook-style pairs are ``task_source`` -> ``candidate_source`` of correct rows; CUDA-L1-style
faster/slower contrasts join a row to its parent (``parent_id``, ``parent_speedup_eager``). JSONL by
default; Parquet when the file name ends in ``.parquet`` and pyarrow is installed (not a dependency).
:data:`COLUMNS` documents every column; ``docs/export.md`` lists the same (a test compares them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evokernel import analysis
from evokernel.analysis.overview import DEFAULT_PROFILE
from evokernel.db import SolutionLibrary
from evokernel.db.models import (
    CandidateParentRow,
    CandidateRow,
    EvaluationRow,
    LLMCallRow,
    ProposalRow,
    RunTaskRow,
    TaskRow,
)
from evokernel.exceptions import ExportError

COLUMNS: dict[str, str] = {
    "run_id": "run that produced the candidate",
    "sweep_id": "sweep the run is a cell of (null for a plain run)",
    "point": 'the cell\'s axis values, e.g. {"strategy.name": "pike_b", "seed": 0} ({} for a plain run)',
    "task": "task name within the run",
    "task_hash": "hash of the task's reference source (16 hex chars of SHA-256)",
    "task_source": "the PyTorch reference program (KernelBench format: Model, get_inputs, get_init_inputs)",
    "candidate_id": "candidate id in the library",
    "candidate_hash": "hash of candidate_source (16 hex chars of SHA-256)",
    "candidate_source": "the candidate program (ModelNew and what it imports)",
    "parent_id": "the candidate it was derived from (first parent; null for seeds)",
    "parent_ids": "all parents in order (crossover has several)",
    "parent_speedup_eager": "first parent's speedup vs eager (null if none): child/parent contrasts",
    "operator": "what made it: seed_file, tune, mutate, crossover, fix, ...",
    "model": "LLM that wrote it (last successful call of its proposal); null for non-LLM operators",
    "idea": "the natural-language idea the proposal carried, if any",
    "island": "island of the population it was born on",
    "generation": "generation it was born in",
    "verdict": "correct, incorrect, compile_error, runtime_error, timeout, crashed or rejected",
    "stage": "verifier stage that decided the verdict: the one that refused it, or `timing` for correct",
    "reason": "why it was refused (the rule or error), empty for correct",
    "profile": "verdict profile the evaluation used (strict unless the run set evaluation.profile)",
    "device": "device it was evaluated on",
    "interpreter": "true: CPU under Triton's interpreter; runtimes are then not GPU performance",
    "runtime_ms": "median runtime of the candidate (ms)",
    "eager_ms": "median runtime of the eager PyTorch reference (ms)",
    "compile_ms": "median runtime of torch.compile of the reference (ms), null if not measured",
    "speedup_eager": "eager_ms / runtime_ms for correct candidates",
    "speedup_low": "lower end of speedup_eager's 95 % confidence interval (null: not measured paired)",
    "speedup_high": "upper end of speedup_eager's 95 % confidence interval (null: not measured paired)",
    "confirmed": "true: a paired re-timing against the task's best so far confirmed it before promotion",
    "speedup_compile": "compile_ms / runtime_ms for correct candidates",
    "max_abs_error": "largest absolute difference to the reference over the checked inputs",
    "feedback": "the feedback text the next prompt would get",
    "prompt": "the prompt of the LLM call that wrote it (empty for non-LLM operators)",
    "reply": "the LLM's reply that the candidate was extracted from",
    "prompt_tokens": "prompt tokens of the proposal's LLM calls (retries included)",
    "completion_tokens": "completion tokens of the proposal's LLM calls",
    "cost_usd": "USD of the proposal's LLM calls",
}


def _rows(lib: SolutionLibrary, run: analysis.RunRow) -> list[dict[str, Any]]:
    """One run's rows: candidates by (run_id, ...) indexes; evaluations, parents, LLM calls by id."""
    profile = str((run.config.get("evaluation") or {}).get("profile") or DEFAULT_PROFILE)

    def fn(s: Session) -> list[dict[str, Any]]:
        c = CandidateRow
        tasks = {
            tid: (name, h, src)
            for tid, name, h, src in s.execute(
                select(RunTaskRow.task_id, RunTaskRow.name, TaskRow.source_hash, TaskRow.source)
                .join(TaskRow, TaskRow.id == RunTaskRow.task_id)
                .where(RunTaskRow.run_id == run.id)
            )
        }
        cands = sorted(
            s.scalars(select(c).where(c.run_id == run.id, c.status != "pending")), key=lambda r: r.id
        )
        ids = [r.id for r in cands]
        latest: dict[int, EvaluationRow] = {}
        for e in s.scalars(
            select(EvaluationRow).where(EvaluationRow.candidate_id.in_(ids)).order_by(EvaluationRow.id)
        ):
            latest[e.candidate_id] = e
        parents: dict[int, list[int]] = {}
        for child, parent in s.execute(
            select(CandidateParentRow.child_id, CandidateParentRow.parent_id)
            .where(CandidateParentRow.child_id.in_(ids))
            .order_by(CandidateParentRow.child_id, CandidateParentRow.rank)
        ):
            parents.setdefault(child, []).append(parent)
        speed: dict[int, float | None] = dict(
            s.execute(select(c.id, c.speedup).where(c.run_id == run.id)).all()
        )
        calls: dict[int, list[LLMCallRow]] = {}
        for call in s.scalars(select(LLMCallRow).where(LLMCallRow.run_id == run.id).order_by(LLMCallRow.id)):
            if call.proposal_id is not None:
                calls.setdefault(call.proposal_id, []).append(call)
        ideas: dict[int, str | None] = dict(
            s.execute(select(ProposalRow.id, ProposalRow.idea).where(ProposalRow.run_id == run.id)).all()
        )
        out = []
        for r in cands:
            e = latest.get(r.id)
            name, task_hash, task_source = tasks[r.task_id]
            mine = calls.get(r.proposal_id, [])
            ok = [call for call in mine if call.outcome == "ok"]
            ps = parents.get(r.id, [])
            out.append(
                {
                    "run_id": run.id,
                    "sweep_id": run.sweep_id,
                    "point": run.point,
                    "task": name,
                    "task_hash": task_hash,
                    "task_source": task_source,
                    "candidate_id": r.id,
                    "candidate_hash": r.source_hash,
                    "candidate_source": r.source,
                    "parent_id": ps[0] if ps else None,
                    "parent_ids": ps,
                    "parent_speedup_eager": speed.get(ps[0]) if ps else None,
                    "operator": r.operator,
                    "model": ok[-1].model if ok else None,
                    "idea": ideas.get(r.proposal_id),
                    "island": r.island,
                    "generation": r.generation,
                    "verdict": r.status,
                    "stage": e.stage if e else "",
                    "reason": r.reason,
                    "profile": e.profile if e else profile,
                    "device": e.device if e else "",
                    "interpreter": bool(e.interpreter) if e else False,
                    "runtime_ms": e.runtime_ms if e else None,
                    "eager_ms": e.eager_ms if e else None,
                    "compile_ms": e.compile_ms if e else None,
                    "speedup_eager": e.speedup_eager if e and r.status == "correct" else None,
                    "speedup_low": e.speedup_low if e and r.status == "correct" else None,
                    "speedup_high": e.speedup_high if e and r.status == "correct" else None,
                    "confirmed": bool(e.confirmed) if e and r.status == "correct" else False,
                    "speedup_compile": e.speedup_compile if e and r.status == "correct" else None,
                    "max_abs_error": e.max_abs_error if e else None,
                    "feedback": e.feedback if e else "",
                    "prompt": ok[-1].prompt if ok else "",
                    "reply": ok[-1].reply if ok else "",
                    "prompt_tokens": sum(call.prompt_tokens for call in mine),
                    "completion_tokens": sum(call.completion_tokens for call in mine),
                    "cost_usd": sum(call.cost_usd for call in mine),
                }
            )
        return out

    return lib.read(fn)


def export_dataset(
    lib: SolutionLibrary, target: str | None, path: str | Path, *, task: str | None = None
) -> int:
    """Write the rows of run or sweep ``target`` (None: the latest) to ``path``; returns the count."""
    kind, ident = analysis.resolve_target(lib, target)
    runs = (
        list(analysis.get_sweep(lib, ident).cells)
        if kind == "sweep"
        else [r for r in analysis.list_runs(lib) if r.id == ident]
    )
    rows = [row for run in runs for row in _rows(lib, run) if task is None or row["task"] == task]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ExportError(
                "writing Parquet needs pyarrow (pip install pyarrow); or name the file .jsonl"
            ) from exc
        table = pa.Table.from_pylist([{**r, "point": json.dumps(r["point"])} for r in rows])
        pq.write_table(table, path)
    else:
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    return len(rows)
