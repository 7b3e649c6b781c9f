"""Island events, proposal branches and ideas, and indexes for million-row libraries.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

New columns are nullable so a 0001 library upgrades in place (its rows read as branch 0, count 1,
no ideas). Like 0001: no server defaults, unnamed foreign keys; tests/db/test_migrations.py
compares the migrated schema with db/models/ on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("proposals", sa.Column("branch", sa.Integer(), nullable=True))
    op.add_column("proposals", sa.Column("count", sa.Integer(), nullable=True))
    op.add_column("proposals", sa.Column("ideas", sa.JSON(), nullable=True))
    op.add_column("candidates", sa.Column("branch", sa.Integer(), nullable=True))
    op.create_index("ix_proposals_run_task_generation", "proposals", ["run_id", "task_id", "generation"])
    op.create_index("ix_candidates_run_task_generation", "candidates", ["run_id", "task_id", "generation"])
    op.create_index(
        "ix_candidates_run_task_status_speedup", "candidates", ["run_id", "task_id", "status", "speedup"]
    )
    op.create_table(
        "island_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("task_id", sa.Integer(), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("island", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), sa.ForeignKey("candidates.id"), nullable=True),
        sa.Column("from_island", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_island_events_run_task", "island_events", ["run_id", "task_id", "generation"])


def downgrade() -> None:
    op.drop_index("ix_island_events_run_task", table_name="island_events")
    op.drop_table("island_events")
    op.drop_index("ix_candidates_run_task_status_speedup", table_name="candidates")
    op.drop_index("ix_candidates_run_task_generation", table_name="candidates")
    op.drop_index("ix_proposals_run_task_generation", table_name="proposals")
    # batch mode: SQLite drops columns by copying the table.
    with op.batch_alter_table("candidates") as batch:
        batch.drop_column("branch")
    with op.batch_alter_table("proposals") as batch:
        batch.drop_column("ideas")
        batch.drop_column("count")
        batch.drop_column("branch")
