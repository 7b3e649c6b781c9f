"""Reads of the island index (see :mod:`evokernel.db.index`): what one boundary asks, as
prebuilt statements on a Core connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, bindparam, false, func, or_, select, true

from evokernel.db.models import CandidateRow, IslandCellRow, IslandMemberRow, IslandPoolRow
from evokernel.types import Status

IN_CHUNK = 500  # ids per IN (...) list, well under every backend's bind-parameter limit


@dataclass(frozen=True)
class IndexState:
    candidates_through: int
    events_through: int
    correct: int
    resets: dict[int, tuple[int, ...]]
    # (island, epoch) -> its grid at the horizon (current epochs only), fastest first.
    grids: dict[tuple[int, int], list[Ranked]]

    def epoch(self, island: int, events_through: int) -> int:
        """The island's epoch once the events of generations <= ``events_through`` happened."""
        return max((g for g in self.resets.get(island, ()) if g <= events_through), default=0)


@dataclass(frozen=True)
class AsOf:
    """A read of the index as a generation starts: natives of generations < ``before`` and events
    of generations <= ``events_through`` (``before`` or ``before - 1``)."""

    before: int
    events_through: int


@dataclass(frozen=True)
class Ranked:
    """An index row: a correct candidate, its speedup (0 when unmeasured) and whether it is a migrant."""

    candidate_id: int
    speedup: float
    migrant: bool = False


@dataclass(frozen=True)
class IslandSnapshot:
    size: int  # correct members, counted up to the limit asked for
    top: list[Ranked]  # fastest first
    grid: list[Ranked]  # each occupied cell's fastest member, fastest first


@dataclass(frozen=True)
class IndexSnapshot:
    islands: dict[int, IslandSnapshot]
    pool: int  # correct candidates of earlier generations
    archive: list[Ranked]  # the fastest of them, best first
    holding: set[tuple[int, int]]  # (island, candidate) for archive members


# Reads are built once with bind parameters: constructing the expressions per call cost more than
# running them (a boundary makes about 15 of these queries; benchmark: 10 ms -> 3 ms a snapshot).
_P = bindparam
_M, _C, _POOL, _CAND = IslandMemberRow, IslandCellRow, IslandPoolRow, CandidateRow


def _visible(table: Any) -> ColumnElement[bool]:
    return or_(
        and_(table.migrant == false(), table.arrived < _P("before")),
        and_(table.migrant == true(), table.arrived <= _P("events_through")),
    )


_TOP = {
    kind: select(_M.candidate_id, _M.neg_speedup, _M.migrant)
    .where(
        _M.run_id == _P("run_id"),
        _M.task_id == _P("task_id"),
        _M.island == _P("island"),
        _M.epoch == _P("epoch"),
        _M.migrant == (true() if kind else false()),
        _visible(_M),
    )
    .order_by(_M.neg_speedup, _M.candidate_id)
    .limit(_P("k"))
    for kind in (False, True)
}  # one walk of ix_island_members_rank each
_COUNT = {
    kind: select(func.count()).select_from(
        select(_M.candidate_id)
        .where(
            _M.run_id == _P("run_id"),
            _M.task_id == _P("task_id"),
            _M.island == _P("island"),
            _M.epoch == _P("epoch"),
            *([] if kind is None else [_M.migrant == (true() if kind else false())]),
            _visible(_M),
        )
        .limit(_P("k"))
        .subquery()
    )
    for kind in (None, False)
}  # counting stops at k: a boundary only needs to know "at least k"
_CELLS = select(_C.cell, _C.candidate_id, _C.neg_speedup, _C.migrant).where(
    _C.run_id == _P("run_id"),
    _C.task_id == _P("task_id"),
    _C.island == _P("island"),
    _C.epoch == _P("epoch"),
    _visible(_C),
)
_HOLDING = select(_M.island, _M.candidate_id, _M.epoch).where(
    _M.run_id == _P("run_id"),
    _M.task_id == _P("task_id"),
    _M.candidate_id.in_(_P("ids", expanding=True)),
    _visible(_M),
)  # served by ix_island_members_candidate
_POOL_SIZE = select(func.min(_POOL.ordinal)).where(
    _POOL.run_id == _P("run_id"), _POOL.task_id == _P("task_id"), _POOL.generation >= _P("before")
)
POOL_AT = select(_POOL.candidate_id, _POOL.neg_speedup).where(
    _POOL.run_id == _P("run_id"), _POOL.task_id == _P("task_id"), _POOL.ordinal == _P("ordinal")
)
# As SolutionLibrary.top: ``+ 0`` keeps SQLite on the (run, task, status, speedup) index, and a
# correct candidate without a speedup ranks below every measured one.
_CORRECT = (
    _CAND.run_id == _P("run_id"),
    _CAND.task_id == _P("task_id"),
    _CAND.status == Status.CORRECT.value,
    _CAND.generation + 0 < _P("before"),
)
_ARCHIVE = (
    select(_CAND.id, _CAND.speedup)
    .where(*_CORRECT, _CAND.speedup.is_not(None))
    .order_by(_CAND.speedup.desc(), _CAND.id)
    .limit(_P("k"))
)
_ARCHIVE_UNMEASURED = (
    select(_CAND.id, _CAND.speedup)
    .where(*_CORRECT, _CAND.speedup.is_(None))
    .order_by(_CAND.id)
    .limit(_P("k"))
)


