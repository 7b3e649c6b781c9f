"""What a run proposes and evaluates: proposals, candidates with their lineage, verdicts, LLM calls."""

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
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from evokernel.db.models.base import Base, utcnow


class ProposalRow(Base):
    __tablename__ = "proposals"
    __table_args__ = (
        UniqueConstraint("run_id", "task_id", "seq", name="uq_proposals_run_task_seq"),
        Index("ix_proposals_run_task_state", "run_id", "task_id", "state"),
        Index("ix_proposals_run_task_generation", "run_id", "task_id", "generation"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    seq: Mapped[int] = mapped_column(Integer)
    island: Mapped[int] = mapped_column(Integer, default=0)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    operator: Mapped[str] = mapped_column(String(40))
    parents: Mapped[list[Any]] = mapped_column(JSON, default=list)
    idea: Mapped[str | None] = mapped_column(Text, nullable=True)
    # open (mutation not finished) | done (has a candidate) | failed (mutation gave no candidate)
    state: Mapped[str] = mapped_column(String(10), default="open")
    reason: Mapped[str] = mapped_column(Text, default="")
    raw_reply: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # Added in 0002 (nullable: rows of 0001 libraries have none; read as 0 / 1 / no ideas).
    branch: Mapped[int | None] = mapped_column(Integer, nullable=True, default=0)
    count: Mapped[int | None] = mapped_column(Integer, nullable=True, default=1)
    ideas: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True, default=list)


class CandidateRow(Base):
    __tablename__ = "candidates"
    __table_args__ = (
        Index("ix_candidates_run_task_status", "run_id", "task_id", "status"),
        # 0005: island history grouped in index order (replaces its prefix (run_id, task_id, island)).
        Index(
            "ix_candidates_run_task_island_generation",
            "run_id",
            "task_id",
            "island",
            "generation",
            "status",
            "speedup",
        ),
        # 0005: the best-so-far curve's steps found by short index walks (evokernel.analysis.best_steps).
        Index(
            "ix_candidates_run_task_first_evaluation",
            "run_id",
            "task_id",
            "first_evaluation_id",
            "first_speedup",
        ),
        # 0005: "why it failed" counted from the index alone.
        # id last: PostgreSQL keeps a group's entries in id order only when id is a key column.
        Index("ix_candidates_run_task_failures", "run_id", "task_id", "status", "stage", "reason_key", "id"),
        # 0002: generation scans (PIKE-B's last phase) and top-k by speedup stay index-only at 1M rows;
        # 0005 added status to the generation index: the newest evaluated candidates (pool activity,
        # the tree window) are a backward walk of it alone.
        Index("ix_candidates_run_task_generation_status", "run_id", "task_id", "generation", "status"),
        Index("ix_candidates_run_task_status_speedup", "run_id", "task_id", "status", "speedup"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    proposal_id: Mapped[int] = mapped_column(ForeignKey("proposals.id"), unique=True)
    island: Mapped[int] = mapped_column(Integer, default=0)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    operator: Mapped[str] = mapped_column(String(40))
    source: Mapped[str] = mapped_column(Text)
    source_hash: Mapped[str] = mapped_column(String(32), index=True)
    # Status of the latest evaluation ("pending" until there is one) and its reason.
    status: Mapped[str] = mapped_column(String(20), default="pending")
    reason: Mapped[str] = mapped_column(Text, default="")
    # Denormalised fitness (speedup vs eager of a correct evaluation) so ranking needs no join.
    speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    branch: Mapped[int | None] = mapped_column(Integer, nullable=True, default=0)  # 0002
    # 0005: the latest evaluation's stage and db/reason_key.py's key of ``reason``, written with
    # ``status`` so failures group index-only ("" while pending).
    stage: Mapped[str] = mapped_column(String(20), default="", server_default=text("''"))
    reason_key: Mapped[str] = mapped_column(String(100), default="", server_default=text("''"))
    # 0005: the candidate's first evaluation and, if it was correct, its speedup vs eager: the order
    # and verdicts the best-so-far curve follows (None while pending).
    first_evaluation_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    first_speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    # The latest evaluation's bottleneck class (evaluation/profiling/verdict.py), for the island
    # index's features; NULL without a profile (0006).
    bottleneck: Mapped[str | None] = mapped_column(String(20), nullable=True)
    # 0008: the latest correct evaluation's 95 % interval of ``speedup`` (NULL when not measured
    # paired) and whether a re-timing against the incumbent confirmed it, beside the figure they qualify.
    speedup_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    confirmed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class CandidateParentRow(Base):
    __tablename__ = "candidate_parents"
    child_id: Mapped[int] = mapped_column(ForeignKey("candidates.id", ondelete="CASCADE"), primary_key=True)
    parent_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer, default=0)


class EvaluationRow(Base):
    __tablename__ = "evaluations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    stage: Mapped[str] = mapped_column(String(20), default="")
    device: Mapped[str] = mapped_column(String(200), default="")
    interpreter: Mapped[bool] = mapped_column(Boolean, default=False)
    max_abs_error: Mapped[float | None] = mapped_column(Float, nullable=True)
    runtime_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    runtime_iqr_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    runtime_cv: Mapped[float | None] = mapped_column(Float, nullable=True)
    eager_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup_eager: Mapped[float | None] = mapped_column(Float, nullable=True)
    compile_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup_compile: Mapped[float | None] = mapped_column(Float, nullable=True)
    feedback: Mapped[str] = mapped_column(Text, default="")
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The verdict profile (evokernel/evaluation/profiles.py) the verdict and figures were reached under.
    # The server default fills the rows of libraries made before it (migration 0004).
    profile: Mapped[str] = mapped_column(String(20), default="strict", server_default="strict")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # From details["profiling"] (0006): the bottleneck class and the speed-of-light share.
    bottleneck: Mapped[str | None] = mapped_column(String(20), nullable=True)
    sol_share: Mapped[float | None] = mapped_column(Float, nullable=True)
    # 0008 (issue 35): the 95 % interval of speedup_eager from paired timing (NULL: not paired) and
    # whether a paired re-timing against the incumbent confirmed it (details["confirmation"]).
    speedup_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    confirmed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class LLMCallRow(Base):
    __tablename__ = "llm_calls"
    __table_args__ = (
        # 0005: per-run usage and cost index-only (replaces the plain run_id index, its prefix).
        Index(
            "ix_llm_calls_run_usage",
            "run_id", "task_id", "model", "outcome",
            "prompt_tokens", "completion_tokens", "cost_usd", "latency_s",
        ),
        Index("ix_llm_calls_proposal_id", "proposal_id"),
        # 0005: a run's dollars up to any time (the best-so-far curve against LLM USD).
        Index("ix_llm_calls_run_time", "run_id", "created_at", "cost_usd"),
    )  # fmt: skip
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    proposal_id: Mapped[int | None] = mapped_column(ForeignKey("proposals.id"), nullable=True)
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    outcome: Mapped[str] = mapped_column(String(40), default="ok")
    error: Mapped[str] = mapped_column(Text, default="")
    prompt_hash: Mapped[str] = mapped_column(String(64), default="")
    prompt: Mapped[str] = mapped_column(Text, default="")
    reply: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # 0005: the task of the call's proposal (None without one), copied so usage groups index-only.
    task_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
