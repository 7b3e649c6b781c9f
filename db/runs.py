"""Runs, the tasks attached to them, and their islands: the part of the library a run starts with."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evokernel.db.connection import SessionScope, redact
from evokernel.db.models import (
    IslandRow,
    RunRow,
    RunTaskRow,
    TaskRow,
    utcnow,
)
from evokernel.db.rows import run_info as _run_info
from evokernel.exceptions import LibraryError, RunNotFoundError
from evokernel.types import (
    RunInfo,
    Task,
)


class RunsMixin:
    """Needs ``url``, ``_scope`` and ``_task_ids``, which :class:`SolutionLibrary` sets up."""

    url: str
    _scope: SessionScope
    _task_ids: dict[tuple[str, str], int]

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
