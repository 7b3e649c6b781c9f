"""The pool's baseline cache, with a real SQLite library as its store and a scripted measurement."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from evokernel.db import SolutionLibrary
from evokernel.pool.actor import Hardware
from evokernel.pool.baseline_cache import BaselineCache
from evokernel.types import Evaluation, Status, Task

TASK = Task(name="t", path="/tasks/t.py", source="class Model: ...\n", level=1)
KEY = {"device": "gpu-a", "versions": "v1"}


def measured(**kinds: float) -> Evaluation:
    timing: dict[str, Any] = {"baseline_key": KEY}
    timing.update({k: {"median_ms": ms, "iqr_ms": 0.01} for k, ms in kinds.items()})
    return Evaluation(Status.CORRECT, runtime_ms=1.0, details={"timing": timing})


def test_a_candidates_measurement_serves_the_next_after_a_failed_baselines_job(tmp_path: Path) -> None:
    """The baselines job fails (the reference raised): the first candidate measures them, and from
    then on the cache hands its figures to the task's next candidates and keeps them in the store."""
    jobs: list[str] = []

    async def hardware() -> Hardware:
        return Hardware("cuda", "gpu", "", versions="v1", label="gpu-a")

    async def measure(task: Task, cached: dict[str, Any] | None) -> Evaluation:
        jobs.append(task.name)
        return Evaluation(Status.RUNTIME_ERROR, reason="the reference raised")

    library = SolutionLibrary(tmp_path / "lib.db")
    try:
        cache = BaselineCache(library, scale="full", compile_on=False, hardware=hardware, measure=measure)
        asyncio.run(cache.ensure(TASK))
        before = cache.known(TASK)
        assert jobs == ["t"] and before is not None and before["eager"] is None  # candidates must measure
        cache.store(TASK, measured(eager=2.5))
        entry = cache.known(TASK)
        assert entry is not None and entry["key"] == KEY
        assert entry["eager"]["median_ms"] == 2.5 and entry["compile"] is None
        assert library.get_baseline(TASK.source_hash, "gpu-a", "v1", "eager", "full") == 2.5
        asyncio.run(cache.ensure(TASK))
        assert jobs == ["t"]  # no second job
    finally:
        library.close()
