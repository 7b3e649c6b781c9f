"""A run (or, with ``--sweep``, a 2-cell sweep of the axpy fixture) on instant parts that reports
through the CLI's progress choice, for pty tests:
``python -m tests.report.progress_driver LIBRARY [--quiet|--json-events] [--sweep] [--health]``.
``--health``: the instant pool reports its health as the Ray pool does (the pool's own
:class:`~evokernel.pool.health.PoolStats`), so the progress shows a pool line."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from evokernel.conformance import InstantEvaluator, InstantMutator, instant_config, instant_task
from evokernel.pool.health import PoolStats
from evokernel.report.progress import progress_for
from evokernel.run.runner import run_experiment
from evokernel.types import Evaluation, Task


class HealthyInstant(InstantEvaluator):
    """The instant evaluator with the Ray pool's health figures (same keys, same stats class)."""

    def __init__(self, size: int, delay_s: float) -> None:
        super().__init__(size=size, delay_s=delay_s)
        self.stats = PoolStats()
        self.in_flight = 0
        self._slots = asyncio.Semaphore(size)  # at most `size` at once, as the pool's workers

    async def evaluate(self, task: Task, source: str, *, tenant: str = "", priority: int = 0) -> Evaluation:
        async with self._slots:
            self.in_flight += 1
            try:
                evaluation = await super().evaluate(task, source, tenant=tenant, priority=priority)
            finally:
                self.in_flight -= 1
        self.stats.record(evaluation)
        return evaluation

    def health(self) -> dict[str, Any]:
        return {
            "device": "cpu",
            "workers": self.size,
            "concurrency_per_worker": 1,
            "capacity": self.size,
            "in_flight": self.in_flight,
            "queued": 0,
            **self.stats.snapshot(),
        }


def _pool(flags: set[str]) -> InstantEvaluator:
    if "--health" in flags:
        return HealthyInstant(size=2, delay_s=0.15)
    return InstantEvaluator(size=2, delay_s=0.15)


def main(argv: list[str]) -> int:
    library, flags = argv[0], set(argv[1:])
    if "--sweep" in flags:
        return sweep(library, flags)
    tasks = [instant_task("alpha"), instant_task("beta")]
    config = instant_config("greedy", None, library, tasks, evaluations=12)
    progress = progress_for("--quiet" in flags, "--json-events" in flags)
    try:
        run_experiment(
            config,
            reporter=progress.reporter(),
            pool=_pool(flags),
            mutators=[InstantMutator(incorrect_rate=0.3, uses_llm=True, cost_usd=0.001)],
            tasks=tasks,
        )
    finally:
        progress.close()
    return 0


def sweep(library: str, flags: set[str]) -> int:
    from pathlib import Path

    from evokernel.sweep.runner import run_sweep

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "tasks"
    config = Path(library).with_suffix(".yaml")
    config.write_text(
        f"name: live\ntasks: [{fixtures / 'axpy.py'}]\nlibrary: {library}\nbudget: {{evaluations: 6}}\n"
    )
    progress = progress_for("--quiet" in flags, "--json-events" in flags)
    try:
        run_sweep(
            config,
            ["seed=0,1"],
            pool=_pool(flags),
            reporter_for=lambda index, _run: progress.reporter(str(index)),
        )
    finally:
        progress.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
