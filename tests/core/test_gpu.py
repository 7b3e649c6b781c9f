"""GPU-only checks, run on the GPU machine: every bundled seed compiles and is correct at full size."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evokernel.config_schema import TimingConfig
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.tasks import load_tasks
from evokernel.types import Status, Task

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
ROOT = Path(__file__).resolve().parents[2]
SEEDED = [t for t in load_tasks(ROOT / "experiments" / "tasks") if t.seed_source]


@pytest.mark.parametrize("task", SEEDED, ids=[t.name for t in SEEDED])
def test_bundled_seed_is_correct_on_the_gpu(task: Task) -> None:
    assert task.seed_source is not None
    request = build_request(
        task, task.seed_source, device="cuda", scale="full", timing=TimingConfig(max_ms=300)
    )
    ev = run_sandboxed(request, timeout_s=300)
    assert ev.status is Status.CORRECT, f"{ev.status}: {ev.reason}\n{ev.feedback}"
    assert not ev.interpreter and ev.runtime_ms and ev.eager_ms
    # The suite promises >= 50 us of eager work per task on a GPU.
    assert ev.eager_ms >= 0.05, f"{task.name}: eager {ev.eager_ms:.4f} ms"
