"""``SolutionLibrary``: the only API the rest of evokernel uses to read and write the library.

It speaks in :mod:`evokernel.types` dataclasses, never in rows, and each method is one short
transaction (see :class:`~evokernel.db.connection.SessionScope`). Writes that must happen
together for exact resume happen in one method: ``add_candidate`` creates the candidate and
closes its proposal atomically, ``record_evaluation`` writes the evaluation and the candidate's
status together.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Connection, bindparam, case, func, insert, select, update
from sqlalchemy.orm import Session

from evokernel.db.accounting import AccountingMixin
from evokernel.db.connection import SessionScope, make_engine, normalize_url, redact, upgrade
from evokernel.db.exemplars import ExemplarsMixin
from evokernel.db.model_stats import ModelStatsMixin
from evokernel.db.models import (
    CandidateParentRow,
    CandidateRow,
    EvaluationRow,
    ProposalRow,
    RunTaskRow,
)
from evokernel.db.proposals import ProposalsMixin
from evokernel.db.rows import candidate_status as _candidate_status
from evokernel.db.rows import eval_columns as _eval_columns
from evokernel.db.rows import scored as _scored
from evokernel.db.urls import check_url
from evokernel.exceptions import LibraryError
from evokernel.types import (
    Candidate,
    Evaluation,
    Proposal,
    Scored,
    Status,
)

T = TypeVar("T")

# Built once: constructing statements per call was a third of the per-candidate cost.
_PROPOSAL_DONE = update(ProposalRow).where(ProposalRow.id == bindparam("proposal_id")).values(state="done")
_CANDIDATE_STATUS = (
    update(CandidateRow)
    .where(CandidateRow.id == bindparam("candidate_id"))
    .values(
        status=bindparam("new_status"),
        reason=bindparam("new_reason"),
        speedup=bindparam("new_speedup"),
        stage=bindparam("new_stage"),
        reason_key=bindparam("new_reason_key"),
        # Set once, by the first evaluation (SET expressions read the row as it was).
        first_evaluation_id=func.coalesce(CandidateRow.first_evaluation_id, bindparam("evaluation_id")),
        first_speedup=case(
            (CandidateRow.first_evaluation_id.is_(None), bindparam("new_speedup")),
            else_=CandidateRow.first_speedup,
        ),
        bottleneck=bindparam("new_bottleneck"),
        speedup_low=bindparam("new_speedup_low"),
        speedup_high=bindparam("new_speedup_high"),
        confirmed=bindparam("new_confirmed"),
    )
)


class SolutionLibrary(ProposalsMixin, AccountingMixin, ModelStatsMixin, ExemplarsMixin):
    """Runs, tasks, islands, proposals, candidates, evaluations, LLM calls, baselines, events.

    Runs/tasks/islands live in :mod:`evokernel.db.runs`, proposals in :mod:`evokernel.db.proposals`,
    accounting in :mod:`evokernel.db.accounting`, the model selector's state in
    :mod:`evokernel.db.model_stats`, other tasks' best kernels in :mod:`evokernel.db.exemplars`,
    the island index (bounded reads of island populations) in :mod:`evokernel.db.index`; this
    module keeps candidates and evaluations."""

    def __init__(self, url_or_path: str | Path, *, migrate: bool = True, read_only: bool = False) -> None:
        """``read_only``: the database refuses writes and nothing migrates (:mod:`evokernel.db.readonly`)."""
        if read_only:
            from evokernel.db.readonly import check_schema, make_readonly_engine, readonly_url

            self.url = readonly_url(url_or_path)
            self._engine = make_readonly_engine(self.url)
            check_schema(self._engine, self.url)
        else:
            check_url(str(url_or_path))  # a bad URL is one line naming it, not a driver's traceback
            self.url = upgrade(url_or_path) if migrate else normalize_url(url_or_path)
            self._engine = make_engine(self.url)
        self._scope = SessionScope(self._engine)
        self._task_ids: dict[tuple[str, str], int] = {}

    def __repr__(self) -> str:
        return f"SolutionLibrary({redact(self.url)!r})"

    def close(self) -> None:
        self._engine.dispose()

    def read(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn(session)`` in one short transaction with the library's retry: the entry point of
        :mod:`evokernel.analysis`, whose queries read rows the typed API does not expose."""
        return self._scope.run(fn)

    # ---- candidates and evaluations ---------------------------------------------------------
    def add_candidate(self, run_id: str, proposal: Proposal, source: str) -> Candidate:
        """Create the candidate of ``proposal`` and mark the proposal done, in one transaction."""
        from evokernel.types import source_hash

        assert proposal.id is not None, "record the proposal before its candidate"
        task_id = self._task_id(run_id, proposal.task)
        values = {
            "run_id": run_id,
            "task_id": task_id,
            "proposal_id": proposal.id,
            "island": proposal.island,
            "generation": proposal.generation,
            "operator": proposal.operator,
            "source": source,
            "source_hash": source_hash(source),
            "branch": proposal.branch,
        }

        # Core inserts, not ORM objects: this runs once per candidate, and the unit of work's
        # bookkeeping was most of its cost (engine-overhead benchmark).
        def fn(conn: Connection) -> Candidate:
            inserted = conn.execute(insert(CandidateRow), values).inserted_primary_key
            assert inserted is not None
            cid = int(inserted[0])
            if proposal.parents:
                parents = [
                    {"child_id": cid, "parent_id": p, "rank": r} for r, p in enumerate(proposal.parents)
                ]
                conn.execute(insert(CandidateParentRow), parents)
            conn.execute(_PROPOSAL_DONE, {"proposal_id": proposal.id})
            return Candidate(
                id=cid,
                run_id=run_id,
                task=proposal.task,
                proposal_id=proposal.id or 0,
                island=proposal.island,
                generation=proposal.generation,
                operator=proposal.operator,
                parents=proposal.parents,
                source=source,
                branch=proposal.branch,
            )

        return self._scope.run_core(fn)

    def record_evaluation(self, candidate_id: int, evaluation: Evaluation) -> None:
        row = {"candidate_id": candidate_id, **_eval_columns(evaluation)}
        status = {"candidate_id": candidate_id, **_candidate_status(evaluation, row["bottleneck"])}

        def fn(conn: Connection) -> None:
            inserted = conn.execute(insert(EvaluationRow), row).inserted_primary_key
            if inserted is None:  # both backends return it; without it first_evaluation_id is lost
                raise LibraryError("the database returned no id for the new evaluation")
            conn.execute(_CANDIDATE_STATUS, {**status, "evaluation_id": inserted[0]})

        self._scope.run_core(fn)

    def candidates(
        self,
        run_id: str,
        task: str,
        *,
        island: int | None = None,
        status: Status | None = None,
        generation: int | None = None,
        before: int | None = None,
    ) -> list[Scored]:
        """Candidates of a run's task with their latest evaluation, oldest first (``before``: only
        generations below it)."""
        task_id = self._task_id(run_id, task)
        stmt = select(CandidateRow).where(CandidateRow.run_id == run_id, CandidateRow.task_id == task_id)
        if island is not None:
            stmt = stmt.where(CandidateRow.island == island)
        if status is not None:
            stmt = stmt.where(CandidateRow.status == status.value)
        if generation is not None:
            stmt = stmt.where(CandidateRow.generation == generation)
        if before is not None:
            stmt = stmt.where(CandidateRow.generation < before)
        # Sorted here for the same reason as in proposals(): ORDER BY id would walk the primary key.
        return self._scope.run(lambda s: _scored(s, sorted(s.scalars(stmt), key=lambda r: r.id), task))

    def summaries(self, run_id: str, task: str, *, before: int | None = None) -> list[Scored]:
        """Every candidate of a run's task, oldest first, as a light :class:`Scored`: no parents,
        and an evaluation holding only the status, reason, speedup and its interval the candidate row keeps.
        One Core query, for reports and checks that rank whole populations (strategies read the
        island index instead, :mod:`evokernel.db.index`):
        about 30x cheaper per row than :meth:`candidates`, which loads lineage and evaluations."""
        task_id = self._task_id(run_id, task)
        c = CandidateRow
        cols = (c.id, c.proposal_id, c.island, c.generation, c.operator, c.source, c.branch)
        figures = (c.status, c.reason, c.speedup, c.speedup_low, c.speedup_high, c.confirmed)
        stmt = select(*cols, *figures).where(c.run_id == run_id, c.task_id == task_id)
        if before is not None:
            stmt = stmt.where(c.generation < before)

        def fn(s: Session) -> list[Scored]:
            out = []
            for cid, pid, island, gen, op, source, branch, status, reason, sp, lo, hi, conf in s.execute(
                stmt
            ):
                cand = Candidate(cid, run_id, task, pid, island, gen, op, (), source, branch or 0)
                ev = None
                if status != "pending":
                    figure = {
                        "speedup_eager": sp,
                        "speedup_low": lo,
                        "speedup_high": hi,
                        "confirmed": bool(conf),
                    }
                    ev = Evaluation(Status(status), reason, **figure)
                out.append(Scored(cand, ev))
            return sorted(out, key=lambda sc: sc.candidate.id)

        return self._scope.run(fn)

    def top(
        self, run_id: str, task: str, k: int, island: int | None = None, before: int | None = None
    ) -> list[Scored]:
        """The k fastest correct candidates, best first (ties: oldest first); ``before``: only
        generations below it."""
        task_id = self._task_id(run_id, task)
        stmt = select(CandidateRow).where(
            CandidateRow.run_id == run_id,
            CandidateRow.task_id == task_id,
            CandidateRow.status == Status.CORRECT.value,
        )
        if island is not None:
            stmt = stmt.where(CandidateRow.island == island)
        if before is not None:
            # ``+ 0``: keeps SQLite on the speedup index (it would take the generation index, then sort).
            stmt = stmt.where(CandidateRow.generation + 0 < before)
        # A correct candidate without a speedup (no eager baseline) ranks below every measured one.
        # Two queries rather than NULLS LAST, which SQLite cannot serve from the (run, task, status,
        # speedup) index: with it, top-k sorted every correct row (~1 s at 1M candidates).
        measured = stmt.where(CandidateRow.speedup.is_not(None))
        measured = measured.order_by(CandidateRow.speedup.desc(), CandidateRow.id).limit(k)
        unmeasured = stmt.where(CandidateRow.speedup.is_(None)).order_by(CandidateRow.id)

        def fn(s: Session) -> list[Scored]:
            rows = list(s.scalars(measured))
            if len(rows) < k:
                rows += list(s.scalars(unmeasured.limit(k - len(rows))))
            return _scored(s, rows, task)

        return self._scope.run(fn)

    def pending_candidates(self, run_id: str, task: str) -> list[Candidate]:
        return [sc.candidate for sc in self.candidates(run_id, task, status=Status.PENDING)]

    def get_candidate(self, candidate_id: int) -> Scored:
        def fn(s: Session) -> Scored:
            row = s.get(CandidateRow, candidate_id)
            if row is None:
                raise LibraryError(f"no candidate {candidate_id}")
            name = s.scalar(
                select(RunTaskRow.name).where(
                    RunTaskRow.run_id == row.run_id, RunTaskRow.task_id == row.task_id
                )
            )
            return _scored(s, [row], name or "")[0]

        return self._scope.run(fn)

    def count_evaluated(self, run_id: str, task: str | None = None) -> int:
        """Candidates with a final status (each counts once, however often it was evaluated)."""
        stmt = select(func.count()).where(CandidateRow.run_id == run_id, CandidateRow.status != "pending")
        if task is not None:
            stmt = stmt.where(CandidateRow.task_id == self._task_id(run_id, task))
        return int(self._scope.run(lambda s: s.scalar(stmt)) or 0)

    def source_hashes(self, run_id: str, task: str) -> dict[str, tuple[int, int]]:
        """Source hash -> (generation, proposal seq) of the first candidate with it (duplicate checks)."""
        task_id = self._task_id(run_id, task)
        stmt = (
            select(CandidateRow.source_hash, CandidateRow.generation, ProposalRow.seq)
            .join(ProposalRow, ProposalRow.id == CandidateRow.proposal_id)
            .where(CandidateRow.run_id == run_id, CandidateRow.task_id == task_id)
            .order_by(CandidateRow.generation, ProposalRow.seq)
        )

        def fn(s: Session) -> dict[str, tuple[int, int]]:
            out: dict[str, tuple[int, int]] = {}
            for h, gen, seq in s.execute(stmt):
                out.setdefault(h, (int(gen), int(seq)))
            return out

        return self._scope.run(fn)
