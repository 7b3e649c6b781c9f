"""The island index: bounded reads of island populations, MAP-Elites cells and the correct pool.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

New tables only, all derived from candidates and island_events: a 0002 library upgrades in place
with them empty, and the first PIKE-O boundary after the upgrade builds them (one pass over the
run's candidates). Like 0001/0002: no server defaults, unnamed foreign keys; tests/db/
test_migrations.py compares the migrated schema with db/models/ on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _run_task() -> list[sa.Column]:
    return [
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("task_id", sa.Integer(), sa.ForeignKey("tasks.id"), primary_key=True),
    ]


def _candidate(primary_key: bool) -> sa.Column:
    return sa.Column(
        "candidate_id",
        sa.Integer(),
        sa.ForeignKey("candidates.id", ondelete="CASCADE"),
        primary_key=primary_key,
        nullable=False,
    )


def upgrade() -> None:
    op.create_table(
        "island_index",
        *_run_task(),
        sa.Column("spec", sa.String(200), nullable=False),
        sa.Column("candidates_through", sa.Integer(), nullable=False),
        sa.Column("events_through", sa.Integer(), nullable=False),
        sa.Column("correct", sa.Integer(), nullable=False),
        sa.Column("resets", sa.JSON(), nullable=False),
        sa.Column("cells", sa.JSON(), nullable=False),
    )
    op.create_table(
        "island_members",
        *_run_task(),
        sa.Column("island", sa.Integer(), primary_key=True),
        sa.Column("epoch", sa.Integer(), primary_key=True),
        _candidate(primary_key=True),
        sa.Column("migrant", sa.Boolean(), nullable=False),
        sa.Column("arrived", sa.Integer(), nullable=False),
        sa.Column("neg_speedup", sa.Float(), nullable=False),
    )
    op.create_index(
        "ix_island_members_rank",
        "island_members",
        ["run_id", "task_id", "island", "epoch", "migrant", "neg_speedup", "candidate_id", "arrived"],
    )
    op.create_index(
        "ix_island_members_candidate",
        "island_members",
        ["run_id", "task_id", "candidate_id", "island", "epoch", "migrant", "arrived"],
    )
    op.create_table(
        "island_cells",
        *_run_task(),
        sa.Column("island", sa.Integer(), primary_key=True),
        sa.Column("epoch", sa.Integer(), primary_key=True),
        sa.Column("cell", sa.String(64), primary_key=True),
        _candidate(primary_key=True),
        sa.Column("migrant", sa.Boolean(), nullable=False),
        sa.Column("arrived", sa.Integer(), nullable=False),
        sa.Column("neg_speedup", sa.Float(), nullable=False),
    )
    op.create_table(
        "island_pool",
        *_run_task(),
        sa.Column("ordinal", sa.Integer(), primary_key=True),
        _candidate(primary_key=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("neg_speedup", sa.Float(), nullable=False),
    )
    op.create_index("ix_island_pool_generation", "island_pool", ["run_id", "task_id", "generation"])


def downgrade() -> None:
    op.drop_index("ix_island_pool_generation", table_name="island_pool")
    op.drop_table("island_pool")
    op.drop_table("island_cells")
    op.drop_index("ix_island_members_candidate", table_name="island_members")
    op.drop_index("ix_island_members_rank", table_name="island_members")
    op.drop_table("island_members")
    op.drop_table("island_index")
