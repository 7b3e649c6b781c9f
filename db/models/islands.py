"""Islands and the island index PIKE-O reads (derived rows; see db/index.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from evokernel.db.models.base import Base, utcnow


class IslandRow(Base):
    __tablename__ = "islands"
    __table_args__ = (UniqueConstraint("run_id", "task_id", "index", name="uq_islands_run_task_index"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    index: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class IslandEventRow(Base):
    """Membership changes of islands (see :class:`evokernel.types.IslandEvent`); added in 0002."""

    __tablename__ = "island_events"
    __table_args__ = (Index("ix_island_events_run_task", "run_id", "task_id", "generation"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    generation: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(20))
    island: Mapped[int] = mapped_column(Integer)
    candidate_id: Mapped[int | None] = mapped_column(ForeignKey("candidates.id"), nullable=True)
    from_island: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class IslandIndexRow(Base):
    """How far the island index of a (run, task) is built, and for which grid ``spec``."""

    __tablename__ = "island_index"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    # The strategy's cell definition (features and bins): another spec rebuilds the index.
    spec: Mapped[str] = mapped_column(String(200))
    # Candidates of generations <= candidates_through and events of generations <= events_through
    # are folded in; -1 before any.
    candidates_through: Mapped[int] = mapped_column(Integer)
    events_through: Mapped[int] = mapped_column(Integer)
    # Correct candidates folded so far (the next island_pool ordinal).
    correct: Mapped[int] = mapped_column(Integer)
    # Island -> generations it was reset at, ascending (its epoch as of g is the last one <= g).
    resets: Mapped[dict[str, Any]] = mapped_column(JSON)
    # "island:epoch" -> cell -> [-speedup, candidate, migrant] of the current epochs: the grid at
    # the index's horizon, so a boundary neither folds nor plans from island_cells' history.
    cells: Mapped[dict[str, Any]] = mapped_column(JSON)


class IslandMemberRow(Base):
    """A correct member of an island during one epoch (the generations between two resets)."""

    __tablename__ = "island_members"
    __table_args__ = (
        # Top-k natives or migrants of an island, index-only (arrived filters "as of g").
        Index(
            "ix_island_members_rank",
            "run_id", "task_id", "island", "epoch", "migrant", "neg_speedup", "candidate_id", "arrived",
        ),
        # Which islands a candidate about to migrate already lives on.
        # Covering: SQLite would otherwise walk the rank index of the whole task.
        Index(
            "ix_island_members_candidate",
            "run_id", "task_id", "candidate_id", "island", "epoch", "migrant", "arrived",
        ),
    )  # fmt: skip
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    island: Mapped[int] = mapped_column(Integer, primary_key=True)
    epoch: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(
        ForeignKey("candidates.id", ondelete="CASCADE"), primary_key=True
    )
    migrant: Mapped[bool] = mapped_column(Boolean)
    # Generation it arrived at: its own for a native, the event's for a migrant.
    arrived: Mapped[int] = mapped_column(Integer)
    # -speedup (0 for a correct candidate without one), so "fastest first, ties to the older" is
    # one ascending index walk on both backends.
    neg_speedup: Mapped[float] = mapped_column(Float)


class IslandCellRow(Base):
    """A MAP-Elites record: a member that was the fastest of its cell when it arrived. The cell's
    elite as of generation g is the best record visible then (records of a prefix of arrivals
    include that prefix's best), so nothing is overwritten and any recent g can be read."""

    __tablename__ = "island_cells"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    island: Mapped[int] = mapped_column(Integer, primary_key=True)
    epoch: Mapped[int] = mapped_column(Integer, primary_key=True)
    cell: Mapped[str] = mapped_column(String(64), primary_key=True)
    candidate_id: Mapped[int] = mapped_column(
        ForeignKey("candidates.id", ondelete="CASCADE"), primary_key=True
    )
    migrant: Mapped[bool] = mapped_column(Boolean)
    arrived: Mapped[int] = mapped_column(Integer)
    neg_speedup: Mapped[float] = mapped_column(Float)


class IslandPoolRow(Base):
    """Every correct candidate of a (run, task), numbered generation by generation (fastest first
    within one): uniform sampling over all of them is one primary-key lookup."""

    __tablename__ = "island_pool"
    __table_args__ = (Index("ix_island_pool_generation", "run_id", "task_id", "generation"),)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    ordinal: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id", ondelete="CASCADE"))
    generation: Mapped[int] = mapped_column(Integer)
    neg_speedup: Mapped[float] = mapped_column(Float)
