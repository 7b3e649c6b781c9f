"""The evolution tree of a task, bounded for a browser: every candidate while there are few, the
lineage of the fastest ones plus the newest ones when there are many.

A task of a long run holds 10^5 candidates or more; a graph view stays usable up to a few
thousand nodes, so past ``limit`` the window keeps what a viewer looks for: where the best kernels
came from (their ancestors, to the seeds when they fit) and what the search is doing now (the
newest generations). Edges are kept between shown nodes; ``hidden_parents`` counts the links to
candidates outside the window so the page can say the tree is cut.

Indexes: ix_candidates_run_task_status_speedup (the fastest), ix_candidates_run_task_generation_status
(the newest, walked backwards), candidate_parents' primary key (child_id, parent_id) for lineage,
candidates' primary key for the rows themselves. No query touches evaluations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateParentRow, CandidateRow, RunTaskRow
from evokernel.exceptions import AnalysisError

DEFAULT_LIMIT = 2000
# Of the window, this share goes to the fastest candidates' ancestry, the rest to the newest.
LINEAGE_SHARE = 0.5
TOP_K = 20
_CHUNK = 500  # ids per IN (...) list: far below SQLite's 32766 bound variables


_C = CandidateRow
_NODE_COLUMNS = (_C.id, _C.operator, _C.status, _C.reason, _C.speedup, _C.island, _C.generation,
                 _C.speedup_low, _C.speedup_high)  # fmt: skip


@dataclass(frozen=True)
class TreeNode:
    id: int
    parents: tuple[int, ...]
    operator: str
    status: str
    reason: str
    speedup: float | None
    island: int
    generation: int
    # The 95 % interval of ``speedup`` (None: not measured paired; migration 0008).
    speedup_low: float | None = None
    speedup_high: float | None = None


@dataclass(frozen=True)
class TreeWindow:
    task: str
    nodes: tuple[TreeNode, ...]
    total: int  # candidates of the task in the library
    truncated: bool
    hidden_parents: int  # parent links that point outside the window


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


def _parents_of(s: Session, ids: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[tuple[int, int]]] = {}
    p = CandidateParentRow
    for chunk in _chunks(ids):
        for child, parent, rank in s.execute(
            select(p.child_id, p.parent_id, p.rank).where(p.child_id.in_(chunk))
        ):
            out.setdefault(child, []).append((rank, parent))
    return {c: [pid for _r, pid in sorted(ps)] for c, ps in out.items()}


def tree_window(lib: SolutionLibrary, run_id: str, task: str, limit: int = DEFAULT_LIMIT) -> TreeWindow:
    """At most ``limit`` candidates of ``task`` with their parent links (see the module docstring)."""
    c = CandidateRow

    def fn(s: Session) -> TreeWindow:
        task_id = s.scalar(
            select(RunTaskRow.task_id).where(RunTaskRow.run_id == run_id, RunTaskRow.name == task)
        )
        if task_id is None:
            raise AnalysisError(f"run {run_id!r} has no task {task!r}")
        where = (c.run_id == run_id, c.task_id == task_id)
        total = int(s.scalar(select(func.count()).select_from(c).where(*where)) or 0)
        ids = list(s.scalars(select(c.id).where(*where))) if total <= limit else _window_ids(s, where, limit)
        parents = _parents_of(s, ids)
        shown = set(ids)
        rows: list[Any] = []
        for chunk in _chunks(sorted(ids)):
            rows += s.execute(select(*_NODE_COLUMNS).where(c.id.in_(chunk))).all()
        hidden = 0
        nodes = []
        for cid, op, status, reason, speedup, island, gen, low, high in sorted(rows):
            links = parents.get(cid, [])
            hidden += sum(1 for p in links if p not in shown)
            shown_parents = tuple(p for p in links if p in shown)
            nodes.append(TreeNode(cid, shown_parents, op, status, reason, speedup, island, gen, low, high))
        return TreeWindow(task, tuple(nodes), total, total > limit, hidden)

    return lib.read(fn)


def _window_ids(s: Session, where: tuple, limit: int) -> list[int]:
    c = CandidateRow
    chosen: dict[int, None] = {}  # insertion-ordered set
    best = s.scalars(
        select(c.id)
        .where(*where, c.status == "correct", c.speedup.is_not(None))
        .order_by(c.speedup.desc(), c.id)
        .limit(TOP_K)
    ).all()
    lineage_budget = int(limit * LINEAGE_SHARE)
    frontier = list(best)
    while frontier and len(chosen) < lineage_budget:
        frontier = [f for f in frontier if f not in chosen][: lineage_budget - len(chosen)]
        chosen.update(dict.fromkeys(frontier))
        frontier = sorted({p for ps in _parents_of(s, frontier).values() for p in ps})
    newest = s.scalars(select(c.id).where(*where).order_by(c.generation.desc(), c.id.desc()).limit(limit))
    for cid in newest:
        if len(chosen) >= limit:
            break
        chosen.setdefault(cid)
    return list(chosen)
