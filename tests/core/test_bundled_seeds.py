"""Every bundled seed kernel passes the real evaluator on the CPU (Triton interpreter, small sizes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.forkserver import ForkServer
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.tasks import load_tasks
from evokernel.types import Status, Task

ROOT = Path(__file__).resolve().parents[2]
SEEDED = [t for t in load_tasks(ROOT / "experiments" / "tasks") if t.seed_source]


def test_the_suite_ships_enough_seeds() -> None:
    assert len(SEEDED) >= 4


@pytest.mark.parametrize("task", SEEDED, ids=[t.name for t in SEEDED])
def test_bundled_seed_is_correct_under_the_interpreter(task: Task, fork_server: ForkServer) -> None:
    assert task.seed_source is not None
    request = build_request(
        task,
        task.seed_source,
        device="cpu",
        scale="small",
        timing=TimingConfig(warmup_ms=1, min_reps=2, max_reps=3, max_ms=10),
    )
    ev = run_sandboxed(request, timeout_s=180, launcher=fork_server.spawn)  # as the pool launches it
    assert ev.status is Status.CORRECT, f"{ev.status}: {ev.reason}\n{ev.feedback}"
