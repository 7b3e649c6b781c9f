"""Where candidates failed: counts per (stage, status, reason), with example candidates.

Reasons carry specifics (line numbers, tensor sizes), so they are grouped by their first line cut
to ``REASON_CHARS`` (:func:`evokernel.db.reason_key.reason_key`, which the library stores with every
verdict as ``candidates.reason_key``); the verifier writes the rule or error class first, which
keeps groups few."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, ProposalRow, RunTaskRow
from evokernel.db.reason_key import REASON_CHARS, reason_key

__all__ = ["EXAMPLES", "REASON_CHARS", "FailureCount", "failure_counts", "reason_key"]

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


def failure_counts(lib: SolutionLibrary, run_id: str) -> list[FailureCount]:
    """Most frequent first. Failed candidates are counted per (task, status, stage, reason key) in
    the order of ix_candidates_run_task_failures, index-only, and each group's oldest examples
    are one seek of the same index; failed proposals come from ix_proposals_run_task_state."""

    def fn(s: Session) -> list[FailureCount]:
        names: dict[Any, Any] = dict(
            s.execute(select(RunTaskRow.task_id, RunTaskRow.name).where(RunTaskRow.run_id == run_id)).all()
        )
        c = CandidateRow
        key = (c.task_id, c.status, c.stage, c.reason_key)
        counted = s.execute(
            select(*key, func.count())
            .where(c.run_id == run_id, c.status.not_in(("correct", "pending")))
            .group_by(*key)
        ).all()
        out = []
        for task_id, status, stage, reason, n in counted:
            examples = s.scalars(
                select(c.id)
                .where(
                    c.run_id == run_id,
                    c.task_id == task_id,
                    c.status == status,
                    c.stage == stage,
                    c.reason_key == reason,
                )
                .order_by(c.id)
                .limit(EXAMPLES)
            ).all()
            out.append(FailureCount(names.get(task_id, "?"), stage, status, reason, int(n), tuple(examples)))
        out.sort(key=lambda f: f.examples[0])  # first seen first, so equal counts keep their order
        p = ProposalRow
        groups: dict[tuple[str, str], list[int]] = {}
        failed = select(p.id, p.task_id, p.reason).where(
            p.run_id == run_id, p.task_id.in_(list(names)), p.state == "failed"
        )  # every column of ix_proposals_run_task_state given; sorted here, or SQLite may scan by id
        for pid, task_id, why in sorted(s.execute(failed)):
            groups.setdefault((names.get(task_id, "?"), reason_key(why)), []).append(pid)
        out += [
            FailureCount(task, "mutation", "failed", reason, len(ids), tuple(ids[:EXAMPLES]))
            for (task, reason), ids in groups.items()
        ]
        return out

    return sorted(lib.read(fn), key=lambda f: (-f.count, f.task, f.stage, f.reason))
