"""A run, the tasks it searches, and what happened to it (events)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from evokernel.db.models.base import Base, utcnow


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    seed: Mapped[int] = mapped_column(Integer, default=0)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    # running | finished | interrupted | failed
    status: Mapped[str] = mapped_column(String(20), default="running")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (UniqueConstraint("name", "source_hash", name="uq_tasks_name_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    source_hash: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(Text)
    path: Mapped[str] = mapped_column(Text)
    level: Mapped[int | None] = mapped_column(Integer, nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class RunTaskRow(Base):
    __tablename__ = "run_tasks"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), primary_key=True)
    # Task name within the run (unique per run); order the tasks were given in.
    name: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer, default=0)


class RunEventRow(Base):
    __tablename__ = "run_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(40))
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


# ---- the island index (0003): derived from candidates and island_events, never the truth ----------
# Rows carry the generation they arrived at, so a strategy reads any island "as generation g starts"
# with bounded, indexed queries however large the library grows (see evokernel.db.index).


class ModelStatsRow(Base):
    """What the LLM model selector learned per model of a run (0007): proposals it chose the model
    for, those observed, summed gain (log-speedup over the last correct ancestor plus a credit for a
    correct candidate) and summed cost. One row per (run, model), rewritten as the run learns, so a
    resumed run's bandit starts where the killed one stopped and reports can show it."""

    __tablename__ = "model_stats"
    __table_args__ = (UniqueConstraint("run_id", "model", name="uq_model_stats_run_model"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    model: Mapped[str] = mapped_column(String(200))
    pulls: Mapped[int] = mapped_column(Integer, default=0)
    observed: Mapped[int] = mapped_column(Integer, default=0)
    gain: Mapped[float] = mapped_column(Float, default=0.0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
