"""The best correct kernel of each task in the library, for prompts of other tasks (issue 36's
"external memory": what worked elsewhere, across runs)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.db.connection import SessionScope
from evokernel.db.models import CandidateRow, TaskRow


@dataclass(frozen=True)
class TaskBest:
    task: str
    task_source: str
    candidate: int
    speedup: float
    bottleneck: str | None


class ExemplarsMixin:
    """Needs ``_scope``, which :class:`~evokernel.db.library.SolutionLibrary` sets up."""

    _scope: SessionScope

    def best_per_task(self, exclude_task_hash: str, limit: int = 64) -> list[TaskBest]:
        """The fastest correct candidate of every other task (any run), fastest first: two
        grouped reads over ``candidates`` whatever the library's size."""

        def fn(s: Session) -> list[TaskBest]:
            c, t = CandidateRow, TaskRow
            best = (
                select(c.task_id, func.max(c.speedup).label("speedup"))
                .where(c.status == "correct", c.speedup.is_not(None))
                .group_by(c.task_id)
                .subquery()
            )
            stmt = (
                select(
                    t.name, t.source, t.source_hash, func.min(c.id), best.c.speedup, func.max(c.bottleneck)
                )
                .join(best, best.c.task_id == t.id)
                .join(c, (c.task_id == t.id) & (c.speedup == best.c.speedup) & (c.status == "correct"))
                .where(t.source_hash != exclude_task_hash)
                .group_by(t.id, t.name, t.source, t.source_hash, best.c.speedup)
                .order_by(best.c.speedup.desc())
                .limit(limit)
            )
            return [
                TaskBest(name, source, int(cid), float(speedup), bottleneck)
                for name, source, _h, cid, speedup, bottleneck in s.execute(stmt)
            ]

        return self._scope.run(fn)
