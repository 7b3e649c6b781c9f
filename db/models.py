"""SQLAlchemy 2 models of the solution library.

The alembic migrations under ``migrations/versions`` are the schema source; these models must
match them (tests/db/test_migrations.py compares the two). Everything a run does is a row, so a
killed run can be resumed from the library alone:

    runs ─┬─ run_tasks ── tasks
          ├─ islands ── island_events (migrations, resets, reseeds)
          ├─ island_index ── island_members, island_cells, island_pool (derived; see db/index.py)
          ├─ proposals ── candidates ─┬─ candidate_parents (lineage, ordered)
          │                           └─ evaluations
          ├─ llm_calls
          └─ run_events
    baselines, task_profiles (per task hash x device x software versions; shared across runs)
"""

from __future__ import annotations

from datetime import UTC, datetime
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
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


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


class IslandRow(Base):
    __tablename__ = "islands"
    __table_args__ = (UniqueConstraint("run_id", "task_id", "index", name="uq_islands_run_task_index"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    index: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


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
