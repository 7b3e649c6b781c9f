"""Island events, LLM calls, baselines and run events: what a run accounts for besides candidates."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.orm import Session

from evokernel.db.index import IslandIndexMixin
from evokernel.db.models import (
    BaselineRow,
    IslandEventRow,
    IslandIndexRow,
    LLMCallRow,
    ProposalRow,
    RunEventRow,
    TaskProfileRow,
    utcnow,
)
from evokernel.types import (
    IslandEvent,
    LLMCall,
)


class AccountingMixin(IslandIndexMixin):
    # ---- island events ------------------------------------------------------------------------
    def record_island_events(self, run_id: str, task: str, events: list[IslandEvent]) -> None:
        """Record the membership changes of one generation boundary in one transaction, so a crash
        leaves either all of them or none (the strategy then decides them again, identically)."""
        task_id = self._task_id(run_id, task)
        rows = [
            {
                "run_id": run_id,
                "task_id": task_id,
                "generation": e.generation,
                "kind": e.kind,
                "island": e.island,
                "candidate_id": e.candidate,
                "from_island": e.from_island,
            }
            for e in events
        ]
        if not rows:
            return
        # The island index folds events once per generation; events of a generation it already
        # folded (recorded late, by a caller that planned before recording) make it rebuild.
        stale = delete(IslandIndexRow).where(
            IslandIndexRow.run_id == run_id,
            IslandIndexRow.task_id == task_id,
            IslandIndexRow.events_through >= min(e.generation for e in events),
        )

        def fn(conn: Connection) -> None:
            conn.execute(insert(IslandEventRow), rows)  # one executemany: a migration can be hundreds
            conn.execute(stale)

        self._scope.run_core(fn)

    def has_island_events(self, run_id: str, task: str, generation: int) -> bool:
        """Whether any island event is recorded for ``generation`` (one indexed lookup)."""
        task_id = self._task_id(run_id, task)
        stmt = (
            select(IslandEventRow.id)
            .where(
                IslandEventRow.run_id == run_id,
                IslandEventRow.task_id == task_id,
                IslandEventRow.generation == generation,
            )
            .limit(1)
        )
        return self._scope.run_core(lambda c: c.execute(stmt).scalar()) is not None

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
        # The proposal's task, copied for index-only usage reports (migration 0005).
        task = select(ProposalRow.task_id).where(ProposalRow.id == proposal_id).scalar_subquery()
        row = {"run_id": run_id, "proposal_id": proposal_id, "task_id": task, **values}
        self._scope.run_core(lambda conn: conn.execute(insert(LLMCallRow).values(row)))

    def llm_usage(self, run_id: str) -> dict[str, float]:
        stmt = select(
            func.count(),
            func.coalesce(func.sum(LLMCallRow.prompt_tokens), 0),
            func.coalesce(func.sum(LLMCallRow.completion_tokens), 0),
            func.coalesce(func.sum(LLMCallRow.cost_usd), 0.0),
            func.count().filter(LLMCallRow.outcome != "ok"),
        ).where(LLMCallRow.run_id == run_id)
        calls, tin, tout, cost, failed = self._scope.run(lambda s: s.execute(stmt).one())
        return {
            "calls": calls,
            "failed": failed,
            "prompt_tokens": tin,
            "completion_tokens": tout,
            "cost_usd": float(cost),
        }

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

    def put_task_profile(
        self, task_hash: str, device: str, versions: str, level: str, profile: dict[str, Any]
    ) -> None:
        """Keep a task's reference profile (the latest one per device, versions and level)."""
        key = {"task_hash": task_hash, "device": device, "versions": versions, "level": level}

        def fn(s: Session) -> None:
            row = s.scalars(select(TaskProfileRow).filter_by(**key)).first()
            if row is None:
                s.add(TaskProfileRow(**key, profile=profile))
            else:
                row.profile, row.created_at = profile, utcnow()

        self._scope.run(fn)

    def task_profile(
        self, task_hash: str, device: str | None = None, level: str | None = None
    ) -> dict[str, Any] | None:
        """The latest reference profile of a task (on ``device``, at ``level`` when given), or None."""
        stmt = select(TaskProfileRow.profile).where(TaskProfileRow.task_hash == task_hash)
        if device is not None:
            stmt = stmt.where(TaskProfileRow.device == device)
        if level is not None:
            stmt = stmt.where(TaskProfileRow.level == level)
        stmt = stmt.order_by(TaskProfileRow.created_at.desc(), TaskProfileRow.id.desc()).limit(1)
        return self._scope.run(lambda s: s.scalar(stmt))

    def log_event(
        self, run_id: str, kind: str, message: str = "", data: dict[str, Any] | None = None
    ) -> None:
        self._scope.run(
            lambda s: s.add(RunEventRow(run_id=run_id, kind=kind, message=message, data=data or {}))
        )

    def events(self, run_id: str) -> list[tuple[str, str, dict[str, Any]]]:
        stmt = select(RunEventRow).where(RunEventRow.run_id == run_id).order_by(RunEventRow.id)
        return self._scope.run(lambda s: [(r.kind, r.message, r.data) for r in s.scalars(stmt)])
