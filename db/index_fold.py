"""Building the island index (see :mod:`evokernel.db.index`): fold finished generations in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from evokernel.db.index_reads import IN_CHUNK
from evokernel.db.models import (
    CandidateRow,
    IslandCellRow,
    IslandEventRow,
    IslandIndexRow,
    IslandMemberRow,
    IslandPoolRow,
)
from evokernel.exceptions import LibraryError
from evokernel.types import Candidate, Evaluation, Scored, Status

# Migrate and reseed events add a member; a reset starts a new epoch (see islands.model).
_JOINS = ("migrate", "reseed")
_RESET = "reset"
_FOLD_CHUNK = 2000  # generations per step of a rebuild (~25k candidates for PIKE-O's defaults)


def light_scored(
    cid: int, island: int, generation: int, source: str, speedup: float | None, bottleneck: str | None = None
) -> Scored:
    """A correct candidate as the features see it: source, speedup and bottleneck, no lineage."""
    cand = Candidate(cid, "", "", 0, island, generation, "", (), source)
    details = {"profiling": {"status": "ok", "bottleneck": bottleneck}} if bottleneck else {}
    return Scored(cand, Evaluation(Status.CORRECT, speedup_eager=speedup, details=details))


def one_cell(scored: Scored) -> str:
    return ""


@dataclass
class Progress:
    """An island_index row while a fold advances it."""

    spec: str
    candidates_through: int
    events_through: int
    correct: int
    resets: dict[str, Any]
    cells: dict[str, Any]

    def columns(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies the JSON values (a third of a fold's time).
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def _neg(speedup: float | None) -> float:
    # 0.0 + : never -0.0, which would sort before 0.0 on some backends
    return 0.0 - (speedup or 0.0)


class Fold:
    """One advance of the index: reads the new generations' candidates and events, writes rows."""

    def __init__(
        self, s: Connection, run_id: str, task_id: int, row: Progress, cell_of: Callable[[Scored], str]
    ) -> None:
        self.s, self.run_id, self.task_id, self.row, self.cell_of = s, run_id, task_id, row, cell_of
        self.resets = {int(k): list(v) for k, v in row.resets.items()}
        self.correct = row.correct
        self.members: list[dict[str, Any]] = []
        self.cells: list[dict[str, Any]] = []
        self.pool: list[dict[str, Any]] = []
        self.present: set[tuple[int, int, int]] = set()
        self.watch: set[int] = set()
        # (island, epoch) -> cell -> (-speedup, candidate, migrant) of its best record so far.
        self.best: dict[tuple[int, int], dict[str, tuple[float, int, bool]]] = {}
        for where, cells in row.cells.items():
            island, epoch = map(int, where.split(":"))
            self.best[(island, epoch)] = {c: (float(n), int(i), bool(m)) for c, (n, i, m) in cells.items()}

    def run(self, candidates_through: int, events_through: int) -> None:
        row = self.row
        first_c, first_e = row.candidates_through + 1, row.events_through + 1
        start = min(first_c, first_e)
        last = max(candidates_through, events_through)
        # A rebuild of a large library goes _FOLD_CHUNK generations at a time: bounded memory.
        for lo in range(start, last + 1, _FOLD_CHUNK):
            hi = min(last, lo + _FOLD_CHUNK - 1)
            cands = (max(lo, first_c), min(hi, candidates_through))
            events = (max(lo, first_e), min(hi, events_through))
            self._chunk(lo, hi, cands, events)
        row.candidates_through, row.events_through = candidates_through, events_through
        row.correct = self.correct
        row.resets = {str(k): v for k, v in sorted(self.resets.items())}
        current = {(i, self.resets.get(i, [0])[-1]) for i, _e in self.best}  # older epochs never grow
        row.cells = {
            f"{i}:{e}": {c: list(v) for c, v in sorted(cells.items())}
            for (i, e), cells in sorted(self.best.items())
            if (i, e) in current
        }

    def _chunk(self, lo: int, hi: int, cand_range: tuple[int, int], event_range: tuple[int, int]) -> None:
        """Fold generations lo..hi: candidates of ``cand_range`` and events of ``event_range``
        (inclusive; empty when first > last)."""
        key = {"run_id": self.run_id, "task_id": self.task_id}
        cands: dict[int, list[Any]] = {}
        if cand_range[0] <= cand_range[1]:
            bounds = {"first": cand_range[0], "last": cand_range[1]}
            for r in self.s.execute(_FOLD_CANDIDATES, {**key, **bounds}):
                if r.status == "pending":
                    raise LibraryError(
                        f"the island index folds finished generations only: candidate {r.id} of "
                        f"generation {r.generation} is still pending (plan a generation once the "
                        "previous one is evaluated)"
                    )
                if r.status == Status.CORRECT.value:
                    cands.setdefault(r.generation, []).append(r)
        events: dict[int, list[Any]] = {}
        if event_range[0] <= event_range[1]:
            bounds = {"first": event_range[0], "last": event_range[1]}
            for ev in self.s.execute(_FOLD_EVENTS, {**key, **bounds}):
                events.setdefault(ev.generation, []).append(ev)
        joining = sorted({ev.candidate_id for evs in events.values() for ev in evs if ev.kind in _JOINS})
        joiners = self._candidates(joining)
        # Only a joiner can meet an existing row (a native's row is new): remember those alone.
        self.watch = set(joining)
        self.present = self._present(joining)
        for t in range(lo, hi + 1):
            if event_range[0] <= t <= event_range[1]:
                evs = events.get(t, [])
                for ev in evs:
                    if ev.kind == _RESET and self.resets.get(ev.island, [-1])[-1] != t:
                        self.resets.setdefault(ev.island, []).append(t)
                for ev in evs:
                    found = joiners.get(ev.candidate_id) if ev.kind in _JOINS else None
                    if found is not None and found.status == Status.CORRECT.value:
                        self._join(ev.island, found, migrant=True, arrived=t)
            if cand_range[0] <= t <= cand_range[1]:
                for r in sorted(cands.get(t, []), key=lambda r: (_neg(r.speedup), r.id)):
                    self.pool.append(
                        {"ordinal": self.correct, "candidate_id": r.id, "generation": t,
                         "neg_speedup": _neg(r.speedup)}
                    )  # fmt: skip
                    self.correct += 1
                    self._join(r.island, r, migrant=False, arrived=t)
        for table, rows in (
            (IslandMemberRow, self.members),
            (IslandCellRow, self.cells),
            (IslandPoolRow, self.pool),
        ):
            if rows:
                self.s.execute(_INSERT[table], [{**key, **r} for r in rows])
                rows.clear()

    def _join(self, island: int, r: Any, *, migrant: bool, arrived: int) -> None:
        epoch = self.resets.get(island, [0])[-1]
        if (island, epoch, r.id) in self.present:
            return
        if r.id in self.watch:
            self.present.add((island, epoch, r.id))
        neg = _neg(r.speedup)
        where = {
            "island": island,
            "epoch": epoch,
            "candidate_id": r.id,
            "migrant": migrant,
            "arrived": arrived,
        }
        self.members.append({**where, "neg_speedup": neg})
        cell = self.cell_of(light_scored(r.id, r.island, r.generation, r.source, r.speedup, r.bottleneck))
        best = self.best.setdefault((island, epoch), {})  # a new epoch starts with an empty grid
        if cell not in best or (neg, r.id) < best[cell][:2]:
            best[cell] = (neg, r.id, migrant)
            self.cells.append({**where, "cell": cell, "neg_speedup": neg})

    def _candidates(self, ids: list[int]) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for start in range(0, len(ids), IN_CHUNK):
            out.update(
                (r.id, r) for r in self.s.execute(_FOLD_JOINERS, {"ids": ids[start : start + IN_CHUNK]})
            )
        return out

    def _present(self, ids: list[int]) -> set[tuple[int, int, int]]:
        """(island, epoch, candidate) rows that already exist for candidates about to join."""
        out: set[tuple[int, int, int]] = set()
        key = {"run_id": self.run_id, "task_id": self.task_id}
        for start in range(0, len(ids), IN_CHUNK):
            rows = self.s.execute(_FOLD_PRESENT, {**key, "ids": ids[start : start + IN_CHUNK]})
            out.update((int(i), int(e), int(c)) for i, e, c in rows)
        return out


