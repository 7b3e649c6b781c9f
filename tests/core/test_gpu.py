"""GPU-only checks, run on the GPU machine: every bundled seed compiles and is correct at full size."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import torch

from evokernel.config_schema import TimingConfig
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.tasks import load_tasks, task_globals_overrides
from evokernel.types import Status, Task

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
ROOT = Path(__file__).resolve().parents[2]
SEEDED = [t for t in load_tasks(ROOT / "experiments" / "tasks") if t.seed_source]


def _request(task: Task, source: str) -> dict[str, Any]:
    return {
        "task": {
            "name": task.name,
            "source": task.source,
            "tolerance": {k: list(v) for k, v in task.tolerance.items()},
            "nondeterministic": False,
        },
        "overrides": [task_globals_overrides(task, "full", v) for v in range(1 + len(task.variants))],
        "candidate_source": source,
        "device": "cuda",
        "seeds": 2,
        "timing": asdict(TimingConfig(max_ms=300)),
    }


@pytest.mark.parametrize("task", SEEDED, ids=[t.name for t in SEEDED])
def test_bundled_seed_is_correct_on_the_gpu(task: Task) -> None:
    assert task.seed_source is not None
    ev = run_sandboxed(_request(task, task.seed_source), timeout_s=300)
    assert ev.status is Status.CORRECT, f"{ev.status}: {ev.reason}\n{ev.feedback}"
    assert not ev.interpreter and ev.runtime_ms and ev.eager_ms
    # The suite promises >= 50 us of eager work per task on a GPU.
    assert ev.eager_ms >= 0.05, f"{task.name}: eager {ev.eager_ms:.4f} ms"
