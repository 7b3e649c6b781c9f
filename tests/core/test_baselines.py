"""A candidate's timing stage with cached baselines: no GPU lock and no reference model."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.baselines import key_for, measure_reference_baselines
from evokernel.evaluation.gpulock import GpuLock, LockWaitExceeded
from evokernel.evaluation.request import EvaluationRequest
from evokernel.types import Task

FAST_TIMING = TimingConfig(warmup_ms=1, min_reps=3, max_reps=20, max_ms=50)
CPU = torch.device("cpu")


def held_gate(directory: Path) -> int:
    """Another process's timing, as the lock sees it: the gate held exclusively."""
    fd = os.open(directory / "gate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def request_with(task: Task, baselines: dict[str, Any]) -> EvaluationRequest:
    assert task.seed_source is not None
    return EvaluationRequest.build(
        task, task.seed_source, device="cpu", scale="small", timing=FAST_TIMING, baselines=baselines
    )


def test_cached_baselines_need_no_gpu_lock_stale_ones_wait_for_it(axpy_task: Task, tmp_path: Path) -> None:
    assert axpy_task.seed_source is not None
    entry = {"median_ms": 1.5, "iqr_ms": 0.0, "cv": 0.0, "reps": 0}
    key = key_for(CPU, FAST_TIMING.call_start)
    cached: dict[str, Any] = {"key": key, "eager": entry, "compile": None, "eager_graph": None}
    locks = tmp_path / "locks"
    locks.mkdir()
    fd = held_gate(locks)
    try:
        request = request_with(axpy_task, cached)
        out = measure_reference_baselines(CPU, request, GpuLock(locks, max_wait_s=0.2))
        assert out["eager"]["median_ms"] == 1.5 and out["eager"]["cached"] is True

        stale = {**cached, "key": {**cached["key"], "versions": "torch 0.0"}}
        request = request_with(axpy_task, stale)
        with pytest.raises(LockWaitExceeded):  # figures to measure: it waits for the timing to end
            measure_reference_baselines(CPU, request, GpuLock(locks, max_wait_s=0.2))
    finally:
        os.close(fd)
