"""Builders shared by the library tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, func, select

from evokernel.db import SolutionLibrary
from evokernel.db.models import TaskRow
from evokernel.types import Evaluation, Proposal, Status, Task

REFERENCE = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def make_task(name: str = "relu", source: str = REFERENCE) -> Task:
    return Task(name=name, path=f"/tasks/{name}.py", source=source, level=1, variants=({"n": 8},))


def correct(speedup: float | None, **extra: Any) -> Evaluation:
    return Evaluation(status=Status.CORRECT, runtime_ms=1.0, eager_ms=2.0, speedup_eager=speedup, **extra)


def new_candidate(
    lib: SolutionLibrary,
    run_id: str,
    source: str,
    *,
    island: int = 0,
    generation: int = 0,
    parents: tuple[int, ...] = (),
    task: str = "relu",
) -> int:
    proposal = lib.add_proposal(
        run_id, Proposal(task=task, operator="mutate", island=island, generation=generation, parents=parents)
    )
    return lib.add_candidate(run_id, proposal, source).id


def count_task_rows(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(TaskRow)).scalar_one())
    finally:
        engine.dispose()
