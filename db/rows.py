"""Conversions from library rows to :mod:`evokernel.types` dataclasses (no queries of their own
except ``scored``, which attaches parents and latest evaluations in two queries)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evokernel.db.models import (
    CandidateParentRow,
    CandidateRow,
    EvaluationRow,
    ProposalRow,
    RunRow,
)
from evokernel.db.reason_key import reason_key
from evokernel.types import (
    Candidate,
    Evaluation,
    Proposal,
    RunInfo,
    Scored,
)

_EVAL_FIELDS = tuple(Evaluation.__dataclass_fields__)


def run_info(row: RunRow) -> RunInfo:
    return RunInfo(
        id=row.id,
        name=row.name,
        config=row.config,
        seed=row.seed,
        status=row.status,
        created_at=row.created_at.isoformat(timespec="seconds"),
        finished_at=row.finished_at.isoformat(timespec="seconds") if row.finished_at else None,
    )


def proposal(row: ProposalRow, task: str) -> Proposal:
    return Proposal(
        task=task,
        operator=row.operator,
        island=row.island,
        generation=row.generation,
        parents=tuple(row.parents),
        idea=row.idea,
        id=row.id,
        seq=row.seq,
        branch=row.branch or 0,
        count=1 if row.count is None else row.count,
        ideas=tuple(row.ideas or ()),
        state=row.state,
    )


def candidate(row: CandidateRow, task: str, parents: tuple[int, ...]) -> Candidate:
    return Candidate(
        id=row.id,
        run_id=row.run_id,
        task=task,
        proposal_id=row.proposal_id,
        island=row.island,
        generation=row.generation,
        operator=row.operator,
        parents=parents,
        source=row.source,
        branch=row.branch or 0,
    )


def eval_columns(evaluation: Evaluation) -> dict[str, Any]:
    out = {k: getattr(evaluation, k) for k in _EVAL_FIELDS}
    out["status"] = evaluation.status.value
    out["bottleneck"], out["sol_share"] = profile_columns(evaluation)
    return out


def candidate_status(evaluation: Evaluation, bottleneck: str | None) -> dict[str, Any]:
    """The bind values with which an evaluation updates its candidate's row (the library's
    ``_CANDIDATE_STATUS``): the figure and its interval only when the verdict is correct."""
    ok = evaluation.ok
    return {
        "new_status": evaluation.status.value,
        "new_reason": evaluation.reason,
        "new_speedup": evaluation.speedup_eager if ok else None,
        "new_stage": evaluation.stage,
        "new_reason_key": reason_key(evaluation.reason),
        "new_bottleneck": bottleneck,
        "new_speedup_low": evaluation.speedup_low if ok else None,
        "new_speedup_high": evaluation.speedup_high if ok else None,
        "new_confirmed": evaluation.confirmed and ok,
    }


def profile_columns(evaluation: Evaluation) -> tuple[str | None, float | None]:
    """(bottleneck, speed-of-light share) of an evaluation's profile; (None, None) without one
    (not profiled, profiling off, or skipped on a CPU)."""
    profile = evaluation.details.get("profiling")
    if not isinstance(profile, dict) or not str(profile.get("status", "")).startswith("ok"):
        return None, None
    share = (profile.get("sol") or {}).get("share")
    bottleneck = profile.get("bottleneck")
    return (str(bottleneck)[:20] if bottleneck else None), (float(share) if share is not None else None)


def scored(s: Session, rows: list[CandidateRow], task: str) -> list[Scored]:
    """Attach parents (in rank order) and the latest evaluation to each row: two queries in all."""
    if not rows:
        return []
    ids = [r.id for r in rows]
    parents: dict[int, list[int]] = {}
    for p in s.scalars(
        select(CandidateParentRow)
        .where(CandidateParentRow.child_id.in_(ids))
        .order_by(CandidateParentRow.child_id, CandidateParentRow.rank)
    ):
        parents.setdefault(p.child_id, []).append(p.parent_id)
    latest: dict[int, EvaluationRow] = {}
    for e in s.scalars(
        select(EvaluationRow).where(EvaluationRow.candidate_id.in_(ids)).order_by(EvaluationRow.id)
    ):
        latest[e.candidate_id] = e
    out = []
    for r in rows:
        ev_row = latest.get(r.id)
        ev = None
        if ev_row is not None:
            ev = Evaluation.from_dict({k: getattr(ev_row, k) for k in _EVAL_FIELDS})
        out.append(Scored(candidate(r, task, tuple(parents.get(r.id, ()))), ev))
    return out
