"""A confirmation's window (evaluation/confirmation.py): the candidate timed with the incumbent
beside it, through run_sandboxed (real subprocesses, two workers); what the incumbent does wrong
costs the confirmation, never the candidate's verdict."""

from __future__ import annotations

from typing import Any

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.types import Status, Task

FAST = TimingConfig(warmup_ms=1, min_reps=3, max_reps=20, max_ms=50)
COPYING = """
import torch
class ModelNew(torch.nn.Module):
    def forward(self, x, b):
        return 3.0 * x + b + 1
"""


def confirm(task: Task, incumbent: str) -> Any:
    assert task.seed_source is not None
    request = build_request(task, task.seed_source, device="cpu", scale="small", timing=FAST)
    return run_sandboxed({**request, "incumbent_source": incumbent}, timeout_s=120)


def test_the_incumbent_is_timed_in_the_candidates_window(axpy_task: Task) -> None:
    assert axpy_task.seed_source is not None
    ev = confirm(axpy_task, axpy_task.seed_source)
    assert ev.status is Status.CORRECT, ev.reason + ev.feedback
    record = ev.details["confirmation"]
    assert record["pairs"] == ev.details["timing"]["paired"]["pairs"] >= 1  # one window, both ratios
    assert record["low"] <= record["vs_incumbent"] <= record["high"]
    assert record["candidate_ms"] > 0 and record["incumbent_ms"] > 0


def test_an_incumbent_that_fails_costs_only_the_confirmation(axpy_task: Task) -> None:
    broken = confirm(axpy_task, 'raise RuntimeError("boom")')
    assert broken.status is Status.CORRECT, broken.reason
    assert "failed while it was built" in broken.details["confirmation"]["error"]
    assert "boom" in broken.details["confirmation"]["error"]
    # Judged by the same rule table as any candidate: plain PyTorch launches no kernel of its own.
    cheating = confirm(axpy_task, COPYING)
    assert cheating.status is Status.CORRECT, cheating.reason
    assert "rule own-kernel" in cheating.details["confirmation"]["error"]
    assert "vs_incumbent" not in cheating.details["confirmation"]
