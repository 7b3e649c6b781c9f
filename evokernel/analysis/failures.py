"""Where candidates failed: counts per (stage, status, reason), with example candidates.

Reasons carry specifics (line numbers, tensor sizes), so they are grouped by their first line cut
to ``REASON_CHARS``; the verifier writes the rule or error class first, which keeps groups few."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, EvaluationRow, ProposalRow, RunTaskRow

REASON_CHARS = 100
EXAMPLES = 3


@dataclass(frozen=True)
class FailureCount:
    """``stage`` is the verifier stage that refused the candidate (``mutation`` for proposals
    whose operator produced no candidate); ``examples`` are up to three candidate ids (proposal ids
    for mutation failures), oldest first."""

    task: str
    stage: str
    status: str
    reason: str
    count: int
    examples: tuple[int, ...]


def reason_key(reason: str) -> str:
    first = (reason or "").strip().splitlines()[0] if (reason or "").strip() else ""
    return first[:REASON_CHARS]


def failure_counts(lib: SolutionLibrary, run_id: str) -> list[FailureCount]:
    """Most frequent first. Reads the latest evaluation of every failed candidate (candidates'
    (run_id, task_id, status) index, evaluations' candidate_id index) and failed proposals
    ((run_id, task_id, state) index)."""

    def fn(s: Session) -> list[FailureCount]:
        names: dict[Any, Any] = dict(
            s.execute(select(RunTaskRow.task_id, RunTaskRow.name).where(RunTaskRow.run_id == run_id)).all()
        )
        c, e = CandidateRow, EvaluationRow
        rows = s.execute(
            select(c.id, c.task_id, e.stage, e.status, e.reason)
            .join(e, e.candidate_id == c.id)
            .where(c.run_id == run_id, c.status.not_in(("correct", "pending")))
            .order_by(e.id)
        ).all()
        latest: dict[int, tuple[int, str, str, str]] = {}
        for cid, task_id, stage, status, reason in rows:
            latest[cid] = (task_id, stage or "", status, reason or "")
        groups: dict[tuple[str, str, str, str], list[int]] = {}
        for cid, (task_id, stage, status, reason) in sorted(latest.items()):
            groups.setdefault((names.get(task_id, "?"), stage, status, reason_key(reason)), []).append(cid)
        p = ProposalRow
        for pid, task_id, reason in s.execute(
            select(p.id, p.task_id, p.reason).where(p.run_id == run_id, p.state == "failed").order_by(p.id)
        ):
            groups.setdefault((names.get(task_id, "?"), "mutation", "failed", reason_key(reason)), []).append(
                pid
            )
        return [
            FailureCount(task, stage, status, reason, len(ids), tuple(ids[:EXAMPLES]))
            for (task, stage, status, reason), ids in groups.items()
        ]

    return sorted(lib.read(fn), key=lambda f: (-f.count, f.task, f.stage, f.reason))
