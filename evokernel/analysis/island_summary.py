"""Each island of a run at a glance: totals and the running best's rises, without a row per generation.

What the dashboard's island view draws from :func:`~evokernel.analysis.island_history` -- per
(task, island) the candidates, the correct ones, the best speedup, the last generation, and the
generations where the island's best rose -- read from ix_candidates_run_task_island_generation
without materialising its 10^4-10^5 (task, island, generation) groups: totals are one grouped
walk of the index in the database, and each rise is found by one short walk from the previous one
(the first later generation holding a faster candidate, then that generation's best).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from evokernel.analysis.usage import IslandMove, island_moves, task_names
from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow


@dataclass(frozen=True)
class IslandSummary:
    """One island of one task: ``curve`` holds (generation, best so far) at each generation where
    the island's best speedup rose, oldest first; ``best`` is its last value (None: no speedup)."""

    task: str
    island: int
    candidates: int
    correct: int
    best: float | None
    last_generation: int
    curve: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class IslandSummaries:
    islands: tuple[IslandSummary, ...]  # by task, then island
    events: tuple[IslandMove, ...]


def island_summary(lib: SolutionLibrary, run_id: str) -> IslandSummaries:
    """Agrees with :func:`~evokernel.analysis.island_history` summed per island (tests compare)."""

    def fn(s: Session) -> IslandSummaries:
        names = task_names(s, run_id)
        c = CandidateRow
        correct = func.sum(func.cast(c.status == "correct", type_=c.island.type))
        totals = s.execute(
            select(c.task_id, c.island, func.count(), correct, func.max(c.generation))
            .where(c.run_id == run_id)
            .group_by(c.task_id, c.island)
        ).all()
        out = []
        for task_id, island, n, ok, last in totals:
            curve = _rises(s, run_id, task_id, island)
            best = curve[-1][1] if curve else None
            out.append(
                IslandSummary(names.get(task_id, "?"), island, int(n), int(ok or 0), best, last, curve)
            )
        out.sort(key=lambda i: (i.task, i.island))
        return IslandSummaries(tuple(out), island_moves(s, run_id, names))

    return lib.read(fn)


def _rises(s: Session, run_id: str, task_id: int, island: int) -> tuple[tuple[int, float], ...]:
    c = CandidateRow
    mine = (c.run_id == run_id, c.task_id == task_id, c.island == island)
    # The generation and best of the first generation after ``after`` holding a candidate faster
    # than ``best``: two walks of the island's index range, the first stopping at its first hit.
    rise = (
        select(func.min(c.generation))
        .where(*mine, c.generation > bindparam("after"), c.speedup > bindparam("best"))
        .scalar_subquery()
    )
    step = select(c.generation, func.max(c.speedup)).where(*mine, c.generation == rise).group_by(c.generation)
    curve: list[tuple[int, float]] = []
    after, best = -1, -math.inf  # generations count from 0; any speedup beats -inf
    while (row := s.execute(step, {"after": after, "best": best}).first()) is not None:
        after, best = int(row[0]), float(row[1])
        curve.append((after, best))
    return tuple(curve)
