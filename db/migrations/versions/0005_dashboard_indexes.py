"""Index-only dashboard and report queries at a million evaluations (issue 20).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

docs/benchmarks.md ("Dashboard pages on a 1M-evaluation library") measured which analysis queries
read whole tables at 1M evaluations; this revision gives each an index that answers it alone:

- ``llm_calls.task_id`` (the task of the call's proposal, copied when the call is recorded) and
  ``ix_llm_calls_run_usage`` (run_id, task_id, model, outcome, tokens, cost, latency): a run's
  LLM usage per task and model and every run's cost are index scans, with no proposal lookups
  through wide rows; it starts with run_id, so it replaces ``ix_llm_calls_run_id``.
- ``ix_llm_calls_proposal_id``: a candidate's LLM calls (the candidate page) without a scan;
  ``ix_llm_calls_run_time`` (run_id, created_at, cost_usd): a run's dollars up to any time.
- ``candidates.stage`` and ``candidates.reason_key`` (the latest evaluation's stage and the
  failure grouping key of db/reason_key.py, written with ``status`` and ``reason``) and
  ``ix_candidates_run_task_failures`` (run_id, task_id, status, stage, reason_key, id): "why it
  failed" is counted from the index, without reading evaluations or reasons, and each group's
  oldest examples are its first entries (SQLite appends the rowid to every index; PostgreSQL
  needs id named to keep a group in id order).
- ``candidates.first_evaluation_id`` and ``candidates.first_speedup`` (its first evaluation, and
  that evaluation's speedup vs eager if it was correct: set once, when the first evaluation is
  recorded) and ``ix_candidates_run_task_first_evaluation`` (run_id, task_id, first_evaluation_id,
  first_speedup): the best-so-far curve's steps are short index walks, not a read of every
  evaluation of the task.
- ``ix_candidates_run_task_generation_status`` (run_id, task_id, generation, status) replaces
  0002's (run_id, task_id, generation): the newest evaluated candidates of a task (pool activity,
  the tree window) are a backward walk of it alone, which SQLite no longer trades for a sort of
  the covering island index below.
- ``ix_candidates_run_task_island_generation`` (run_id, task_id, island, generation, status,
  speedup): island history grouped in index order; replaces ``ix_candidates_run_task_island``,
  its prefix.

Existing rows are filled here (first evaluations, stage and task_id in SQL, reason_key in Python
with the library's own function; offline SQL mode cannot run Python, so it leaves reason_key ""
for existing rows). New columns have server defaults ("" / NULL) so rows written by older code
stay readable.
tests/db/test_migrations.py compares the migrated schema with db/models/ on both backends.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

from evokernel.db.reason_key import reason_key

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

USAGE_COLUMNS = [
    "run_id", "task_id", "model", "outcome", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s",
]  # fmt: skip
ISLAND_COLUMNS = ["run_id", "task_id", "island", "generation", "status", "speedup"]
FAILURE_COLUMNS = ["run_id", "task_id", "status", "stage", "reason_key", "id"]
GENERATION_COLUMNS = ["run_id", "task_id", "generation", "status"]
FIRST_COLUMNS = ["run_id", "task_id", "first_evaluation_id", "first_speedup"]
BATCH = 20_000  # candidates per reason_key round trip: bounded memory at any library size


def upgrade() -> None:
    op.add_column("llm_calls", sa.Column("task_id", sa.Integer(), nullable=True))
    op.add_column(
        "candidates", sa.Column("stage", sa.String(20), nullable=False, server_default=sa.text("''"))
    )
    op.add_column(
        "candidates", sa.Column("reason_key", sa.String(100), nullable=False, server_default=sa.text("''"))
    )
    op.add_column("candidates", sa.Column("first_evaluation_id", sa.Integer(), nullable=True))
    op.add_column("candidates", sa.Column("first_speedup", sa.Float(), nullable=True))
    op.execute(
        "UPDATE candidates SET first_evaluation_id = (SELECT min(e.id) FROM evaluations e"
        " WHERE e.candidate_id = candidates.id)"
    )
    op.execute(
        "UPDATE candidates SET first_speedup = (SELECT e.speedup_eager FROM evaluations e"
        " WHERE e.id = candidates.first_evaluation_id AND e.status = 'correct')"
        " WHERE first_evaluation_id IS NOT NULL"
    )
    op.execute(
        "UPDATE llm_calls SET task_id = (SELECT p.task_id FROM proposals p"
        " WHERE p.id = llm_calls.proposal_id) WHERE proposal_id IS NOT NULL"
    )
    op.execute(
        "UPDATE candidates SET stage = COALESCE((SELECT e.stage FROM evaluations e"
        " WHERE e.candidate_id = candidates.id ORDER BY e.id DESC LIMIT 1), '')"
        " WHERE status <> 'pending'"
    )
    if not context.is_offline_mode():
        _fill_reason_keys()
    op.drop_index("ix_llm_calls_run_id", table_name="llm_calls")
    op.create_index("ix_llm_calls_run_usage", "llm_calls", USAGE_COLUMNS)
    op.create_index("ix_llm_calls_proposal_id", "llm_calls", ["proposal_id"])
    op.create_index("ix_llm_calls_run_time", "llm_calls", ["run_id", "created_at", "cost_usd"])
    op.drop_index("ix_candidates_run_task_generation", table_name="candidates")
    op.create_index("ix_candidates_run_task_generation_status", "candidates", GENERATION_COLUMNS)
    op.drop_index("ix_candidates_run_task_island", table_name="candidates")
    op.create_index("ix_candidates_run_task_island_generation", "candidates", ISLAND_COLUMNS)
    op.create_index("ix_candidates_run_task_failures", "candidates", FAILURE_COLUMNS)
    op.create_index("ix_candidates_run_task_first_evaluation", "candidates", FIRST_COLUMNS)


def _fill_reason_keys() -> None:
    conn = op.get_bind()
    select = sa.text(
        "SELECT id, reason FROM candidates WHERE id > :after AND reason <> '' ORDER BY id LIMIT :n"
    )
    update = sa.text("UPDATE candidates SET reason_key = :key WHERE id = :id")
    after = 0
    while rows := conn.execute(select, {"after": after, "n": BATCH}).all():
        keys = [{"id": cid, "key": key} for cid, reason in rows if (key := reason_key(reason))]
        if keys:
            conn.execute(update, keys)
        after = rows[-1][0]


def downgrade() -> None:
    op.drop_index("ix_candidates_run_task_first_evaluation", table_name="candidates")
    op.drop_index("ix_candidates_run_task_failures", table_name="candidates")
    op.drop_index("ix_candidates_run_task_island_generation", table_name="candidates")
    op.create_index("ix_candidates_run_task_island", "candidates", ["run_id", "task_id", "island"])
    op.drop_index("ix_candidates_run_task_generation_status", table_name="candidates")
    op.create_index("ix_candidates_run_task_generation", "candidates", ["run_id", "task_id", "generation"])
    op.drop_index("ix_llm_calls_run_time", table_name="llm_calls")
    op.drop_index("ix_llm_calls_proposal_id", table_name="llm_calls")
    op.drop_index("ix_llm_calls_run_usage", table_name="llm_calls")
    op.create_index("ix_llm_calls_run_id", "llm_calls", ["run_id"])
    # Plain DROP COLUMN (SQLite >= 3.35): batch mode would recreate candidates, which other
    # tables reference, and SQLite refuses to drop a referenced table that has rows.
    op.drop_column("candidates", "first_speedup")
    op.drop_column("candidates", "first_evaluation_id")
    op.drop_column("candidates", "reason_key")
    op.drop_column("candidates", "stage")
    op.drop_column("llm_calls", "task_id")
