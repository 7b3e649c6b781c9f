"""The typed evaluation request: built in one place, plain JSON only at a process line, where it
is decoded once and strictly."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from evokernel.config import EvaluationConfig, TimingConfig
from evokernel.evaluation.request import EvaluationRequest, GpuLockSpec, TaskSpec, build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.exceptions import EvaluationError, EvoKernelError, RequestError
from evokernel.types import Task


def test_one_request_built_once_and_sent_as_json(axpy_task: Task) -> None:
    config = EvaluationConfig(timeout_s=42.0, seeds=4, allow_torch=True)
    request = EvaluationRequest.build(axpy_task, "src", device="cpu", scale="small", evaluation=config)
    assert (request.timeout_s, request.seeds, request.allow_torch) == (42.0, 4, True)
    assert isinstance(request.task, TaskSpec) and isinstance(request.timing, TimingConfig)
    assert request.timing is not config.timing  # a copy: the caller's config stays the caller's
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.seeds = 5  # type: ignore[misc]
    sent = request.to_json()
    assert json.loads(json.dumps(sent)) == sent  # crosses the process line as JSON
    assert sent["timeout_s"] == 42.0
    assert "mode" not in sent and "gpu_lock" not in sent and "workdir" not in sent
    assert sent["candidate_source"] == "src" and sent["task"]["name"] == axpy_task.name
    assert sent["timing"] == dataclasses.asdict(config.timing)
    # The dict callers of the sandbox get is the same request.
    legacy = build_request(axpy_task, "src", device="cpu", scale="small", seeds=4, evaluation=config)
    assert legacy == sent


def test_from_json_inverts_to_json(axpy_task: Task) -> None:
    config = EvaluationConfig(profile="kernelbench-v0", timing=TimingConfig(min_reps=3, same_cpu=False))
    request = EvaluationRequest.build(axpy_task, "src", device="cpu", scale="small", evaluation=config)
    for built in (request, request.for_baselines(), dataclasses.replace(request, incumbent_source="old")):
        wire = json.loads(json.dumps(built.to_json()))
        assert EvaluationRequest.from_json(wire) == built
    placed = dataclasses.replace(
        request,
        gpu_lock=GpuLockSpec("/tmp/locks", 5.0, quiet="/tmp/q.sock"),
        torch_pch="/h",
        workdir="/w",
        launched_at=12.5,
    )
    decoded = EvaluationRequest.from_json(json.loads(json.dumps(placed.to_json())))
    # Where it runs is compared apart: equality of requests leaves it out on purpose.
    assert decoded == placed
    assert (decoded.gpu_lock, decoded.torch_pch, decoded.workdir, decoded.launched_at) == (
        placed.gpu_lock,
        "/h",
        "/w",
        12.5,
    )
    assert decoded.task.tolerance == request.task.tolerance  # tuples again, not JSON lists


@pytest.fixture
def wire(axpy_task: Task) -> dict[str, Any]:
    return EvaluationRequest.build(axpy_task, "src", device="cpu", scale="small").to_json()


@pytest.mark.parametrize(
    ("where", "key"),
    [((), "seedz"), (("timing",), "quiet_bulids"), (("task",), "tolerence"), (("gpu_lock",), "quit")],
)
def test_an_unknown_key_is_named_with_the_valid_ones(
    wire: dict[str, Any], where: tuple[str, ...], key: str
) -> None:
    wire["gpu_lock"] = {"dir": "/tmp/locks", "max_wait_s": 1.0}
    part = wire
    for name in where:
        part = part[name]
    part[key] = 1
    with pytest.raises(RequestError, match=rf"unknown key '{key}' \(valid keys: .+\)") as info:
        EvaluationRequest.from_json(wire)
    assert info.value.key == key
    assert isinstance(info.value, EvaluationError) and isinstance(info.value, EvoKernelError)


@pytest.mark.parametrize(
    ("where", "key"),
    [((), "timeout_s"), ((), "profile"), (("timing",), "same_cpu"), (("task",), "nondeterministic")],
)
def test_a_missing_key_is_named(wire: dict[str, Any], where: tuple[str, ...], key: str) -> None:
    part = wire
    for name in where:
        part = part[name]
    del part[key]
    with pytest.raises(RequestError, match=rf"missing key '{key}'") as info:
        EvaluationRequest.from_json(wire)
    assert info.value.key == key


def test_values_of_the_wrong_type_and_unknown_modes_are_refused(wire: dict[str, Any]) -> None:
    for key, value in [("seeds", "3"), ("allow_torch", 1), ("timeout_s", True), ("overrides", {})]:
        with pytest.raises(RequestError, match=key):
            EvaluationRequest.from_json({**wire, key: value})
    with pytest.raises(RequestError, match=r"request\.mode"):
        EvaluationRequest.from_json({**wire, "mode": "baseline"})
    with pytest.raises(RequestError, match="tolerance"):
        EvaluationRequest.from_json({**wire, "task": {**wire["task"], "tolerance": {"float32": [1e-4]}}})
    assert EvaluationRequest.from_json({**wire, "timeout_s": 42}).timeout_s == 42  # JSON's 42.0


def test_the_sandbox_refuses_a_misspelt_request_before_starting_anything(wire: dict[str, Any]) -> None:
    with pytest.raises(RequestError, match="unknown key 'isolaton'"):
        run_sandboxed({**wire, "isolaton": "off"}, 5.0)


def test_baselines_request_and_the_actor_parts(axpy_task: Task) -> None:
    timing = TimingConfig(min_reps=3)
    request = EvaluationRequest.build(axpy_task, "src", device="cpu", scale="small", timing=timing)
    base = request.for_baselines().to_json()
    assert (base["mode"], base["static_checks"], base["candidate_source"]) == ("baselines", False, "")
    assert base["timing"]["min_reps"] == 3
    placed = dataclasses.replace(request, gpu_lock=GpuLockSpec("/tmp/x", 1.0), torch_pch="/h")
    assert placed == request  # where it runs is not what it asks
    assert placed.to_json()["gpu_lock"] == {"dir": "/tmp/x", "max_wait_s": 1.0}
