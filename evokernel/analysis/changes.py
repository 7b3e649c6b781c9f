"""What changed in a library since a viewer last looked: one cheap token for live updates.

The token is the newest primary key of each append-only table plus the runs' statuses, so any
recorded evaluation, candidate, proposal, LLM call, island event, run event or status change moves
it. Each ``max(id)`` is one primary-key lookup (O(log n)); the runs table holds a row per run
(hundreds), so the whole token costs well under a millisecond at 1M evaluations
(docs/benchmarks.md). One watcher polls it for all open pages (evokernel.dashboard.live).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import (
    CandidateRow,
    EvaluationRow,
    IslandEventRow,
    LLMCallRow,
    ProposalRow,
    RunEventRow,
    RunRow,
)

_APPEND_ONLY = (EvaluationRow, CandidateRow, ProposalRow, LLMCallRow, IslandEventRow, RunEventRow)


@dataclass(frozen=True)
class LibraryState:
    token: str  # differs whenever the library gained rows or a run changed status
    statuses: dict[str, str]  # run id -> status


def library_state(lib: SolutionLibrary) -> LibraryState:
    def fn(s: Session) -> LibraryState:
        parts = [str(s.scalar(select(func.max(t.id))) or 0) for t in _APPEND_ONLY]
        statuses = s.execute(select(RunRow.id, RunRow.status).order_by(RunRow.id)).all()
        digest = hashlib.sha256(repr(statuses).encode()).hexdigest()[:12]
        return LibraryState(".".join([*parts, digest]), {r: st for r, st in statuses})

    return lib.read(fn)


def library_version(lib: SolutionLibrary) -> str:
    """A short string that differs whenever the library gained rows or a run changed status."""
    return library_state(lib).token
