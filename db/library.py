"""``SolutionLibrary``: the only API the rest of evokernel uses to read and write the library.

It speaks in :mod:`evokernel.types` dataclasses, never in rows, and each method is one short
transaction (see :class:`~evokernel.db.connection.SessionScope`). Writes that must happen
together for exact resume happen in one method: ``add_candidate`` creates the candidate and
closes its proposal atomically, ``record_evaluation`` writes the evaluation and the candidate's
status together.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evokernel.db.connection import SessionScope, make_engine, normalize_url, redact, upgrade
from evokernel.db.models import (
    BaselineRow,
    CandidateParentRow,
    CandidateRow,
    EvaluationRow,
    IslandEventRow,
    IslandRow,
    LLMCallRow,
    ProposalRow,
    RunEventRow,
    RunRow,
    RunTaskRow,
    TaskRow,
    utcnow,
)
from evokernel.exceptions import LibraryError, RunNotFoundError
from evokernel.types import (
    Candidate,
    Evaluation,
    IslandEvent,
    LLMCall,
    Proposal,
    RunInfo,
    Scored,
    Status,
    Task,
)

_EVAL_FIELDS = tuple(Evaluation.__dataclass_fields__)
# Built once: constructing statements per call was a third of the per-candidate cost.
_PROPOSAL_DONE = update(ProposalRow).where(ProposalRow.id == bindparam("proposal_id")).values(state="done")
_CANDIDATE_STATUS = (
    update(CandidateRow)
    .where(CandidateRow.id == bindparam("candidate_id"))
    .values(status=bindparam("new_status"), reason=bindparam("new_reason"), speedup=bindparam("new_speedup"))
)


class SolutionLibrary:
    """Runs, tasks, islands, proposals, candidates, evaluations, LLM calls, baselines, events."""

    def __init__(self, url_or_path: str | Path, *, migrate: bool = True) -> None:
        self.url = upgrade(url_or_path) if migrate else normalize_url(url_or_path)
        self._engine = make_engine(self.url)
        self._scope = SessionScope(self._engine)
        self._task_ids: dict[tuple[str, str], int] = {}

    def __repr__(self) -> str:
        return f"SolutionLibrary({redact(self.url)!r})"

    def close(self) -> None:
        self._engine.dispose()

    # ---- runs -------------------------------------------------------------------------------
    def create_run(self, name: str, config: dict[str, Any], seed: int = 0) -> str:
        run_id = uuid.uuid4().hex[:12]
        self._scope.run(lambda s: s.add(RunRow(id=run_id, name=name, config=config, seed=seed)))
        return run_id

    def get_run(self, run_id: str) -> RunInfo:
        def fn(s: Session) -> RunInfo:
            row = s.get(RunRow, run_id)
            if row is None:
                raise RunNotFoundError(f"no run {run_id!r} in the library {redact(self.url)}")
            return _run_info(row)

        return self._scope.run(fn)

    def list_runs(self) -> list[RunInfo]:
        return self._scope.run(
            lambda s: [_run_info(r) for r in s.scalars(select(RunRow).order_by(RunRow.created_at))]
        )

    def set_run_status(self, run_id: str, status: str) -> None:
        finished = utcnow() if status in ("finished", "failed", "interrupted") else None
        self._scope.run(
            lambda s: s.execute(
                update(RunRow).where(RunRow.id == run_id).values(status=status, finished_at=finished)
            )
        )

    # ---- tasks and islands ------------------------------------------------------------------
    def register_task(self, run_id: str, task: Task, position: int = 0) -> None:
        """Store the task (deduplicated by name and source hash) and attach it to the run."""

        def fn(s: Session) -> int:
            row = s.scalars(
                select(TaskRow).where(TaskRow.name == task.name, TaskRow.source_hash == task.source_hash)
            ).first()
            if row is None:
                meta = {"variants": list(task.variants), "small": task.small, "seed_path": task.seed_path}
                row = TaskRow(
                    name=task.name,
                    source_hash=task.source_hash,
                    source=task.source,
                    path=task.path,
                    level=task.level,
                    meta=meta,
                )
                s.add(row)
                s.flush()
            if s.get(RunTaskRow, (run_id, row.id)) is None:
                s.add(RunTaskRow(run_id=run_id, task_id=row.id, name=task.name, position=position))
            return row.id

        # Runs of a sweep register the same tasks at the same moment: between our SELECT and INSERT
        # another writer may insert the same (name, hash) and we hit uq_tasks_name_hash. Its row is
        # committed by the time the constraint fires (PostgreSQL waits for it, SQLite writes one at a
        # time), so a second try finds it. Other integrity errors fail the same way on the retry.
        for attempt in range(2):
            try:
                self._task_ids[(run_id, task.name)] = self._scope.run(fn)
                return
            except LibraryError as exc:
                if attempt or not isinstance(exc.__cause__, IntegrityError):
                    raise

    def run_task_hashes(self, run_id: str) -> dict[str, str]:
        """Task name -> source hash for a run, to check that a resumed run sees the same tasks."""
        stmt = (
            select(RunTaskRow.name, TaskRow.source_hash)
            .join(TaskRow, TaskRow.id == RunTaskRow.task_id)
            .where(RunTaskRow.run_id == run_id)
        )
        return self._scope.run(lambda s: {n: h for n, h in s.execute(stmt)})

    def _task_id(self, run_id: str, task: str) -> int:
        key = (run_id, task)
        if key not in self._task_ids:
            stmt = select(RunTaskRow.task_id).where(RunTaskRow.run_id == run_id, RunTaskRow.name == task)
            found = self._scope.run(lambda s: s.scalars(stmt).first())
            if found is None:
                raise LibraryError(f"task {task!r} is not registered with run {run_id}")
            self._task_ids[key] = found
        return self._task_ids[key]

    def ensure_islands(self, run_id: str, task: str, count: int) -> list[int]:
        task_id = self._task_id(run_id, task)

        def fn(s: Session) -> list[int]:
            have = set(
                s.scalars(
                    select(IslandRow.index).where(IslandRow.run_id == run_id, IslandRow.task_id == task_id)
                )
            )
            for index in range(count):
                if index not in have:
                    s.add(IslandRow(run_id=run_id, task_id=task_id, index=index))
            return list(range(max(count, len(have))))

        return self._scope.run(fn)

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
        self, run_id: str, task: str, state: str | None = None, generation: int | None = None
    ) -> int:
        task_id = self._task_id(run_id, task)
        stmt = select(func.count()).where(ProposalRow.run_id == run_id, ProposalRow.task_id == task_id)
        if state is not None:
            stmt = stmt.where(ProposalRow.state == state)
        if generation is not None:
            stmt = stmt.where(ProposalRow.generation == generation)
        return int(self._scope.run(lambda s: s.scalar(stmt)) or 0)

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
        One Core query, for strategies that rank whole populations (PIKE-O, the random walk):
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

    # ---- island events ------------------------------------------------------------------------
    def record_island_events(self, run_id: str, task: str, events: list[IslandEvent]) -> None:
        """Record the membership changes of one generation boundary in one transaction, so a crash
        leaves either all of them or none (the strategy then decides them again, identically)."""
        task_id = self._task_id(run_id, task)
        rows = [
            IslandEventRow(
                run_id=run_id,
                task_id=task_id,
                generation=e.generation,
                kind=e.kind,
                island=e.island,
                candidate_id=e.candidate,
                from_island=e.from_island,
            )
            for e in events
        ]
        self._scope.run(lambda s: s.add_all(rows))

    def island_events(self, run_id: str, task: str) -> list[IslandEvent]:
        task_id = self._task_id(run_id, task)
        stmt = (
            select(IslandEventRow)
            .where(IslandEventRow.run_id == run_id, IslandEventRow.task_id == task_id)
            .order_by(IslandEventRow.id)
        )
        return self._scope.run(
            lambda s: [
                IslandEvent(r.kind, r.generation, r.island, r.candidate_id, r.from_island)
                for r in s.scalars(stmt)
            ]
        )

    # ---- llm calls, baselines, events ---------------------------------------------------------
    def record_llm_call(self, run_id: str, proposal_id: int | None, call: LLMCall) -> None:
        values = {k: getattr(call, k) for k in LLMCall.__dataclass_fields__}
        self._scope.run(lambda s: s.add(LLMCallRow(run_id=run_id, proposal_id=proposal_id, **values)))

    def llm_usage(self, run_id: str) -> dict[str, float]:
        stmt = select(
            func.count(),
            func.coalesce(func.sum(LLMCallRow.prompt_tokens), 0),
            func.coalesce(func.sum(LLMCallRow.completion_tokens), 0),
            func.coalesce(func.sum(LLMCallRow.cost_usd), 0.0),
        ).where(LLMCallRow.run_id == run_id)
        calls, tin, tout, cost = self._scope.run(lambda s: s.execute(stmt).one())
        return {"calls": calls, "prompt_tokens": tin, "completion_tokens": tout, "cost_usd": float(cost)}

    def max_proposal_cost(self, run_id: str) -> float:
        """The largest USD cost any one proposal's LLM calls added up to (0.0 before any)."""
        per = (
            select(func.sum(LLMCallRow.cost_usd).label("cost"))
            .where(LLMCallRow.run_id == run_id)
            .group_by(LLMCallRow.proposal_id)
            .subquery()
        )
        found = self._scope.run(lambda s: s.scalar(select(func.max(per.c.cost))))
        return float(found or 0.0)

    def llm_calls(self, run_id: str) -> list[LLMCall]:
        stmt = select(LLMCallRow).where(LLMCallRow.run_id == run_id).order_by(LLMCallRow.id)
        fields = LLMCall.__dataclass_fields__
        return self._scope.run(
            lambda s: [LLMCall(**{k: getattr(r, k) for k in fields}) for r in s.scalars(stmt)]
        )

    def get_baseline(
        self, task_hash: str, device: str, versions: str, kind: str, variant: str = ""
    ) -> float | None:
        stmt = select(BaselineRow.median_ms).where(
            BaselineRow.task_hash == task_hash,
            BaselineRow.device == device,
            BaselineRow.versions == versions,
            BaselineRow.kind == kind,
            BaselineRow.variant == variant,
        )
        return self._scope.run(lambda s: s.scalar(stmt))

    def put_baseline(
        self,
        task_hash: str,
        device: str,
        versions: str,
        kind: str,
        median_ms: float,
        iqr_ms: float = 0.0,
        variant: str = "",
    ) -> None:
        key = {
            "task_hash": task_hash,
            "device": device,
            "versions": versions,
            "kind": kind,
            "variant": variant,
        }

        def fn(s: Session) -> None:
            row = s.scalars(select(BaselineRow).filter_by(**key)).first()
            if row is None:
                s.add(BaselineRow(**key, median_ms=median_ms, iqr_ms=iqr_ms))
            else:
                row.median_ms, row.iqr_ms, row.created_at = median_ms, iqr_ms, utcnow()

        self._scope.run(fn)

    def log_event(
        self, run_id: str, kind: str, message: str = "", data: dict[str, Any] | None = None
    ) -> None:
        self._scope.run(
            lambda s: s.add(RunEventRow(run_id=run_id, kind=kind, message=message, data=data or {}))
        )

    def events(self, run_id: str) -> list[tuple[str, str, dict[str, Any]]]:
        stmt = select(RunEventRow).where(RunEventRow.run_id == run_id).order_by(RunEventRow.id)
        return self._scope.run(lambda s: [(r.kind, r.message, r.data) for r in s.scalars(stmt)])


def _run_info(row: RunRow) -> RunInfo:
    return RunInfo(
        id=row.id,
        name=row.name,
        config=row.config,
        seed=row.seed,
        status=row.status,
        created_at=row.created_at.isoformat(timespec="seconds"),
        finished_at=row.finished_at.isoformat(timespec="seconds") if row.finished_at else None,
    )


def _proposal(row: ProposalRow, task: str) -> Proposal:
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


def _candidate(row: CandidateRow, task: str, parents: tuple[int, ...]) -> Candidate:
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


def _eval_columns(evaluation: Evaluation) -> dict[str, Any]:
    out = {k: getattr(evaluation, k) for k in _EVAL_FIELDS}
    out["status"] = evaluation.status.value
    return out


def _scored(s: Session, rows: list[CandidateRow], task: str) -> list[Scored]:
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
        out.append(Scored(_candidate(r, task, tuple(parents.get(r.id, ()))), ev))
    return out
