"""Initial schema of the solution library.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Written by hand to match db/models/ column for column; tests/db/test_migrations.py compares the
migrated schema with the models on SQLite and PostgreSQL. No server defaults: every default lives
in the models (Python side), so rows written through the library are complete on both backends.
Foreign keys are unnamed, as in the models; the backend names them (e.g. ``proposals_run_id_fkey``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("source_hash", sa.String(32), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("name", "source_hash", name="uq_tasks_name_hash"),
    )
    op.create_table(
        "run_tasks",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("task_id", sa.Integer(), sa.ForeignKey("tasks.id"), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
    )
    op.create_table(
        "islands",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("task_id", sa.Integer(), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("run_id", "task_id", "index", name="uq_islands_run_task_index"),
    )
    op.create_table(
        "proposals",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("task_id", sa.Integer(), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("island", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("operator", sa.String(40), nullable=False),
        sa.Column("parents", sa.JSON(), nullable=False),
        sa.Column("idea", sa.Text(), nullable=True),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("raw_reply", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("run_id", "task_id", "seq", name="uq_proposals_run_task_seq"),
    )
    op.create_index("ix_proposals_run_task_state", "proposals", ["run_id", "task_id", "state"])
    op.create_table(
        "candidates",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("task_id", sa.Integer(), sa.ForeignKey("tasks.id"), nullable=False),
        # One candidate per proposal: a re-run of an open proposal after a crash cannot duplicate it.
        sa.Column("proposal_id", sa.Integer(), sa.ForeignKey("proposals.id"), nullable=False, unique=True),
        sa.Column("island", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("operator", sa.String(40), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("source_hash", sa.String(32), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_candidates_source_hash", "candidates", ["source_hash"])
    op.create_index("ix_candidates_run_task_status", "candidates", ["run_id", "task_id", "status"])
    op.create_index("ix_candidates_run_task_island", "candidates", ["run_id", "task_id", "island"])
    op.create_table(
        "candidate_parents",
        sa.Column(
            "child_id", sa.Integer(), sa.ForeignKey("candidates.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("parent_id", sa.Integer(), sa.ForeignKey("candidates.id"), primary_key=True),
        sa.Column("rank", sa.Integer(), nullable=False),
    )
    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "candidate_id",
            sa.Integer(),
            sa.ForeignKey("candidates.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("stage", sa.String(20), nullable=False),
        sa.Column("device", sa.String(200), nullable=False),
        sa.Column("interpreter", sa.Boolean(), nullable=False),
        sa.Column("max_abs_error", sa.Float(), nullable=True),
        sa.Column("runtime_ms", sa.Float(), nullable=True),
        sa.Column("runtime_iqr_ms", sa.Float(), nullable=True),
        sa.Column("runtime_cv", sa.Float(), nullable=True),
        sa.Column("eager_ms", sa.Float(), nullable=True),
        sa.Column("speedup_eager", sa.Float(), nullable=True),
        sa.Column("compile_ms", sa.Float(), nullable=True),
        sa.Column("speedup_compile", sa.Float(), nullable=True),
        sa.Column("feedback", sa.Text(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_evaluations_candidate_id", "evaluations", ["candidate_id"])
    op.create_table(
        "llm_calls",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("proposal_id", sa.Integer(), sa.ForeignKey("proposals.id"), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(40), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("prompt_hash", sa.String(64), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("reply", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_llm_calls_run_id", "llm_calls", ["run_id"])
    op.create_table(
        "baselines",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("task_hash", sa.String(32), nullable=False),
        sa.Column("device", sa.String(200), nullable=False),
        sa.Column("versions", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("variant", sa.String(100), nullable=False),
        sa.Column("median_ms", sa.Float(), nullable=False),
        sa.Column("iqr_ms", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("task_hash", "device", "versions", "kind", "variant", name="uq_baselines_key"),
    )
    op.create_table(
        "run_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_run_events_run_id", "run_events", ["run_id"])


def downgrade() -> None:
    # Children before parents so no foreign key is left dangling; dropping a table drops its indexes.
    for table in (
        "run_events",
        "baselines",
        "llm_calls",
        "evaluations",
        "candidate_parents",
        "candidates",
        "proposals",
        "islands",
        "run_tasks",
        "tasks",
        "runs",
    ):
        op.drop_table(table)
