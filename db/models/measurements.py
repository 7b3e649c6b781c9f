"""Per task, device and software: baseline timings and the reference's profile, shared across runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from evokernel.db.models.base import Base, utcnow


class BaselineRow(Base):
    __tablename__ = "baselines"
    __table_args__ = (
        UniqueConstraint("task_hash", "device", "versions", "kind", "variant", name="uq_baselines_key"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_hash: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(200))
    # e.g. "torch 2.5.1 / triton 3.1.0 / cuda 12.4": a baseline is only reused on identical software.
    versions: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))  # eager | compile
    variant: Mapped[str] = mapped_column(String(100), default="")
    median_ms: Mapped[float] = mapped_column(Float)
    iqr_ms: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class TaskProfileRow(Base):
    """A task's reference profile (evaluation/profiling/stage.py) per device, software and level (0006)."""

    __tablename__ = "task_profiles"
    __table_args__ = (
        UniqueConstraint("task_hash", "device", "versions", "level", name="uq_task_profiles_key"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_hash: Mapped[str] = mapped_column(String(32))
    device: Mapped[str] = mapped_column(String(200))
    versions: Mapped[str] = mapped_column(String(200))
    level: Mapped[str] = mapped_column(String(20))
    profile: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
