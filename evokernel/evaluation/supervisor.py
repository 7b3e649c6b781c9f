"""The stages as the supervisor drives them: build, correctness, integrity, timing, profiling
(when ``evaluation.profiling`` asks for it: profiling/stage.py), feedback.

Each stage is timed and recorded with its own status and reason in ``details["stages"]``. The
worker is driven over :mod:`evokernel.evaluation.channel`; every wait has the evaluation's
deadline, so a hang is a ``timeout`` of the stage it happened in, and a worker that dies is
``crashed`` with its signal or exit code.

The stage sequence up to timing is one concept, read top to bottom; one correctness trial
(trial_stage.py), the worker process's handling (worker_process.py), the rule table (rules.py),
the timing stage (timing_stage.py), the verdict (verdict.py) and the profiling stage
(profiling/stage.py) are apart.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from evokernel.evaluation import channel, replies, rules, timing_stage, trial_stage
from evokernel.evaluation.correctness import Comparison, compare
from evokernel.evaluation.cpu_usage import supervisor_seconds
from evokernel.evaluation.gpulock import GpuLock
from evokernel.evaluation.inline_builds import inline_build_note
from evokernel.evaluation.loading import build_reference, load_source, make_inputs
from evokernel.evaluation.object_cache import ObjectCache, object_note
from evokernel.evaluation.profiling import stage as profiling
from evokernel.evaluation.replies import R
from evokernel.evaluation.request import EvaluationRequest
from evokernel.evaluation.verdict import StageFailure
from evokernel.evaluation.worker_process import WorkerProcess
from evokernel.types import Evaluation, Status

__all__ = ["StageFailure", "Supervisor"]


class Supervisor:
    def __init__(
        self, request: EvaluationRequest, sock: socket.socket, worker_pid: int, start: float
    ) -> None:
        self.request, self.sock = request, sock
        self.worker = WorkerProcess(sock, worker_pid)
        # A confirmation's second worker, running the incumbent (harness.py; timing_stage.py).
        self.incumbent: WorkerProcess | None = None
        # GPU lock waits (gpulock.py) are the pool's doing: they extend the deadline, not use it up.
        self.gpu = GpuLock.from_request(request)
        self.base_deadline = start + request.timeout_s
        self.device = torch.device(request.device)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.workdir = Path(request.workdir) if request.workdir is not None else Path.cwd()
        self.tolerance = request.task.tolerance
        self.stages: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []
        # How the candidate got the reference's weights, per variant (loading.copy_reference_weights).
        self.weights: dict[str, list[int]] = {}
        self.entry_class = "ModelNew"
        # The worker's load_inline builds, made here on the trusted side (evaluation/object_cache.py).
        self.objects: ObjectCache | None = None
        # Only a root that exists now existed when the worker confined itself (it was forked
        # first): one made later would be unreadable to it (Landlock rules name existing paths).
        if request.object_cache and Path(request.object_cache).is_dir():
            # The build reads the precompiled header, never the other objects.
            reads = [request.torch_pch] if request.torch_pch else []
            self.objects = ObjectCache(
                Path(request.object_cache),
                request.isolation,
                reads,
                dict(os.environ),
                # evaluation.builds=pool: misses go to the Ray build pool through the actor.
                pool=request.build_pool,
                gate=request.build_gate,
                # A build the node held back moves the deadline, as the GPU lock's waits do
                # (build_clock.py), by the timeout at most.
                max_held_s=request.timeout_s,
            )
        # load_inline builds that failed while the candidate was imported and that it caught.
        self.failed_builds: list[str] = []
        self.stage, self.stage_start, self.stage_waited = "build", time.perf_counter(), 0.0
        self.stage_cpu = self._cpu_now()
        # Why a CUDA IPC handle failed to open, after which trial outputs come as bytes.
        self.ipc_failure = ""
        self.isolation: dict[str, Any] = {}
        # The task's minimum bytes and FLOPs (profiling/verdict.py), for the speed of light.
        self.work: dict[str, Any] | None = None
        self.timed_reference: tuple[Any, Any] | None = None
        # The eager reference's side of the paired timing (timing_stage.py).
        self.paired_reference: dict[str, Any] | None = None
        # Trials whose repeat differed bit for bit within tolerance (_check_repeat).
        self.nondeterministic: list[str] = []

    @property
    def deadline(self) -> float:
        return self.base_deadline + self.gpu.waited_s + self.build_held_s

    @property
    def build_held_s(self) -> float:
        """Seconds the node held this candidate's builds back (build_clock.py)."""
        return self.objects.held_s if self.objects is not None else 0.0

    # ---- the worker link ------------------------------------------------------------------
    def ask(
        self,
        command: dict[str, Any],
        kind: type[R],
        meanwhile: Callable[[], Any] | None = None,
        limit_s: float | None = None,
        lock: bool = True,
        worker: WorkerProcess | None = None,
    ) -> tuple[R, bytearray]:
        """Send ``command`` and return the worker's answer, decoded as a ``kind`` (replies.py: one
        that does not decode is rule ``protocol``, a candidate's failure a :class:`StageFailure`);
        ``meanwhile`` (the supervisor's own share of the step, e.g. the reference run of a trial)
        runs while the worker works.
        ``limit_s``: a shorter deadline for this step (the profiling stage's). ``lock`` False: the
        caller holds the GPU lock the op needs already (the timing stage's phases). ``worker``:
        another worker than the candidate's (a confirmation's incumbent)."""
        if not lock:
            return self._ask(command, kind, meanwhile, limit_s, worker)
        with self.gpu.hold(str(command["op"])):
            return self._ask(command, kind, meanwhile, limit_s, worker)

    def _ask(
        self,
        command: dict[str, Any],
        kind: type[R],
        meanwhile: Callable[[], Any] | None,
        limit_s: float | None = None,
        worker: WorkerProcess | None = None,
    ) -> tuple[R, bytearray]:
        deadline = self.deadline if limit_s is None else min(self.deadline, time.perf_counter() + limit_s)
        worker = worker or self.worker
        sock = worker.sock
        try:
            if deadline - time.perf_counter() <= 0:
                raise TimeoutError
            sock.settimeout(deadline - time.perf_counter())
            channel.send(sock, command)
            if meanwhile is not None:
                meanwhile()
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
            header, blob = channel.recv(sock)
            answer = self._decoded(header, kind)
            while isinstance(answer, replies.BuildRequest):
                held = self.build_held_s
                reply = self._build(answer.call, deadline)
                deadline += self.build_held_s - held
                channel.send(sock, reply)
                sock.settimeout(max(0.001, deadline - time.perf_counter()))
                header, blob = channel.recv(sock)
                answer = self._decoded(header, kind)
        except TimeoutError as exc:
            worker.kill()
            what = f"{command['op']} {command.get('index', '')}".strip()
            held_s = self.build_held_s
            also = f" (and {held_s:.0f} s its builds were held back)" if held_s >= 1 else ""
            raise StageFailure(
                Status.TIMEOUT,
                self.stage,
                f"killed after the {self.request.timeout_s:.0f} s timeout{also} during {what}",
                f"the evaluation did not finish within {self.request.timeout_s:.0f} s ({self.stage})",
            ) from exc
        except (channel.ChannelError, OSError) as exc:
            raise StageFailure(Status.CRASHED, self.stage, worker.death_reason(exc, self.stage)) from exc
        if isinstance(answer, replies.Failure):
            if answer.status not in (Status.COMPILE_ERROR.value, Status.RUNTIME_ERROR.value):
                raise StageFailure(Status.REJECTED, "integrity", "rule protocol: worker sent a forged status")
            raise StageFailure(Status(answer.status), self.stage, answer.reason, answer.feedback)
        return answer, blob

    def _decoded(self, header: dict[str, Any], kind: type[R]) -> R | replies.Failure | replies.BuildRequest:
        try:
            return replies.decode(header, kind)
        except rules.ProtocolViolation as exc:
            raise self.reject("protocol", str(exc)) from exc

    def _build(self, call: Any, deadline: float) -> dict[str, Any]:
        if self.objects is None:
            return {"local": "no object cache"}
        return self.objects.answer(call, deadline)

    def stop_worker(self) -> None:
        self.worker.stop()

    # ---- stages ---------------------------------------------------------------------------
    def enter(self, stage: str) -> None:
        self.stage, self.stage_start, self.stage_waited = stage, time.perf_counter(), self.gpu.waited_s
        self.stage_cpu = self._cpu_now()

    def passed(self, reason: str = "") -> None:
        self.stages.append({"stage": self.stage, "status": "passed", "reason": reason, **self._spent()})

    def skipped(self, reason: str) -> None:
        self.stages.append({"stage": self.stage, "status": "skipped", "reason": reason, "seconds": 0.0})

    def _spent(self) -> dict[str, float]:
        """The stage's wall seconds (GPU lock waits left out: recorded as queue time instead) and
        core-seconds (cpu_usage.py)."""
        waited = self.gpu.waited_s - self.stage_waited
        return {
            "seconds": round(time.perf_counter() - self.stage_start - waited, 4),
            "cpu_s": round(self._cpu_now() - self.stage_cpu, 3),
        }

    def _cpu_now(self) -> float:
        return supervisor_seconds(self.worker.pid if self.worker.status is None else None)

    def failed(self, failure: StageFailure) -> Evaluation:
        self.stages.append(
            {"stage": failure.stage, "status": "failed", "reason": failure.reason, **self._spent()}
        )
        return Evaluation(
            status=failure.status,
            stage=failure.stage,
            reason=failure.reason,
            feedback=failure.feedback,
            details=self.details(),
        )

    def details(self) -> dict[str, Any]:
        return {
            "stages": self.stages,
            "checks": self.checks,
            "entry_class": self.entry_class,
            "weights": {how: variants for how, variants in self.weights.items() if how},
            "isolation": self.isolation,
            **({"nondeterministic": self.nondeterministic} if self.nondeterministic else {}),
            **({"object_cache": self.objects.summary()} if self.objects and self.objects.counts else {}),
        }

    def _own_kernel_note(self) -> str:
        if self.request.training and not self.failed_builds:
            # Published kernels branch on self.training and keep their kernel for eval mode.
            return "; this profile calls the models in training mode, as KernelBench does"
        if not self.failed_builds:
            return ""
        return (
            "; its load_inline build failed at import and the candidate caught it, so its PyTorch "
            f"fallback ran: {' | '.join(self.failed_builds)}"
        )[:700]

    def reject(self, rule: str, reason: str) -> StageFailure:
        return StageFailure(Status.REJECTED, "integrity", f"rule {rule}: {reason}")

    def check_facts(self, raw: Any, kind: str, where: str) -> None:
        """Every rule of the table (rules.py) that judges a ``kind`` call, on the facts the worker
        reported; a missing or mistyped fact is the worker's protocol violation."""
        try:
            facts = rules.CallFacts.decode(raw)
        except rules.ProtocolViolation as exc:
            raise self.reject("protocol", f"{where}: {exc}") from exc
        broken = rules.broken_rule(facts, kind, where, self.request.allow_torch, self._own_kernel_note())
        if broken:
            raise self.reject(*broken)

    def run(self) -> Evaluation:
        self.enter("build")
        # Both CUDA contexts are made here, before any GPU lock is taken: the worker's in its build
        # step, the supervisor's meanwhile (~0.3 s each of driver work that held the lock before).
        built, _ = self.ask({"op": "build"}, replies.ImportReply, self._init_device)
        self.isolation = built.isolation  # the worker's word: shown, never trusted
        self.check_facts(built.facts, "import", "import")
        self.entry_class = built.entry_class
        self.failed_builds = [str(x) for x in built.failed_builds][:3]
        note = inline_build_note(built.inline_builds)
        cached = object_note(self.objects.counts) if self.objects else ""
        self.passed("; ".join(x for x in (note, cached, f"evaluated class {self.entry_class}") if x))

        self.enter("correctness")
        worst, nondeterministic = 0.0, self.request.task.nondeterministic
        variants = [(i, o, False) for i, o in enumerate(self.request.overrides)]
        if self.request.unseen is not None:
            variants.append((len(variants), self.request.unseen, True))
        for index, overrides, unseen in variants:
            task = load_source(self.request.task.source, f"evokernel_reference_{index}", overrides)
            try:
                with self.gpu.hold("reference"):
                    reference = build_reference(task, self.device, self.request.training)
                    inputs = make_inputs(task, 0, self.device)
                    if index == 0:  # the timing stage's check call compares against it
                        self.timed_reference = (task, reference)
                    if index == 0 and self.device.type == "cuda" and profiling.wanted(self.request):
                        self.work = profiling.task_work(reference, inputs)
            except Exception as exc:
                if not unseen:
                    raise
                self.checks.append({"variant": "unseen", "skipped": f"reference fails: {exc!r}"[:200]})
                continue
            label = (
                f"unseen variant {overrides}"
                if unseen
                else f"variant {index} {overrides or '(default sizes)'}"
            )
            made, _ = self.ask(
                {"op": "variant", "index": index, "overrides": overrides}, replies.VariantReply
            )
            self.weights.setdefault(made.weights, []).append(index)
            if self.device.type == "cuda":
                # The candidate's JIT builds for these sizes, outside the GPU lock (worker.warm).
                # Triton's interpreter builds nothing: on a CPU the call would only cost time.
                warm, _ = self.ask({"op": "warm"}, replies.WarmReply)
                self.check_facts(warm.facts, "warm", f"{label}, warm-up call")
            # Declared variants get every seed; the unseen one a single seed, which is enough to
            # expose a kernel built for the shown shapes and keeps CPU evaluations short.
            for seed in range(1 if unseen else self.request.seeds):
                worst = max(
                    worst, trial_stage.run_trial(self, task, reference, index, seed, label, nondeterministic)
                )
        self.passed(f"{len(self.checks)} trials, max abs error {worst:.3g}")
        self.enter("integrity")
        self.passed(
            "own kernel launched in every call; no fallback taken; no threads, processes or harness "
            "changes; no work left running on other streams"
        )
        return timing_stage.run(self, worst)

    @property
    def ipc(self) -> bool:
        """Trial outputs come as CUDA IPC handles on a GPU until one fails to open (channel.py)."""
        return self.device.type == "cuda" and not self.ipc_failure

    def outputs_via(self) -> str:
        if self.device.type != "cuda":
            return "bytes"
        return "cuda-ipc" if self.ipc else f"bytes (CUDA IPC failed: {self.ipc_failure})"

    def outputs(self, meta: list[dict[str, Any]], blob: bytearray) -> list[Any]:
        """A trial's outputs: through CUDA IPC while it works, then as bytes (resent)."""
        try:
            try:
                return channel.decode_tensors(meta, blob, self.device)
            except channel.SharingError as exc:
                # IPC unavailable here (or a forged handle): the bytes, for this and later trials.
                self.ipc_failure = str(exc)[:300] or type(exc).__name__
                again, blob = self._ask({"op": "outputs"}, replies.OutputsReply, None)
                return channel.decode_tensors(again.outputs, blob, self.device)
        except (channel.ChannelError, KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise self.reject("protocol", f"undecodable outputs: {exc}") from exc

    def compared(
        self, meta: list[dict[str, Any]], blob: bytearray, expected: list[Any], what: str
    ) -> Comparison:
        """The outputs the worker sent as bytes (``meta``: their descriptions), compared with
        ``expected``; outputs that do not decode are the worker's protocol violation."""
        try:
            got = channel.decode_tensors(meta, blob, self.device)
        except (channel.ChannelError, KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise self.reject("protocol", f"undecodable outputs of {what}: {exc}") from exc
        return compare(got, expected, self.tolerance, [m.get("device") for m in meta])

    def _init_device(self) -> None:
        if self.device.type == "cuda":
            torch.empty(1, device=self.device)
