"""The models' mode is the profile's (issue 34): eval mode under ``strict`` and ``kernelbench-v0``
(PIKE's evaluator calls ``model.eval()``), training mode under ``kernelbench`` (KernelBench's never
does). A kernel that folds BatchNorm's running statistics is right in eval mode and wrong in
training mode, where the reference normalizes by the batch's statistics."""

from __future__ import annotations

import pytest

from evokernel.config.schema import EvaluationConfig
from evokernel.evaluation.baselines import software_versions
from evokernel.evaluation.forkserver import ForkServer
from evokernel.evaluation.loading import build_reference
from evokernel.evaluation.profiles import PROFILES
from evokernel.evaluation.request import EvaluationRequest
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.tasks import load_task
from evokernel.types import Status
from tests.core.corpus import FAST_CPU_TIMING, FIXTURES, case_request, load_case
from tests.core.test_rules import judged

FOLDED = load_case(FIXTURES / "legit" / "linear_batchnorm_folded.py")


MODES = [("strict", False), ("kernelbench", True), ("kernelbench-v0", False)]


@pytest.mark.parametrize(("profile", "training"), MODES)
def test_each_profile_names_the_mode_its_field_calls_models_in(profile: str, training: bool) -> None:
    config = EvaluationConfig(profile=profile)
    task = load_task(FOLDED.task)
    request = EvaluationRequest.build(task, "", device="cpu", scale="small", evaluation=config)
    assert request.training is training and PROFILES[profile].training is training
    assert ("training mode" in PROFILES[profile].description) is training


def test_a_reference_is_built_in_the_mode_asked_for() -> None:
    import torch

    from evokernel.evaluation.loading import load_source

    task = load_source(FOLDED.task.read_text(), "evokernel_mode_probe", {})
    assert not build_reference(task, torch.device("cpu")).training
    assert build_reference(task, torch.device("cpu"), training=True).training


def test_baselines_taken_in_training_mode_are_kept_apart() -> None:
    """Eval mode keys as before (cached baselines stay valid); training mode adds itself."""
    assert software_versions("cpu", "queued", training=False) == software_versions("cpu", "queued")
    assert software_versions("cpu", "queued", training=True).endswith(" / training mode")


@pytest.mark.parametrize("profile", list(PROFILES))
def test_a_folded_batchnorm_is_judged_in_its_profiles_mode(profile: str, fork_server: ForkServer) -> None:
    ev = judged(FOLDED, profile, fork_server)
    assert ev.profile == profile
    if PROFILES[profile].training:
        verdict = (ev.status, ev.stage)
        assert verdict == (Status.INCORRECT, "correctness"), f"{ev.status.value}: {ev.reason}"
    else:
        assert ev.status is Status.CORRECT, f"{ev.status.value} at {ev.stage}: {ev.reason}"


def test_the_verify_path_builds_in_training_mode_too() -> None:
    """The same through run_sandboxed's own launch (as ``evokernel verify`` does)."""
    ev = run_sandboxed(case_request(FOLDED, "kernelbench"), FOLDED.timeout_s)
    assert ev.status is Status.INCORRECT, f"{ev.status.value}: {ev.reason}"
    assert "out of tolerance" in ev.reason


def test_verify_says_which_mode_the_verdict_was_reached_in() -> None:
    from evokernel.evaluation.verify import format_report
    from evokernel.types import Evaluation

    kernelbench = format_report(Evaluation(Status.CORRECT, profile="kernelbench"))
    assert "profile: kernelbench (" in kernelbench and "training mode (KernelBench today)" in kernelbench
    assert "eval mode" in format_report(Evaluation(Status.INCORRECT, profile="strict"))


GUARDED = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.bn = nn.BatchNorm1d(features)

    def forward(self, x):
        h = self.bn(self.linear(x))
        if self.training:  # what published kernels do: their kernel only for inference
            return torch.relu(h)
        y = torch.empty_like(h)
        _relu[(triton.cdiv(h.numel(), 1024),)](h, y, h.numel(), BLOCK=1024)
        return y
"""


def test_an_own_kernel_refusal_in_training_mode_says_the_mode(fork_server: ForkServer) -> None:
    """A kernel kept for eval mode behind ``if self.training``: accepted in eval mode, refused by
    own-kernel under kernelbench, whose reason says the models ran in training mode."""
    task = load_task(FOLDED.task)
    for profile, accepted in (("kernelbench-v0", True), ("kernelbench", False)):
        config = EvaluationConfig(profile=profile, compile_baseline="off")
        request = EvaluationRequest.build(
            task, GUARDED, device="cpu", scale="small", timing=FAST_CPU_TIMING, evaluation=config
        )
        ev = run_sandboxed(request.to_json(), 300, launcher=fork_server.spawn)
        if accepted:
            assert ev.status is Status.CORRECT, f"{profile}: {ev.status.value}: {ev.reason}"
        else:
            assert "rule own-kernel" in ev.reason and "training mode" in ev.reason, ev.reason
