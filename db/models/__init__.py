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
          ├─ model_stats (the LLM model selector's state per model)
          └─ run_events
    baselines, task_profiles (per task hash x device x software versions; shared across runs)
"""

from __future__ import annotations

from evokernel.db.models.base import Base, utcnow
from evokernel.db.models.candidates import (
    CandidateParentRow,
    CandidateRow,
    EvaluationRow,
    LLMCallRow,
    ProposalRow,
)
from evokernel.db.models.islands import (
    IslandCellRow,
    IslandEventRow,
    IslandIndexRow,
    IslandMemberRow,
    IslandPoolRow,
    IslandRow,
)
from evokernel.db.models.measurements import BaselineRow, TaskProfileRow
from evokernel.db.models.runs import ModelStatsRow, RunEventRow, RunRow, RunTaskRow, TaskRow

__all__ = [
    "Base",
    "BaselineRow",
    "CandidateParentRow",
    "CandidateRow",
    "EvaluationRow",
    "IslandCellRow",
    "IslandEventRow",
    "IslandIndexRow",
    "IslandMemberRow",
    "IslandPoolRow",
    "IslandRow",
    "LLMCallRow",
    "ModelStatsRow",
    "ProposalRow",
    "RunEventRow",
    "RunRow",
    "RunTaskRow",
    "TaskProfileRow",
    "TaskRow",
    "utcnow",
]
