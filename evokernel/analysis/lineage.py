"""Family trees: every candidate of a task with its parents, and one candidate in full."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import (
    CandidateParentRow,
    CandidateRow,
    EvaluationRow,
    LLMCallRow,
    ProposalRow,
    RunTaskRow,
)
from evokernel.exceptions import AnalysisError
from evokernel.types import Evaluation, LLMCall, format_speedup


@dataclass(frozen=True)
class Node:
    """A candidate in the family tree. ``model`` is the LLM that wrote it (the last successful call
    of its proposal), None for non-LLM operators (seed, tune)."""

    candidate: int
    parents: tuple[int, ...]
    operator: str
    model: str | None
    status: str
    reason: str
    speedup: float | None
    island: int
    generation: int
    # The 95 % interval of ``speedup`` (None: not measured paired) and its confirmation (0008).
    speedup_low: float | None = None
    speedup_high: float | None = None
    confirmed: bool = False

    @property
    def speedup_text(self) -> str:
        return format_speedup(self.speedup, self.speedup_low, self.speedup_high)


@dataclass(frozen=True)
class CandidateDetail:
    id: int
    run_id: str
    task: str
    node: Node
    source: str
    idea: str | None
    parent_sources: dict[int, str]
    evaluations: tuple[Evaluation, ...]
    llm_calls: tuple[LLMCall, ...]


def _models(s: Session, proposal_ids: list[int]) -> dict[int, str]:
    """Proposal id -> model of its last successful LLM call (llm_calls is scanned by run_id)."""
    out: dict[int, str] = {}
    if not proposal_ids:
        return out
    for pid, model in s.execute(
        select(LLMCallRow.proposal_id, LLMCallRow.model)
        .where(LLMCallRow.proposal_id.in_(proposal_ids), LLMCallRow.outcome == "ok")
        .order_by(LLMCallRow.id)
    ):
        out[pid] = model
    return out


def _parents(s: Session, ids: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for child, parent in s.execute(
        select(CandidateParentRow.child_id, CandidateParentRow.parent_id)
        .where(CandidateParentRow.child_id.in_(ids))
        .order_by(CandidateParentRow.child_id, CandidateParentRow.rank)
    ):
        out.setdefault(child, []).append(parent)
    return out


def _node(row: CandidateRow, parents: list[int], model: str | None) -> Node:
    return Node(
        row.id,
        tuple(parents),
        row.operator,
        model,
        row.status,
        row.reason,
        row.speedup,
        row.island,
        row.generation,
        row.speedup_low,
        row.speedup_high,
        bool(row.confirmed),
    )


def lineage(lib: SolutionLibrary, run_id: str, task: str) -> list[Node]:
    """Every candidate of ``task`` in ``run_id``, oldest first ((run_id, task_id, ...) indexes of
    candidates; candidate_parents by its primary key; llm_calls by proposal)."""

    def fn(s: Session) -> list[Node]:
        task_id = s.scalar(
            select(RunTaskRow.task_id).where(RunTaskRow.run_id == run_id, RunTaskRow.name == task)
        )
        if task_id is None:
            raise AnalysisError(f"run {run_id!r} has no task {task!r}")
        rows = sorted(
            s.scalars(
                select(CandidateRow).where(CandidateRow.run_id == run_id, CandidateRow.task_id == task_id)
            ),
            key=lambda r: r.id,
        )
        parents = _parents(s, [r.id for r in rows])
        models = _models(s, [r.proposal_id for r in rows])
        return [_node(r, parents.get(r.id, []), models.get(r.proposal_id)) for r in rows]

    return lib.read(fn)


def ancestry(nodes: list[Node], candidate: int) -> list[Node]:
    """The chain from the first ancestor to ``candidate`` following each node's first parent (the
    one it was mutated from; a crossover's other parents stay listed on its node)."""
    by_id = {n.candidate: n for n in nodes}
    chain: list[Node] = []
    current: int | None = candidate
    while current is not None and current in by_id and all(n.candidate != current for n in chain):
        node = by_id[current]
        chain.append(node)
        current = node.parents[0] if node.parents else None
    return chain[::-1]


def candidate_detail(lib: SolutionLibrary, candidate_id: int) -> CandidateDetail:
    """One candidate in full: source, parents' sources, every evaluation, and the LLM calls of its
    proposal with prompt and reply (primary keys and the candidate_id / proposal_id columns)."""

    def fn(s: Session) -> CandidateDetail:
        row = s.get(CandidateRow, candidate_id)
        if row is None:
            raise AnalysisError(f"no candidate {candidate_id} in the library")
        task = s.scalar(
            select(RunTaskRow.name).where(RunTaskRow.run_id == row.run_id, RunTaskRow.task_id == row.task_id)
        )
        parents = _parents(s, [row.id]).get(row.id, [])
        sources: dict[Any, Any] = dict(
            s.execute(select(CandidateRow.id, CandidateRow.source).where(CandidateRow.id.in_(parents))).all()
        )
        fields = tuple(Evaluation.__dataclass_fields__)
        evaluations = tuple(
            Evaluation.from_dict({k: getattr(e, k) for k in fields})
            for e in s.scalars(
                select(EvaluationRow).where(EvaluationRow.candidate_id == row.id).order_by(EvaluationRow.id)
            )
        )
        call_fields = tuple(LLMCall.__dataclass_fields__)
        calls = tuple(
            LLMCall(**{k: getattr(c, k) for k in call_fields})
            for c in s.scalars(
                select(LLMCallRow).where(LLMCallRow.proposal_id == row.proposal_id).order_by(LLMCallRow.id)
            )
        )
        proposal = s.get(ProposalRow, row.proposal_id)
        model = next((c.model for c in reversed(calls) if c.outcome == "ok"), None)
        return CandidateDetail(
            id=row.id,
            run_id=row.run_id,
            task=task or "",
            node=_node(row, parents, model),
            source=row.source,
            idea=proposal.idea if proposal is not None else None,
            parent_sources={p: sources[p] for p in parents if p in sources},
            evaluations=evaluations,
            llm_calls=calls,
        )

    return lib.read(fn)


def as_dict(node: Node) -> dict[str, Any]:
    return {k: getattr(node, k) for k in Node.__dataclass_fields__}
