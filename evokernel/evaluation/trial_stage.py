"""One correctness trial: the candidate's call in its worker and the reference's here, on one
seed's inputs, compared within the task's tolerance; the call's facts judged by the rule table,
inputs it changed in place, the bit-for-bit repeat on the default sizes' first seed and the
pytorch-recompute rule on their last (supervisor.py drives the stage; this is one step of it)."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Protocol

import torch

from evokernel.evaluation import integrity, replies, timing_stage
from evokernel.evaluation.correctness import compare
from evokernel.evaluation.loading import clone, flatten, make_inputs
from evokernel.evaluation.verdict import StageFailure
from evokernel.types import Status


class Supervisor(timing_stage.Supervisor, Protocol):
    """What a trial uses of :class:`evokernel.evaluation.supervisor.Supervisor`, beyond the
    timing stage's (a protocol: this module does not import the one that imports it)."""

    tolerance: Any
    checks: list[dict[str, Any]]
    nondeterministic: list[str]

    @property
    def ipc(self) -> bool: ...

    def outputs(self, meta: list[dict[str, Any]], blob: bytearray) -> list[Any]: ...


def run_trial(
    sup: Supervisor, task: Any, reference: Any, index: int, seed: int, label: str, nondet: bool
) -> float:
    """One trial of the candidate on ``seed``'s inputs at variant ``index``, its reference run here
    meanwhile; returns the max abs error. Refuses (StageFailure) a wrong, input-modifying or
    recomputing call."""
    trial_seed = 1000 * index + seed
    # The reference runs here, in another process with its own allocator, so the candidate can
    # never be handed the reference's freed output (the point of KernelBench's candidate ->
    # reference -> candidate order). The second candidate run (bit-for-bit determinism, again
    # on a poisoned allocator) is on the default sizes' first seed; other trials run once,
    # which keeps CPU interpreter evaluations near the former two-seed check.
    repeat = 2 if seed == 0 and index == 0 else 1
    # ATen compute ops of both sides, for the pytorch-recompute rule, on the default sizes' last
    # seed: the seeds before it speak first (a wrong or non-tensor output is reported as such).
    record = index == 0 and seed == sup.request.seeds - 1
    reference_ops = integrity.ComputeOps()
    recording = reference_ops if record else contextlib.nullcontext()
    expected: list[Any] = []

    def run_reference() -> None:
        # While the worker runs its trial (this side's inputs and reference call, at full
        # sizes about as long as the candidate's side).
        inputs = make_inputs(task, trial_seed, sup.device)
        with torch.no_grad(), recording:
            expected.extend(flatten(reference(*clone(inputs))))

    started = time.monotonic()
    command = {"op": "trial", "seed": trial_seed, "repeat": repeat, "record_ops": record, "ipc": sup.ipc}
    # The copy of shared outputs and the comparison are GPU work too: inside the shared hold,
    # so they never overlap another candidate's timing.
    with sup.gpu.hold("trial"):
        trial, blob = sup.ask(command, replies.TrialReply, run_reference, lock=False)
        if len(trial.runs) != repeat:
            raise sup.reject("protocol", f"{label}: the worker reported {len(trial.runs)} of {repeat} runs")
        for n, run in enumerate(trial.runs):
            sup.check_facts(run.facts, "trial", f"{label}, seed {seed}, run {n + 1}")
        got = sup.outputs(trial.outputs, blob)
        result = compare(got, expected, sup.tolerance, [m.get("device") for m in trial.outputs])
    trial_s = time.monotonic() - started  # on a CPU the first of a variant includes its JIT builds
    where = f"{label}, seed {seed}"
    sup.checks.append(
        {
            "variant": index,
            "label": label,
            "seed": seed,
            "ok": result.ok,
            "max_abs_error": result.max_abs_error,
            "seconds": round(trial_s, 4),
        }
    )
    if not result.ok:
        raise StageFailure(Status.INCORRECT, "correctness", f"{where}: {result.message}")
    changed = sorted({i for run in trial.runs for i in run.inputs_changed})
    if changed:
        raise StageFailure(
            Status.INCORRECT, "correctness", f"{where}: the call modified input(s) {changed} in place"
        )
    if not nondet and not trial.deterministic:
        _check_repeat(sup, expected, where)
    if record and not sup.request.allow_torch:
        candidate_ops = trial.runs[0].aten_ops
        if candidate_ops is None:
            raise sup.reject("protocol", "the worker did not report the call's ATen ops")
        why = integrity.recomputed_reference(dict(reference_ops.ops), candidate_ops)
        if why:
            raise sup.reject("pytorch-recompute", f"{where}: {why}")
    return result.max_abs_error or 0.0


def _check_repeat(sup: Supervisor, expected: list[Any], where: str) -> None:
    """The repeat (a second call on the same input, after the allocator was poisoned again)
    exists to catch output that depends on memory the call never wrote or on a race: that
    shows as a second result out of tolerance. Two results that differ in the last bits and
    both match the reference are normal GPU practice (atomics in a reduction, split-K): a fact
    of the verdict (``details["nondeterministic"]``), not a refusal (issue 34)."""
    second, blob = sup.ask({"op": "outputs", "run": 1}, replies.OutputsReply, lock=False)
    result = sup.compared(second.outputs, blob, expected, "the repeat")
    if not result.ok:
        raise StageFailure(
            Status.INCORRECT,
            "correctness",
            f"{where}: a second run on the same input (memory poisoned again) gave another result, "
            f"out of tolerance: {result.message} (output read from memory the call never wrote, "
            "or a race)",
        )
    sup.nondeterministic.append(
        f"{where}: two runs on the same input differ in the last bits, both within tolerance "
        f"(max abs error of the second {result.max_abs_error:.3g})"
    )
