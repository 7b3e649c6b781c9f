"""``SolutionLibrary``: the only API the rest of evokernel uses to read and write the library.

It speaks in :mod:`evokernel.types` dataclasses, never in rows, and each method is one short
transaction (see :class:`~evokernel.db.connection.SessionScope`). Writes that must happen
together for exact resume happen in one method: ``add_candidate`` creates the candidate and
closes its proposal atomically, ``record_evaluation`` writes the evaluation and the candidate's
status together.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy.orm import Session

from evokernel.db.accounting import AccountingMixin
from evokernel.db.connection import SessionScope, make_engine, normalize_url, redact, upgrade
from evokernel.db.models import (
    CandidateParentRow,
    CandidateRow,
    EvaluationRow,
    ProposalRow,
    RunTaskRow,
)
from evokernel.db.rows import eval_columns as _eval_columns
from evokernel.db.rows import proposal as _proposal
from evokernel.db.rows import scored as _scored
from evokernel.exceptions import LibraryError
from evokernel.types import (
    Candidate,
    Evaluation,
    Proposal,
    Scored,
    Status,
)

# Built once: constructing statements per call was a third of the per-candidate cost.
_PROPOSAL_DONE = update(ProposalRow).where(ProposalRow.id == bindparam("proposal_id")).values(state="done")
_CANDIDATE_STATUS = (
    update(CandidateRow)
    .where(CandidateRow.id == bindparam("candidate_id"))
    .values(status=bindparam("new_status"), reason=bindparam("new_reason"), speedup=bindparam("new_speedup"))
)


class SolutionLibrary(AccountingMixin):
    """Runs, tasks, islands, proposals, candidates, evaluations, LLM calls, baselines, events.

    Runs/tasks/islands live in :mod:`evokernel.db.runs`, accounting in :mod:`evokernel.db.accounting`,
    the island index (bounded reads of island populations) in :mod:`evokernel.db.index`; this
    module keeps proposals, candidates and evaluations, the rows resume depends on."""

    def __init__(self, url_or_path: str | Path, *, migrate: bool = True) -> None:
        self.url = upgrade(url_or_path) if migrate else normalize_url(url_or_path)
        self._engine = make_engine(self.url)
        self._scope = SessionScope(self._engine)
        self._task_ids: dict[tuple[str, str], int] = {}

    def __repr__(self) -> str:
        return f"SolutionLibrary({redact(self.url)!r})"

    def close(self) -> None:
        self._engine.dispose()

    # ---- proposals and candidates -----------------------------------------------------------
    def add_proposal(self, run_id: str, proposal: Proposal) -> Proposal:
        """Record a proposal before any work starts on it; assigns ``id`` and the next ``seq``."""
        return self.add_proposals(run_id, [proposal])[0]

    def add_proposals(self, run_id: str, proposals: list[Proposal]) -> list[Proposal]:
        """Record proposals of one task in one transaction (all or none survive a crash)."""
        if not proposals:
            return []
        task = proposals[0].task
        if any(p.task != task for p in proposals):
            raise LibraryError("add_proposals records the proposals of one task at a time")
        task_id = self._task_id(run_id, task)

        def fn(s: Session) -> list[Proposal]:
            # Lock the (run, task) row before reading max(seq), so two writers (threads, or drivers
            # sharing a cluster library) cannot both read the same max and collide on
            # uq_proposals_run_task_seq. A no-op UPDATE does this on both backends: a row lock held
            # to commit on PostgreSQL (whose next statement, under READ COMMITTED, then sees the other
            # writer's row), the database write lock on SQLite (whose driver would otherwise run the
            # SELECT outside any transaction). SELECT ... FOR UPDATE would be a no-op on SQLite.
            s.execute(
                update(RunTaskRow)
                .where(RunTaskRow.run_id == run_id, RunTaskRow.task_id == task_id)
                .values(position=RunTaskRow.position)
            )
            last = s.scalar(
                select(func.max(ProposalRow.seq)).where(
                    ProposalRow.run_id == run_id, ProposalRow.task_id == task_id
                )
            )
            first = 0 if last is None else last + 1
            rows = [
                ProposalRow(
                    run_id=run_id,
                    task_id=task_id,
                    seq=first + i,
                    island=proposal.island,
                    generation=proposal.generation,
                    operator=proposal.operator,
                    parents=list(proposal.parents),
                    idea=proposal.idea,
                    branch=proposal.branch,
                    count=proposal.count,
                    ideas=[],
                )
                for i, proposal in enumerate(proposals)
            ]
            s.add_all(rows)
            s.flush()
            return [_proposal(row, task) for row in rows]

        return self._scope.run(fn)

    def open_proposals(self, run_id: str, task: str) -> list[Proposal]:
        """Proposals whose mutation never finished (e.g. the driver was killed): to be re-run."""
        task_id = self._task_id(run_id, task)
        stmt = (
            select(ProposalRow)
            .where(ProposalRow.run_id == run_id, ProposalRow.task_id == task_id, ProposalRow.state == "open")
            .order_by(ProposalRow.seq)
        )
        return self._scope.run(lambda s: [_proposal(r, task) for r in s.scalars(stmt)])

    def fail_proposal(self, proposal_id: int, reason: str, raw_reply: str = "") -> None:
        self._scope.run(
            lambda s: s.execute(
                update(ProposalRow)
                .where(ProposalRow.id == proposal_id)
                .values(state="failed", reason=reason, raw_reply=raw_reply)
            )
        )

    def finish_ideas(self, proposal_id: int, ideas: tuple[str, ...], raw_reply: str = "") -> None:
        """Close an ``ideas`` proposal with the ideas it produced (it has no candidate)."""
        self._scope.run(
            lambda s: s.execute(
                update(ProposalRow)
                .where(ProposalRow.id == proposal_id)
                .values(state="done", ideas=list(ideas), raw_reply=raw_reply)
            )
        )

    def proposals(
        self, run_id: str, task: str, *, generation: int | None = None, operator: str | None = None
    ) -> list[Proposal]:
        """Proposals of a run's task (all states), in recording order."""
        task_id = self._task_id(run_id, task)
        stmt = select(ProposalRow).where(ProposalRow.run_id == run_id, ProposalRow.task_id == task_id)
        if generation is not None:
            stmt = stmt.where(ProposalRow.generation == generation)
        if operator is not None:
            stmt = stmt.where(ProposalRow.operator == operator)
        # Sorted here, not by ORDER BY seq: that would make SQLite walk the (run, task, seq) key of
        # every proposal instead of the generation index (benchmark: 2 ms at 10k rows, O(N)).
        return self._scope.run(
            lambda s: [_proposal(r, task) for r in sorted(s.scalars(stmt), key=lambda r: r.seq)]
        )

    def count_proposals(
        self,
        run_id: str,
        task: str,
        state: str | None = None,
        generation: int | None = None,
        exclude_operator: str | None = None,
    ) -> int:
        """Proposals of a run's task (optionally in a state, of a generation, not of an operator)."""
        task_id = self._task_id(run_id, task)
        stmt = select(func.count()).where(ProposalRow.run_id == run_id, ProposalRow.task_id == task_id)
        if state is not None:
            stmt = stmt.where(ProposalRow.state == state)
        if generation is not None:
            stmt = stmt.where(ProposalRow.generation == generation)
        if exclude_operator is not None:
            stmt = stmt.where(ProposalRow.operator != exclude_operator)
        # A bare connection: strategies ask this at every generation boundary (an ORM session
        # cost three times the query).
        return int(self._scope.run_core(lambda c: c.execute(stmt).scalar()) or 0)

    def last_generation(self, run_id: str, task: str) -> int:
        """Highest generation any proposal of the task was made for; -1 before the first."""
        task_id = self._task_id(run_id, task)
        stmt = select(func.max(ProposalRow.generation)).where(
            ProposalRow.run_id == run_id, ProposalRow.task_id == task_id
        )
        found = self._scope.run(lambda s: s.scalar(stmt))
        return -1 if found is None else int(found)

    def trailing_failed_proposals(self, run_id: str, task: str, limit: int = 1000) -> int:
        """How many of the task's latest candidate proposals in a row failed to produce a candidate
        (counting stops at ``limit``; ``ideas`` proposals, which never make candidates, are skipped)."""
        task_id = self._task_id(run_id, task)
        stmt = (
            select(ProposalRow.state)
            .where(
                ProposalRow.run_id == run_id,
                ProposalRow.task_id == task_id,
                ProposalRow.state != "open",
                ProposalRow.operator != "ideas",
            )
            .order_by(ProposalRow.seq.desc())
            .limit(limit)
        )
        states = self._scope.run(lambda s: list(s.scalars(stmt)))
        count = 0
        for state in states:
            if state != "failed":
                break
            count += 1
        return count

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
        status = {
            "candidate_id": candidate_id,
            "new_status": evaluation.status.value,
            "new_reason": evaluation.reason,
            "new_speedup": evaluation.speedup_eager if evaluation.ok else None,
        }

        def fn(conn: Connection) -> None:
            conn.execute(insert(EvaluationRow), row)
            conn.execute(_CANDIDATE_STATUS, status)

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
        and an evaluation holding only the status, reason and speedup the candidate row keeps.
        One Core query, for reports and checks that rank whole populations (strategies read the
        island index instead, :mod:`evokernel.db.index`):
        about 30x cheaper per row than :meth:`candidates`, which loads lineage and evaluations."""
        task_id = self._task_id(run_id, task)
        c = CandidateRow
        cols = (
            c.id,
            c.proposal_id,
            c.island,
            c.generation,
            c.operator,
            c.source,
            c.status,
            c.reason,
            c.speedup,
        )
        stmt = select(*cols, c.branch).where(c.run_id == run_id, c.task_id == task_id)
        if before is not None:
            stmt = stmt.where(c.generation < before)

        def fn(s: Session) -> list[Scored]:
            out = []
            for cid, pid, island, gen, op, source, status, reason, speedup, branch in s.execute(stmt):
                cand = Candidate(cid, run_id, task, pid, island, gen, op, (), source, branch or 0)
                ev = (
                    None if status == "pending" else Evaluation(Status(status), reason, speedup_eager=speedup)
                )
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