def _at(run_id: str, task_id: int, as_of: AsOf, **more: Any) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "task_id": task_id,
        "before": as_of.before,
        "events_through": as_of.events_through,
        **more,
    }


def read_top(
    conn: Connection,
    run_id: str,
    task_id: int,
    island: int,
    epoch: int,
    k: int,
    as_of: AsOf,
    migrant: bool | None,
) -> list[Ranked]:
    if k <= 0:
        return []
    params = _at(run_id, task_id, as_of, island=island, epoch=epoch, k=k)
    rows: list[tuple[int, float, bool]] = []
    for kind in [False, True] if migrant is None else [migrant]:
        rows += [(int(c), float(n), bool(g)) for c, n, g in conn.execute(_TOP[kind], params)]
    rows.sort(key=lambda r: (r[1], r[0]))
    return [Ranked(cid, -neg, mig) for cid, neg, mig in rows[:k]]


def read_count(
    conn: Connection,
    run_id: str,
    task_id: int,
    island: int,
    epoch: int,
    limit: int,
    as_of: AsOf,
    natives_only: bool = False,
) -> int:
    """Members (or natives) of the island, counting stops at ``limit``."""
    if limit <= 0:
        return 0
    params = _at(run_id, task_id, as_of, island=island, epoch=epoch, k=limit)
    return int(conn.execute(_COUNT[False if natives_only else None], params).scalar() or 0)


def read_cells(
    conn: Connection, run_id: str, task_id: int, island: int, epoch: int, as_of: AsOf
) -> list[Ranked]:
    best: dict[str, tuple[float, int, bool]] = {}
    for cell, cid, neg, mig in conn.execute(_CELLS, _at(run_id, task_id, as_of, island=island, epoch=epoch)):
        if cell not in best or (neg, cid) < best[cell][:2]:
            best[cell] = (neg, cid, bool(mig))
    return [Ranked(cid, -neg, mig) for neg, cid, mig in sorted(best.values())]


def read_holding(
    conn: Connection, run_id: str, task_id: int, ids: list[int], epochs: dict[int, int], as_of: AsOf
) -> set[tuple[int, int]]:
    ids = sorted(set(ids))
    out: set[tuple[int, int]] = set()
    if not epochs:
        return out
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        for island, cid, epoch in conn.execute(_HOLDING, _at(run_id, task_id, as_of, ids=chunk)):
            if epochs.get(int(island)) == epoch:
                out.add((int(island), int(cid)))
    return out


def read_pool_size(conn: Connection, run_id: str, task_id: int, before: int, state: IndexState) -> int:
    """Correct candidates of generations < ``before`` (the index covers ``before - 1``)."""
    params = {"run_id": run_id, "task_id": task_id, "before": before}
    first_later = conn.execute(_POOL_SIZE, params).scalar()
    return state.correct if first_later is None else int(first_later)


def read_archive(conn: Connection, run_id: str, task_id: int, k: int, before: int) -> list[Ranked]:
    """The k fastest correct candidates of generations < ``before`` (as SolutionLibrary.top)."""
    if k <= 0:
        return []
    params = {"run_id": run_id, "task_id": task_id, "before": before, "k": k}
    rows = list(conn.execute(_ARCHIVE, params))
    if len(rows) < k:
        rows += list(conn.execute(_ARCHIVE_UNMEASURED, {**params, "k": k - len(rows)}))
    return [Ranked(int(cid), float(speedup or 0.0)) for cid, speedup in rows]
