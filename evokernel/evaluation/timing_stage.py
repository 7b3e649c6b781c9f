"""The timing stage as the supervisor drives it (:meth:`Supervisor.run` ends here): the worker
times the candidate on buffers refilled with other values before every call, then makes one
call on values none of the timed calls saw (worker.time says why); the supervisor judges the
timed loop's and that call's facts by the rule table, compares that call's output with its own
reference, checks the side-stream tail, then measures or reads the baselines, profiles when asked
and writes the feedback.

What enters: a supervisor whose correctness stage passed (its variant-0 task and reference are
``timed_reference``). What leaves: the correct :class:`~evokernel.types.Evaluation`, or a
:class:`~evokernel.evaluation.verdict.StageFailure`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import torch

from evokernel.evaluation import integrity
from evokernel.evaluation.baselines import measure_reference_baselines
from evokernel.evaluation.feedback import timing_feedback
from evokernel.evaluation.loading import flatten, make_inputs
from evokernel.evaluation.profiling import stage as profiling
from evokernel.evaluation.verdict import StageFailure, correct_evaluation
from evokernel.types import Evaluation

if TYPE_CHECKING:
    from evokernel.evaluation.correctness import Comparison
    from evokernel.evaluation.gpulock import GpuLock


class Supervisor(profiling.Supervisor, Protocol):
    """What the stage uses of :class:`evokernel.evaluation.supervisor.Supervisor` (a protocol, so
    this module does not import the one that imports it)."""

    work: dict[str, Any] | None
    timed_reference: tuple[Any, Any] | None
    stages: list[dict[str, Any]]
    gpu: GpuLock

    def check_facts(self, raw: Any, kind: str, where: str) -> None: ...

    def reject(self, rule: str, reason: str) -> StageFailure: ...

    def details(self) -> dict[str, Any]: ...

    def outputs_via(self) -> str: ...

    def compared(
        self, header: dict[str, Any], key: str, blob: bytearray, expected: list[Any], what: str
    ) -> Comparison: ...


# The timed calls' inputs alternate between these seeds' values (refilled in place before every
# call); the check call after them gets a seed no trial or timed call used.
TIMING_SEEDS = (0, 1)
TIMING_CHECK_SEED = 7_000_003


def run(sup: Supervisor, worst: float) -> Evaluation:
    sup.enter("timing")
    if len(sup.request["overrides"]) > 1 or sup.request.get("unseen") is not None:
        sup.ask({"op": "variant", "index": 0, "overrides": sup.request["overrides"][0]})
    command = {
        "op": "time",
        "rotation": list(TIMING_SEEDS),
        "check_seed": TIMING_CHECK_SEED,
        "settings": sup.request["timing"],
    }
    header, blob = sup.ask(command)
    sup.check_facts(header.get("facts"), "timing", "timing")
    sup.check_facts(header.get("check"), "check", "timing, the call after the timed ones")
    _check_timed_result(sup, header, blob)
    new = header["timing"]
    why = integrity.side_stream_work(new)
    if why:
        raise sup.reject("side-stream", why)
    profile = profiling.wanted(sup.request)
    if not profile:  # else the profiling stage profiles the warm worker after the baselines
        sup.stop_worker()
    baselines = measure_reference_baselines(sup.device, sup.request, sup.gpu)
    sup.passed()
    details: dict[str, Any] = {**sup.details(), "outputs_via": sup.outputs_via()}
    if profile:
        details["profiling"] = profiling.profile_candidate(sup, sup.work, float(new["median_ms"]))
    sup.enter("feedback")
    feedback = timing_feedback(
        new, baselines.get("eager"), baselines.get("compile"), worst, sup.device.type == "cpu"
    )
    sup.passed()
    return correct_evaluation(new, baselines, worst, feedback, {**details, "stages": sup.stages})


def _check_timed_result(sup: Supervisor, header: dict[str, Any], blob: bytearray) -> None:
    """The call after the timed ones ran on values none of them saw, in the same buffers: its
    output must match the reference's on those values (rule ``timed-result``)."""
    assert sup.timed_reference is not None
    task, reference = sup.timed_reference
    with sup.gpu.hold("reference"), torch.no_grad():
        expected = flatten(reference(*make_inputs(task, TIMING_CHECK_SEED, sup.device)))
    result = sup.compared(header, "check_outputs", blob, expected, "the timing check")
    if not result.ok:
        raise sup.reject(
            "timed-result",
            "after the timed calls, the same input buffers refilled with new values gave a wrong "
            f"result ({result.message}): the timed calls returned something other than a "
            "computation on their inputs (a result cached by the inputs' identity?)",
        )
