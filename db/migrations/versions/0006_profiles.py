"""Profiles (issue 26): each evaluation's bottleneck class and speed-of-light share as columns,
the candidate's bottleneck beside its speedup, and the reference profile of each task.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25

The full profile (timeline, counters, floors) stays in ``evaluations.details["profiling"]``; the two
columns are what reports, the dashboard and PIKE-O's ``bottleneck`` feature read without opening
it. ``candidates.bottleneck`` is denormalised like ``speedup``: the island index folds candidate
rows alone. Rows from before are NULL (no profile was taken). ``task_profiles`` keeps a task's
reference profile per device, software versions and level, like ``baselines`` its timings.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("evaluations", sa.Column("bottleneck", sa.String(20), nullable=True))
    op.add_column("evaluations", sa.Column("sol_share", sa.Float(), nullable=True))
    op.add_column("candidates", sa.Column("bottleneck", sa.String(20), nullable=True))
    op.create_table(
        "task_profiles",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("task_hash", sa.String(32), nullable=False),
        sa.Column("device", sa.String(200), nullable=False),
        sa.Column("versions", sa.String(200), nullable=False),
        sa.Column("level", sa.String(20), nullable=False),
        sa.Column("profile", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("task_hash", "device", "versions", "level", name="uq_task_profiles_key"),
    )


def downgrade() -> None:
    op.drop_table("task_profiles")
    _drop_column("candidates", "bottleneck")
    _drop_column("evaluations", "sol_share")
    _drop_column("evaluations", "bottleneck")


def _drop_column(table: str, column: str) -> None:
    """SQLite >= 3.35 drops a column in place; a batch rebuild (older SQLite) of ``candidates``
    would fail its foreign keys (evaluations, parents and the island index point at it)."""
    bind = op.get_bind()
    version = bind.dialect.server_version_info or (0,)
    if bind.dialect.name == "sqlite" and tuple(version) < (3, 35):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
    elif bind.dialect.name == "sqlite":
        op.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN {column}"))
    else:
        op.drop_column(table, column)
