"""Speedups with their interval (issue 35): each evaluation's 95 % confidence interval of its speedup
vs eager from paired timing, and whether a paired re-timing against the incumbent confirmed it before
promotion; the candidate keeps its latest correct evaluation's interval beside ``speedup``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

Rows from before were not timed paired, so their interval is NULL (reports then show the bare figure,
never an invented interval) and nothing was confirmed: ``confirmed`` has the server default false,
which SQLite and PostgreSQL both write into existing rows of a plain ADD COLUMN.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("evaluations", "candidates")


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("speedup_low", sa.Float(), nullable=True))
        op.add_column(table, sa.Column("speedup_high", sa.Float(), nullable=True))
        op.add_column(table, sa.Column("confirmed", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    for table in TABLES:
        for column in ("confirmed", "speedup_high", "speedup_low"):
            _drop_column(table, column)


def _drop_column(table: str, column: str) -> None:
    """As 0006: SQLite >= 3.35 drops a column in place; a batch rebuild (older SQLite) of
    ``candidates`` would fail its foreign keys."""
    bind = op.get_bind()
    version = bind.dialect.server_version_info or (0,)
    if bind.dialect.name == "sqlite" and tuple(version) < (3, 35):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
    elif bind.dialect.name == "sqlite":
        op.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN {column}"))
    else:
        op.drop_column(table, column)