# ---- the fold's statements, built once (see index_reads) -------------------------------------------
_P = bindparam
_I, _E, _M, _C, _CAND = IslandIndexRow, IslandEventRow, IslandMemberRow, IslandCellRow, CandidateRow
STATE = select(_I.__table__).where(_I.run_id == _P("run_id"), _I.task_id == _P("task_id"))
SAVE = (
    update(_I)
    .where(_I.run_id == _P("b_run_id"), _I.task_id == _P("b_task_id"))
    .values({f: _P(f"new_{f}") for f in Progress.__dataclass_fields__})
)
WIPE = [
    delete(table).where(table.run_id == _P("run_id"), table.task_id == _P("task_id"))
    for table in (IslandIndexRow, IslandMemberRow, IslandCellRow, IslandPoolRow)
]
_CANDIDATE_COLS = (
    _CAND.id,
    _CAND.island,
    _CAND.generation,
    _CAND.source,
    _CAND.status,
    _CAND.speedup,
    _CAND.bottleneck,
)
_FOLD_CANDIDATES = select(*_CANDIDATE_COLS).where(
    _CAND.run_id == _P("run_id"),
    _CAND.task_id == _P("task_id"),
    _CAND.generation >= _P("first"),
    _CAND.generation <= _P("last"),
)
_FOLD_JOINERS = select(*_CANDIDATE_COLS).where(_CAND.id.in_(_P("ids", expanding=True)))
_FOLD_EVENTS = (
    select(_E.generation, _E.kind, _E.island, _E.candidate_id)
    .where(
        _E.run_id == _P("run_id"),
        _E.task_id == _P("task_id"),
        _E.generation >= _P("first"),
        _E.generation <= _P("last"),
    )
    .order_by(_E.id)
)
_FOLD_PRESENT = select(_M.island, _M.epoch, _M.candidate_id).where(
    _M.run_id == _P("run_id"), _M.task_id == _P("task_id"), _M.candidate_id.in_(_P("ids", expanding=True))
)
_INSERT = {table: insert(table) for table in (IslandMemberRow, IslandCellRow, IslandPoolRow)}
