"""The typed evaluation request: built in one place, plain JSON only at the sandbox's line."""

from __future__ import annotations

import dataclasses
import json

import pytest

from evokernel.config import EvaluationConfig, TimingConfig
from evokernel.evaluation.request import EvaluationRequest, build_request
from evokernel.types import Task


def test_one_request_built_once_and_sent_as_json(axpy_task: Task) -> None:
    config = EvaluationConfig(timeout_s=42.0, seeds=4, allow_torch=True)
    request = EvaluationRequest.build(axpy_task, "src", device="cpu", scale="small", evaluation=config)
    assert (request.timeout_s, request.seeds, request.allow_torch) == (42.0, 4, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.seeds = 5  # type: ignore[misc]
    sent = request.to_json()
    assert json.loads(json.dumps(sent)) == sent  # crosses the process line as JSON
    assert "timeout_s" not in sent and "mode" not in sent and "gpu_lock" not in sent
    assert sent["candidate_source"] == "src" and sent["task"]["name"] == axpy_task.name
    assert sent["timing"] == dataclasses.asdict(config.timing)
    # The dict callers of the sandbox get is the same request.
    legacy = build_request(axpy_task, "src", device="cpu", scale="small", seeds=4, evaluation=config)
    assert legacy == sent


def test_baselines_request_and_the_actor_parts(axpy_task: Task) -> None:
    timing = TimingConfig(min_reps=3)
    request = EvaluationRequest.build(axpy_task, "src", device="cpu", scale="small", timing=timing)
    base = request.for_baselines().to_json()
    assert (base["mode"], base["static_checks"], base["candidate_source"]) == ("baselines", False, "")
    assert base["timing"]["min_reps"] == 3
    placed = dataclasses.replace(request, gpu_lock={"dir": "/tmp/x", "max_wait_s": 1.0}, torch_pch="/h")
    assert placed == request  # where it runs is not what it asks
    assert placed.to_json()["gpu_lock"] == {"dir": "/tmp/x", "max_wait_s": 1.0}
