"""The timing stage as the supervisor drives it (:meth:`Supervisor.run` ends here): the candidate
(in the worker) and the eager reference (here) are timed in alternating blocks in one window
under the exclusive GPU lock (pairing.py says why), on buffers refilled with other values before
every call; then the worker makes one call on values none of the timed calls saw
(worker_timing.py says why). The supervisor judges the timed calls' and that call's facts by the
rule table, compares that call's output with its own reference, checks the side-stream tail,
then reads or measures the cached baselines (``torch.compile``'s, and the CUDA-graph figures a
launch-bound task is compared by), profiles when asked and writes the feedback.

What enters: a supervisor whose correctness stage passed (its variant-0 task and reference are
``timed_reference``). What leaves: the correct :class:`~evokernel.types.Evaluation`, or a
:class:`~evokernel.evaluation.verdict.StageFailure`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from typing import TYPE_CHECKING, Any, Protocol

import torch

from evokernel.evaluation import confirmation, cpu_pin, host_clock, integrity, quiet, replies, round_gate
from evokernel.evaluation.baselines import measure_reference_baselines
from evokernel.evaluation.block_timer import BlockTimer
from evokernel.evaluation.clocks import gpu_users, shared_with, wait_gpu_alone
from evokernel.evaluation.feedback import timing_feedback
from evokernel.evaluation.host_speed import window_spread
from evokernel.evaluation.loading import clone, flatten, make_inputs
from evokernel.evaluation.pairing import Block, PairedRatio, PairingError, paired_ratios, with_window_spread
from evokernel.evaluation.profiling import stage as profiling
from evokernel.evaluation.timing import TimingSettings
from evokernel.evaluation.timing_window import quiet_window
from evokernel.evaluation.verdict import StageFailure, correct_evaluation
from evokernel.evaluation.worker_timing import copy_values
from evokernel.types import Evaluation, Status

if TYPE_CHECKING:
    from evokernel.evaluation.correctness import Comparison
    from evokernel.evaluation.gpulock import GpuLock
    from evokernel.evaluation.worker_process import WorkerProcess


class Supervisor(confirmation.Supervisor, Protocol):
    """What the stage uses of :class:`evokernel.evaluation.supervisor.Supervisor` (a protocol, so
    this module does not import the one that imports it)."""

    work: dict[str, Any] | None
    timed_reference: tuple[Any, Any] | None
    stages: list[dict[str, Any]]
    gpu: GpuLock
    paired_reference: dict[str, Any] | None
    worker: WorkerProcess

    def reject(self, rule: str, reason: str) -> StageFailure: ...

    def details(self) -> dict[str, Any]: ...

    def outputs_via(self) -> str: ...

    def compared(
        self, meta: list[dict[str, Any]], blob: bytearray, expected: list[Any], what: str
    ) -> Comparison: ...


# The timed calls' inputs alternate between these seeds' values (refilled in place before every
# call); the check call after them gets a seed no trial or timed call used.
TIMING_SEEDS = (0, 1)
TIMING_CHECK_SEED = 7_000_003


def run(sup: Supervisor, worst: float) -> Evaluation:
    sup.enter("timing")
    if len(sup.request.overrides) > 1 or sup.request.unseen is not None:
        sup.ask({"op": "variant", "index": 0, "overrides": sup.request.overrides[0]}, replies.VariantReply)
    confirming: dict[str, Any] = {}
    if sup.incumbent is not None:
        try:
            confirmation.prepare(sup, sup.device.type == "cuda")
        except confirmation.IncumbentLost as exc:
            confirming["error"] = str(exc)[:500]
            _drop_incumbent(sup)
    paired, finished, blob = _paired_timing(sup, sup.request.timing, confirming)
    sup.check_facts(finished.facts, "timing", "timing")
    sup.check_facts(finished.check, "check", "timing, the call after the timed ones")
    _check_timed_result(sup, finished.check_outputs, blob)
    new = finished.timing.to_dict()
    reference_host = (sup.paired_reference or {}).get("host")
    spread = window_spread(sup.request.timing, paired.a_ms, paired.b_ms, new.get("host"), reference_host)
    paired = with_window_spread(paired, spread)
    why = integrity.side_stream_work(new)
    if why:
        raise sup.reject("side-stream", why)
    profile = profiling.wanted(sup.request)
    if not profile:  # else the profiling stage profiles the warm worker after the baselines
        sup.stop_worker()
    baselines = measure_reference_baselines(sup.device, sup.request, sup.gpu)
    sup.passed(
        f"speedup {paired.ratio:.3g}x over eager in the same window, 95 % interval "
        f"{paired.low:.3g}-{paired.high:.3g} ({paired.pairs} pairs, stopped by {paired.stopped}, "
        f"{100 * paired.window_spread:.1f} % between windows added)"
        + shared_with((sup.paired_reference or {}).get("gpu") or {})
    )
    details: dict[str, Any] = {**sup.details(), "outputs_via": sup.outputs_via()}
    if confirming:
        details["confirmation"] = confirming
    if profile:
        details["profiling"] = profiling.profile_candidate(sup, sup.work, float(finished.timing.median_ms))
    sup.enter("feedback")
    eager = {**(baselines.get("eager") or {}), "median_ms": paired.b_ms}
    feedback = timing_feedback(
        {**new, "median_ms": paired.a_ms}, eager, baselines.get("compile"), worst, sup.device.type == "cpu"
    )
    sup.passed()
    paired_timing = {**paired.to_dict(), "reference": sup.paired_reference}
    return correct_evaluation(
        new, baselines, worst, feedback, {**details, "stages": sup.stages}, paired_timing
    )


def _paired_timing(
    sup: Supervisor, settings: TimingSettings, confirming: dict[str, Any]
) -> tuple[PairedRatio, replies.FinishReply, bytearray]:
    """The candidate (in the worker) and the eager reference (here) timed in alternating blocks on
    the same inputs, in one window under the exclusive GPU lock (pairing.py), with a
    confirmation's incumbent as a third side; then the workers' ``finish`` phase, whose check call
    runs on values no timed call saw. ``confirming`` receives the confirmation's record."""
    assert sup.timed_reference is not None
    task, reference = sup.timed_reference
    sets = [make_inputs(task, seed, sup.device) for seed in TIMING_SEEDS]
    buffers = clone(sets[0])
    turn = [0]

    def refill() -> None:
        turn[0] += 1
        copy_values(buffers, sets[turn[0] % len(sets)])

    waits: list[cpu_pin.ThreadWait] = []  # each worker's calling thread, per block (RoundGate)

    def worker_block(worker: WorkerProcess | None) -> Block:
        wait = cpu_pin.ThreadWait((worker or sup.worker).pid)
        waits.append(wait)

        def block(calls: int) -> list[float]:
            command = {"op": "time", "phase": "block", "calls": calls}
            wait.begin()
            answer, _ = sup.ask(command, replies.BlockReply, lock=False, worker=worker)
            wait.end()
            samples = answer.samples
            if len(samples) != calls or not all(
                isinstance(x, float) and math.isfinite(x) and x >= 0 for x in samples
            ):
                what = f"the worker answered a block of {calls} timed calls with {samples!r:.80}"
                raise sup.reject("protocol", what)
            return samples

        return block

    start = {
        "op": "time",
        "phase": "settle",
        "rotation": list(TIMING_SEEDS),
        "settings": dataclasses.asdict(settings),  # the worker's copy (worker_timing.py)
    }
    pins = [sup.worker.pid] + ([sup.incumbent.pid] if sup.incumbent is not None else [])
    same_cpu = settings.same_cpu and sup.device.type == "cuda"  # cpu_pin.py says why, and why GPU only
    # The node's registry, handed to this supervisor (launcher.sandbox_env): the node's windows
    # never share a CPU (cpu_pin.py).
    claims = quiet.node_registry() / "cpus"
    limit = settings.host_slowdown_limit  # host_speed.py
    own = {os.getpid(), *pins}  # the window's processes: any other running kernels shares it
    marks = [time.perf_counter()]  # the window's phases, for where a timing's lock time goes
    window, pinned, drained = quiet_window(
        sup.gpu,
        sup.device,
        lambda: cpu_pin.one_cpu(pins, claims, limit) if same_cpu else contextlib.nullcontext(None),
        lambda device: wait_gpu_alone(device, own),
        stranger_patience_s=settings.stranger_patience_s,
    )
    with window, torch.no_grad():
        marks.append(time.perf_counter())
        since_us = time.time_ns() // 1000
        dispatch = [host_clock.dispatch_us(sup.device)]  # the eager path's speed (not gated on)
        settled, _ = sup.ask(start, replies.SettleReply, lock=False)
        timer = BlockTimer(lambda: reference(*buffers), sup.device, settings, refill)
        sides, call_ms = [worker_block(None), timer.block], [settled.call_ms, timer.settle()]
        if sup.incumbent is not None:
            try:
                with confirmation.lost("while warming up for timing"):
                    theirs_settled, _ = sup.ask(start, replies.SettleReply, lock=False, worker=sup.incumbent)
                sides.append(worker_block(sup.incumbent))
                call_ms.append(theirs_settled.call_ms)
            except confirmation.IncumbentLost as exc:
                confirming["error"] = str(exc)[:500]
                _drop_incumbent(sup)
        marks.append(time.perf_counter())
        try:
            gate = None
            if pinned is not None:
                gate = round_gate.for_window(pinned, timer, waits, settings, sup.device)
            ratios = paired_ratios(sides, call_ms, settings, gate)
            if gate is not None:  # one reading per round, in the order of ratios' round_ratios
                gate.close()
        except PairingError as exc:
            raise StageFailure(Status.RUNTIME_ERROR, "timing", f"timing: {exc}") from exc
        marks.append(time.perf_counter())
        finish = {"op": "time", "phase": "finish", "check_seed": TIMING_CHECK_SEED}
        finished, blob = sup.ask(finish, replies.FinishReply, lock=False)
        if sup.incumbent is not None:
            try:
                with confirmation.lost("the checks after its timed calls"):
                    theirs, their_blob = sup.ask(
                        finish, replies.FinishReply, lock=False, worker=sup.incumbent
                    )
                    sup.check_facts(theirs.facts, "timing", "the incumbent's timing")
                    sup.check_facts(theirs.check, "check", "the incumbent's call after the timed ones")
                    _check_timed_result(sup, theirs.check_outputs, their_blob)
                confirming.update(confirmation.record(ratios[1]))
            except confirmation.IncumbentLost as exc:
                confirming["error"] = str(exc)[:500]
            _drop_incumbent(sup)
        dispatch.append(host_clock.dispatch_us(sup.device))
        if pinned is not None:  # the same dict: the window's exit adds ``busiest`` (cpu_pin.py)
            pinned.record["dispatch_us"] = dispatch
        # Who else ran kernels in the window: another context time-slices the GPU with both sides.
        drained.update(gpu_users(sup.device, since_us, own))
        marks.append(time.perf_counter())
        phases = ("open", "settle", "pairs", "finish")  # open: busy-window waits, drain, CPU claim
        spans = zip(phases, marks[:-1], marks[1:], strict=True)
        sup.paired_reference = {
            **timer.result().to_dict(),
            "gpu": drained,
            "pinned": None if pinned is None else pinned.record,
            "phases_s": {name: round(end - begin, 4) for name, begin, end in spans},
        }
        timer.close()
    return ratios[0], finished, blob


def _drop_incumbent(sup: Supervisor) -> None:
    if sup.incumbent is not None:
        sup.incumbent.stop()
        sup.incumbent = None


def _check_timed_result(sup: Supervisor, outputs: list[dict[str, Any]], blob: bytearray) -> None:
    """The call after the timed ones ran on values none of them saw, in the same buffers: its
    output must match the reference's on those values (rule ``timed-result``)."""
    assert sup.timed_reference is not None
    task, reference = sup.timed_reference
    with sup.gpu.hold("reference"), torch.no_grad():
        expected = flatten(reference(*make_inputs(task, TIMING_CHECK_SEED, sup.device)))
    result = sup.compared(outputs, blob, expected, "the timing check")
    if not result.ok:
        raise sup.reject(
            "timed-result",
            "after the timed calls, the same input buffers refilled with new values gave a wrong "
            f"result ({result.message}): the timed calls returned something other than a "
            "computation on their inputs (a result cached by the inputs' identity?)",
        )
