"""The verdict profile of every evaluation (issue 18: strict, kernelbench, kernelbench-v0).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25

Every evaluation recorded before this revision was reached under evokernel's own contract, so
existing rows get ``strict``: the column has that server default (db/models/ says the same;
tests/db/test_migrations.py compares the migrated schema with it on SQLite and PostgreSQL). A
plain ADD COLUMN with a constant default: SQLite and PostgreSQL both fill existing rows with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("evaluations", sa.Column("profile", sa.String(20), nullable=False, server_default="strict"))


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:  # SQLite < 3.35 has no DROP COLUMN
        batch.drop_column("profile")
