"""Islands as a generation starts, read from the library's island index (:mod:`evokernel.db.index`).

:class:`IslandIndex` answers what an island strategy asks at a boundary -- best member, counts, top
members, the MAP-Elites grid, who lives where, a uniform draw over every correct candidate -- each
with one or two indexed queries, so the cost of a boundary does not grow with the library. Building
it folds only the generations not yet folded (one generation's candidates and events per boundary).

Members read from the index carry a candidate id and a speedup only (no source, no lineage): what
selection needs. Read a parent's source through the library when it is needed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, overload

from evokernel.db.index import AsOf, IndexSnapshot, IndexState, Ranked, light_scored
from evokernel.islands.model import Member

if TYPE_CHECKING:
    from evokernel.db import SolutionLibrary


def _member(r: Ranked) -> Member:
    return Member(light_scored(r.candidate_id, -1, -1, "", r.speedup), migrant=r.migrant)


class IslandIndex:
    """Islands ``0..islands-1`` of a (run, task) as ``generation`` starts: candidates of earlier
    generations, and island events up to ``generation`` (``with_events``) or before it.

    ``state`` is the index as folded by the run's writer (:meth:`RunView.island_index` folds
    first, then builds this); everything here reads. Reads are one snapshot (:meth:`read`, one
    transaction) plus a primary-key lookup per draw from :meth:`pool`; migration policies'
    natives queries come on top at migration boundaries only.
    """

    def __init__(
        self,
        library: SolutionLibrary,
        run_id: str,
        task: str,
        islands: int,
        generation: int,
        state: IndexState,
        with_events: bool,
    ) -> None:
        self.library, self.run_id, self.task = library, run_id, task
        self.count = islands
        events_through = generation if with_events else generation - 1
        self.as_of = AsOf(generation, events_through)
        self.state = state
        self.epochs = {i: state.epoch(i, events_through) for i in range(islands)}
        # At the index's horizon (the engine's case) the grids come with its state; a read behind
        # it (a fresh strategy re-planning the generation under way) assembles them from records.
        self.at_horizon = (state.candidates_through, state.events_through) == (generation - 1, events_through)
        self._read: tuple[tuple[int, int, int, bool], IndexSnapshot] | None = None

    def read(
        self, top_k: int = 1, archive_k: int = 0, count_limit: int = 1, grids: bool = False
    ) -> IndexSnapshot:
        """Each island's size (counted up to ``count_limit``), ``top_k`` fastest members (and grid),
        the pool size, and the ``archive_k`` fastest correct candidates with the islands they live
        on: one transaction, kept and read again only when more is asked for. At the horizon the
        grids come with the index's state (:meth:`grid`), so they are not read again."""
        want = (top_k, archive_k, count_limit, grids and not self.at_horizon)
        if self._read is not None:
            have, snapshot = self._read
            if all(h >= w for h, w in zip(have, want, strict=True)):
                return snapshot
            want = (max(top_k, have[0]), max(archive_k, have[1]), max(count_limit, have[2]), grids or have[3])
        snapshot = self.library.index_snapshot(
            self.run_id,
            self.task,
            self.state,
            self.as_of,
            self.epochs,
            top_k=want[0],
            archive_k=want[1],
            count_limit=want[2],
            grids=want[3],
        )
        self._read = (want, snapshot)
        return snapshot

    # ---- IslandsState (what migration and reset policies read) -----------------------------------
    def islands(self) -> list[int]:
        return list(range(self.count))

    def best(self, island: int) -> Member | None:
        top = self.read().islands[island].top
        return _member(top[0]) if top else None

    def natives(self, island: int, limit: int | None) -> int:
        return self._count(island, limit, natives_only=True)

    def top_natives(self, island: int, k: int) -> list[Member]:
        return [_member(r) for r in self._top(island, k, migrant=False)]

    def holding(self, candidates: list[int], islands: list[int]) -> set[tuple[int, int]]:
        epochs = {i: self.epochs[i] for i in islands if i in self.epochs}
        return self.library.index_holding(self.run_id, self.task, candidates, epochs, self.as_of)

    # ---- what a plan reads ------------------------------------------------------------------------
    def members(self, island: int, limit: int | None) -> int:
        """Correct members of the island; counting stops at ``limit``."""
        if limit is None:
            return self._count(island, None)
        return min(limit, self.read(count_limit=limit).islands[island].size)

    def top(self, island: int, k: int) -> list[Member]:
        """The island's k fastest correct members, best first (ties: the older candidate)."""
        return [_member(r) for r in self.read(top_k=k).islands[island].top[:k]]

    def grid(self, island: int) -> list[Member]:
        """The MAP-Elites grid: each occupied cell's fastest member, fastest first."""
        if self.at_horizon:
            return [_member(r) for r in self.state.grids.get((island, self.epochs[island]), [])]
        return [_member(r) for r in self.read(grids=True).islands[island].grid]

    def archive(self, k: int) -> list[Member]:
        """The k fastest correct candidates of earlier generations, on any island, best first."""
        return [_member(r) for r in self.read(archive_k=k).archive[:k]]

    def archive_holding(self) -> set[tuple[int, int]]:
        """(island, candidate) pairs for the members of :meth:`archive` (as last read)."""
        return self.read().holding

    def pool(self) -> CorrectPool:
        """Every correct candidate of earlier generations, as a sequence for ``rng.choice``."""
        return CorrectPool(self.library, self.run_id, self.task, self.read().pool)

    def _count(self, island: int, limit: int | None, natives_only: bool = False) -> int:
        k = limit if limit is not None else 1 << 62
        epoch = self.epochs[island]
        return self.library.index_count(self.run_id, self.task, island, epoch, k, self.as_of, natives_only)

    def _top(self, island: int, k: int, migrant: bool | None) -> list[Ranked]:
        epoch = self.epochs[island]
        return self.library.index_top(self.run_id, self.task, island, epoch, k, self.as_of, migrant)


class CorrectPool(Sequence[Member]):
    """The correct candidates of generations < ``before``, numbered generation by generation
    (fastest first within one); indexing is one primary-key lookup."""

    def __init__(self, library: SolutionLibrary, run_id: str, task: str, size: int) -> None:
        self.library, self.run_id, self.task = library, run_id, task
        self.size = size

    def __len__(self) -> int:
        return self.size

    @overload
    def __getitem__(self, index: int) -> Member: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Member]: ...

    def __getitem__(self, index: int | slice) -> Member | Sequence[Member]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.size))]
        if not -self.size <= index < self.size:
            raise IndexError(f"pool index {index} out of range ({self.size} candidates)")
        ordinal = index % self.size
        return _member(self.library.index_pool_at(self.run_id, self.task, ordinal))

    def __iter__(self) -> Iterator[Member]:
        return (self[i] for i in range(self.size))
