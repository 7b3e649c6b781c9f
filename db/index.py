"""The island index: what island-model strategies read at a generation boundary, in bounded reads.

The truth is candidates plus island_events (:func:`evokernel.islands.model.members` derives a
population from them), but reading whole populations at every boundary is O(candidates): PIKE-O
took 8.8 s a boundary at 100k candidates. The index folds each finished generation in once, in
O(that generation's candidates and events), and keeps per (run, task):

- ``island_members``: the correct members of each (island, epoch), epoch = the island's last reset;
- ``island_cells``: MAP-Elites records per (island, epoch, cell), for a strategy-given cell function;
- ``island_pool``: every correct candidate, numbered, so a uniform draw is one primary-key lookup.

Fold order is the island model's: the events of generation t (resets first), then the candidates of
t. Rows carry the generation they arrived at, so a read "as generation g starts" filters natives
arrived < g and migrants arrived <= the events' generation: the index may be a generation ahead of
a read (a strategy planned g+1 and nothing was recorded yet) and still answer for g. Recording island
events for a generation the index already folded drops the index (:mod:`evokernel.db.accounting`);
the next read rebuilds it from the truth, as does a read with another cell ``spec``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy import Connection, insert

from evokernel.db.connection import SessionScope
from evokernel.db.index_fold import SAVE, STATE, WIPE, Fold, Progress, light_scored, one_cell
from evokernel.db.index_reads import (
    POOL_AT,
    AsOf,
    IndexSnapshot,
    IndexState,
    IslandSnapshot,
    Ranked,
    read_archive,
    read_cells,
    read_count,
    read_holding,
    read_pool_size,
    read_top,
)
from evokernel.db.models import IslandIndexRow
from evokernel.db.runs import RunsMixin
from evokernel.exceptions import LibraryError
from evokernel.types import Scored

__all__ = [
    "AsOf",
    "IndexSnapshot",
    "IndexState",
    "IslandIndexMixin",
    "IslandSnapshot",
    "Ranked",
    "light_scored",
]


class IslandIndexMixin(RunsMixin):
    """Needs ``_scope`` and ``_task_id``, which :class:`~evokernel.db.library.SolutionLibrary` sets up."""

    _scope: SessionScope

    # ---- building ---------------------------------------------------------------------------------
    def advance_island_index(
        self,
        run_id: str,
        task: str,
        *,
        spec: str | None,
        cell_of: Callable[[Scored], str] | None,
        candidates_through: int,
        events_through: int,
    ) -> IndexState:
        """Fold generations into the index until it covers candidates of generations
        <= ``candidates_through`` and events <= ``events_through``; returns its state. Idempotent;
        one transaction. The generations folded must be finished (no pending candidate).

        ``spec`` None: the caller reads members and the pool only, so an index built far enough for
        any grid will do; one that must fold is built for the single-cell grid ``""``."""
        task_id = self._task_id(run_id, task)

        key = {"run_id": run_id, "task_id": task_id}

        def fn(conn: Connection) -> IndexState:
            found = conn.execute(STATE, key).mappings().first()
            row = Progress(**{k: found[k] for k in Progress.__dataclass_fields__}) if found else None
            covered = (
                row is not None
                and row.candidates_through >= candidates_through
                and row.events_through >= events_through
            )
            # Folding needs a cell function: without one, the single-cell grid "".
            wanted = spec if spec is not None or covered else ""
            if row is None or (wanted is not None and row.spec != wanted):  # new, dropped, another grid
                for stmt in WIPE:
                    conn.execute(stmt, key)
                row = Progress(wanted or "", -1, -1, 0, {}, {})
                conn.execute(insert(IslandIndexRow), {**key, **row.columns()})
            if row.candidates_through < candidates_through or row.events_through < events_through:
                Fold(conn, run_id, task_id, row, cell_of or one_cell).run(
                    max(candidates_through, row.candidates_through), max(events_through, row.events_through)
                )
                saved = {f"new_{k}": v for k, v in row.columns().items()}
                conn.execute(SAVE, {"b_run_id": run_id, "b_task_id": task_id, **saved})
            return IndexState(
                row.candidates_through,
                row.events_through,
                row.correct,
                {int(k): tuple(v) for k, v in row.resets.items()},
                {
                    tuple(map(int, where.split(":"))): [
                        Ranked(int(cid), -float(neg), bool(mig))
                        for neg, cid, mig in sorted(tuple(v) for v in cells.values())
                    ]
                    for where, cells in row.cells.items()
                },
            )

        return self._scope.run_core(fn)

    # ---- reading ----------------------------------------------------------------------------------
    def index_snapshot(
        self,
        run_id: str,
        task: str,
        state: IndexState,
        as_of: AsOf,
        epochs: dict[int, int],
        *,
        top_k: int,
        archive_k: int,
        count_limit: int = 1,
        grids: bool = True,
    ) -> IndexSnapshot:
        """Everything a boundary reads, in one transaction of about 4 queries per island: each
        island's size (counted up to ``count_limit``), ``top_k`` fastest members and grid, the number of
        correct candidates, the ``archive_k`` fastest of them and the islands they live on (``grids``
        False: no grids, e.g. for a reset policy that wants the best members only)."""
        task_id = self._task_id(run_id, task)

        def fn(conn: Connection) -> IndexSnapshot:
            islands = {
                island: IslandSnapshot(
                    read_count(conn, run_id, task_id, island, epoch, count_limit, as_of),
                    read_top(conn, run_id, task_id, island, epoch, top_k, as_of, None),
                    read_cells(conn, run_id, task_id, island, epoch, as_of) if grids else [],
                )
                for island, epoch in epochs.items()
            }
            archive = read_archive(conn, run_id, task_id, archive_k, as_of.before)
            holding = read_holding(conn, run_id, task_id, [r.candidate_id for r in archive], epochs, as_of)
            pool = read_pool_size(conn, run_id, task_id, as_of.before, state)
            return IndexSnapshot(islands, pool, archive, holding)

        return self._scope.run_core(fn)

    def index_top(
        self,
        run_id: str,
        task: str,
        island: int,
        epoch: int,
        k: int,
        as_of: AsOf,
        migrant: bool | None = None,
    ) -> list[Ranked]:
        """The island's k fastest members (natives or migrants only, if ``migrant`` says), best first:
        ``len`` of it is the island's size when that is below k."""
        task_id = self._task_id(run_id, task)
        return self._scope.run_core(lambda c: read_top(c, run_id, task_id, island, epoch, k, as_of, migrant))

    def index_count(
        self,
        run_id: str,
        task: str,
        island: int,
        epoch: int,
        limit: int,
        as_of: AsOf,
        natives_only: bool = False,
    ) -> int:
        """Correct members (or natives) of the island, counting stops at ``limit``."""
        task_id = self._task_id(run_id, task)
        return self._scope.run_core(
            lambda c: read_count(c, run_id, task_id, island, epoch, limit, as_of, natives_only)
        )

    def index_holding(
        self, run_id: str, task: str, candidates: Iterable[int], epochs: dict[int, int], as_of: AsOf
    ) -> set[tuple[int, int]]:
        """(island, candidate) pairs among ``candidates`` x the islands of ``epochs`` (island -> its
        epoch) where the candidate is a member."""
        task_id = self._task_id(run_id, task)
        return self._scope.run_core(
            lambda c: read_holding(c, run_id, task_id, list(candidates), epochs, as_of)
        )

    def index_pool_at(self, run_id: str, task: str, ordinal: int) -> Ranked:
        params = {"run_id": run_id, "task_id": self._task_id(run_id, task), "ordinal": ordinal}
        found = self._scope.run_core(lambda c: c.execute(POOL_AT, params).first())
        if found is None:
            raise LibraryError(f"the island index of run {run_id} task {task} has no pool entry {ordinal}")
        return Ranked(int(found[0]), -float(found[1]))
