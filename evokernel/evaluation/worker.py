"""The untrusted side: the only process that imports and runs candidate code.

Forked by the supervisor (:mod:`evokernel.evaluation.harness`) before either touches CUDA. It
closes every descriptor that leads to the sandbox, applies its limits and the network refusal,
installs the launch hooks, then answers the supervisor's commands over one socket: ``build``
(import the candidate, create the CUDA context), ``variant`` (make both models at a variant's
sizes), ``warm`` (one call at those sizes, so Triton's JIT builds happen before the trials),
``trial`` (run the candidate twice on one seed's inputs, recording the first call's ATen compute
ops when asked; its outputs go as CUDA IPC handles when asked), ``outputs`` (the last trial's
outputs again, as bytes), ``time`` and ``exit``. Everything it reports is a claim;
the supervisor checks the outputs against its own reference and decides.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from evokernel.evaluation import channel, guards, inline_builds, integrity, isolation, remote_builds, replies
from evokernel.evaluation.feedback import failure_text, trim_traceback
from evokernel.evaluation.loading import (
    bitwise_equal,
    build_model,
    build_reference,
    candidate_class,
    clone,
    copy_reference_weights,
    flatten,
    is_compile_error,
    load_module,
    load_source,
    make_inputs,
)
from evokernel.evaluation.observe import HOLD_MS_MIN, Observation
from evokernel.evaluation.profiling import timeline
from evokernel.evaluation.request import EvaluationRequest
from evokernel.evaluation.worker_timing import CandidateTiming, TimingFailure, copy_values
from evokernel.evaluation.workspace import enter_candidate_directory

# Poison blocks left in the caching allocator before each candidate call: enough to cover the
# outputs of every bundled task at full size (128 MiB) and to fill the small-block pool.
POISON_MIN_BYTES = 64 << 20
POISON_SMALL_BLOCKS = 16  # x 512 KiB = 4 segments of the allocator's 2 MiB small pool
# Inputs of the warm-up call: a seed no trial uses (trials use 1000 x variant + seed), so an
# output cached during the warm-up is wrong for every trial.
WARM_SEED = 999_983


class CandidateFailure(Exception):
    def __init__(self, status: str, reason: str, feedback: str = "") -> None:
        super().__init__(reason)
        self.status, self.reason, self.feedback = status, reason, feedback or reason


def serve(sock: socket.socket, close_fds: list[int], request: EvaluationRequest, workdir: Path) -> None:
    """Run the worker until ``exit``; never returns normally (``os._exit``) so that no supervisor
    state (atexit handlers, Ray, buffered files) runs a second time in the child."""
    code = 0
    try:
        for fd in close_fds:
            os.close(fd)
        guards.die_with_parent()
        # From here on the candidate's directory: its cwd, HOME, TMPDIR and caches (workspace.py);
        # the supervisor's own stay where it keeps them.
        enter_candidate_directory(workdir)
        if request.device == "cuda" and request.isolation != "off":
            # The driver's start-up (device files, the persistence daemon's socket, /proc and
            # /sys reads) before confinement: under it cudaGetDeviceCount failed with error 304 on
            # the H200 machine. Harness code only; no candidate code has run yet.
            torch.empty(1, device="cuda")
            if request.profiling != "none":
                # CUPTI's 4-6 s start before confinement: started after it, in a worker forked by
                # the pool's fork-server, it stalled every profiled candidate on the H200 machine.
                timeline.prepare("cuda")
        confined = isolation.confine(request.isolation, workdir, isolation.request_reads(request))
        guards.apply_limits(guards.default_limits(request.device, request.timeout_s, request.host_memory_mb))
        guards.refuse_network()
        if request.object_cache and confined.get("mode") != "off":
            remote_builds.install(functools.partial(_ask_supervisor, sock), workdir)
        integrity.install_launch_hooks()
        # Outside the confinement a build directory needs no move (isolation off: tests, benchmarks).
        inline_builds.install(
            request.torch_pch,
            light=request.light_cuda_headers,
            workdir=workdir if confined.get("mode") != "off" else None,
        )
        _Worker(sock, request, workdir, confined).loop()
    except channel.ChannelError:
        code = 3  # the supervisor went away; nothing to report to
    except BaseException:  # noqa: BLE001 - the harness side of the worker failed: say why, then exit
        traceback.print_exc()
        code = 70
    finally:
        sys.stderr.flush()
        os._exit(code)


def _ask_supervisor(sock: socket.socket, call: dict[str, Any]) -> dict[str, Any]:
    """A build request in the middle of a command (evaluation/remote_builds.py)."""
    channel.send(sock, replies.BuildRequest(call).to_json())
    header, _ = channel.recv(sock)
    return header


class _Worker:
    def __init__(
        self, sock: socket.socket, request: EvaluationRequest, workdir: Path, confined: dict[str, Any]
    ) -> None:
        self.sock, self.workdir, self.confined = sock, workdir, confined
        self.request_source = request.task.source
        self.device = torch.device(request.device)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.snapshot = integrity.harness_snapshot()
        self.candidate_module: ModuleType | None = None
        self.entry: Any = None
        # Every stream of torch's pool on the device: where a call's forked work would still run.
        self.pool_streams: list[torch.cuda.Stream] = []
        self.hold_ms = HOLD_MS_MIN  # the own stream's hold before a judged call (observe.py)
        self.training = request.training  # the models' mode (profiles.py)
        self.task: ModuleType | None = None
        self.model: Any = None
        self.out_bytes = 0
        # The last trial's outputs, alive until the supervisor's next command (it copies shared
        # ones before sending it), and the tensors whose IPC handles it was sent.
        self.outputs: list[Any] = []
        self.runs_outputs: list[list[Any]] = []
        self.shared: list[torch.Tensor] = []
        self.held_inputs: list[Any] = []
        self.timing: CandidateTiming | None = None  # between the timing's settle and finish phases

    def loop(self) -> None:
        handlers = {
            "build": self.build,
            "variant": self.variant,
            "warm": self.warm,
            "trial": self.trial,
            "outputs": self.resend,
            "time": self.time,
            "profile": self.profile,
        }
        while True:
            command, _ = channel.recv(self.sock)
            if command["op"] != "outputs" and self.outputs:
                shared, self.outputs, self.shared, self.runs_outputs = bool(self.shared), [], [], []
                if shared:
                    # Blocks the supervisor mapped wait in torch's IPC limbo until their reference
                    # counters drop; hand them back to the allocator now, before the next poisoning
                    # (and before exit, where torch warns about blocks still in limbo).
                    torch.cuda.ipc_collect()
            if command["op"] == "exit":
                channel.send(self.sock, {"ok": True})
                return
            try:
                header, blob = handlers[command["op"]](command)
            except CandidateFailure as failure:
                header = replies.Failure(failure.status, failure.reason, failure.feedback).to_json()
                blob = b""
            channel.send(self.sock, header, blob)

    def build(self, command: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        # Threads and processes the import leaves running predate every call's own count.
        observed = Observation(self.snapshot, self.device)
        try:
            self.candidate_module = load_module(self.workdir / "candidate.py", "evokernel_candidate")
        except Exception as exc:
            raise CandidateFailure("compile_error", *failure_text(exc, "import failed: ")) from exc
        import_facts = observed.facts()
        self.entry = candidate_class(self.candidate_module)
        if self.entry is None:
            raise CandidateFailure(
                "compile_error", "the candidate defines no ModelNew (nor a Model class of its own)"
            )
        if self.device.type == "cuda":
            # The CUDA context (~0.3 s of driver work) now, while the supervisor holds no GPU lock.
            torch.empty(1, device=self.device)
            self.pool_streams = integrity.pool_streams(self.device)
        return replies.ImportReply(
            facts=import_facts,
            inline_builds=dict(inline_builds.counts),
            entry_class=self.entry.__name__,
            failed_builds=list(integrity.failed_builds),
            isolation=self.confined,
        ).to_json(), b""

    def variant(self, command: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        self.held_inputs = []
        # The task from the request in memory, as the supervisor loads it (workspace.py).
        self.task = load_source(
            self.request_source, f"evokernel_reference_{command['index']}", command["overrides"]
        )
        reference = build_reference(self.task, self.device, self.training)
        try:
            # As the reference, and as KernelBench and PIKE build both (loading.build_model).
            self.model = build_model(self.entry, self.task.get_init_inputs(), self.device, self.training)
        except Exception as exc:
            what = f"{self.entry.__name__}(...) raised {type(exc).__name__}"
            raise CandidateFailure("runtime_error", what, trim_traceback(exc)) from exc
        weights = copy_reference_weights(reference, self.model)
        del reference
        return replies.VariantReply(weights).to_json(), b""

    def warm(self, command: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """One call at the variant's sizes whose result nobody looks at: Triton compiles at a
        kernel's first launch (1-4 s of CPU per candidate), and here that happens outside the
        GPU lock the trials hold (gpulock.py). Its failures are the candidate's and its facts are
        checked, as in a trial (a thread started here would otherwise predate every trial)."""
        assert self.task is not None
        _, facts, _ = self._call(make_inputs(self.task, WARM_SEED, self.device))
        return replies.WarmReply(facts).to_json(), b""

    def _call(
        self, inputs: list[Any], record_ops: bool = False
    ) -> tuple[Any, dict[str, Any], dict[str, Any] | None]:
        """The call's output, its facts and, when ``record_ops``, its ATen compute ops."""
        observed = Observation(self.snapshot, self.device, self.hold_ms)
        recorder = integrity.ComputeOps() if record_ops else contextlib.nullcontext()
        try:
            with torch.no_grad(), recorder:
                out = self.model(*inputs)
            observed.work_left(self.pool_streams)
            self.hold_ms = observed.next_hold_ms()
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        except Exception as exc:
            status = "compile_error" if is_compile_error(exc) else "runtime_error"
            reason, feedback = failure_text(exc, "")
            limit = guards.limit_reached(exc)
            raise CandidateFailure(status, f"{limit} ({reason})" if limit else reason, feedback) from exc
        ops = dict(recorder.ops) if isinstance(recorder, integrity.ComputeOps) else None
        return out, observed.facts(), ops

    def _poison(self) -> None:
        """Fill the allocator's free blocks with 0xFF (NaN in every float dtype) so an output that is
        not fully written shows, instead of holding an earlier result."""
        nbytes = max(POISON_MIN_BYTES, 2 * self.out_bytes)
        if self.device.type == "cuda":
            blocks = [torch.full((nbytes,), 255, dtype=torch.uint8, device=self.device)]
            blocks += [
                torch.full((512 << 10,), 255, dtype=torch.uint8, device=self.device)
                for _ in range(POISON_SMALL_BLOCKS)
            ]
        else:
            # glibc reuses freed heap chunks up to its 32 MiB dynamic mmap threshold; beyond that
            # fresh pages are zero. Best effort on a CPU; the GPU caching allocator is the real case.
            blocks = [torch.full((max(self.out_bytes, 4096),), 255, dtype=torch.uint8)]
        del blocks

    def trial(self, command: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        assert self.task is not None
        inputs = make_inputs(self.task, int(command["seed"]), self.device)
        runs: list[replies.TrialRun] = []
        outputs = []
        for n in range(int(command["repeat"])):
            call_inputs = clone(inputs)
            self._poison()
            # The ATen compute ops of the first call go to the pytorch-recompute rule when asked.
            out, facts, ops = self._call(call_inputs, record_ops=n == 0 and bool(command.get("record_ops")))
            changed = [
                i for i, (a, b) in enumerate(zip(call_inputs, inputs, strict=True)) if not bitwise_equal(a, b)
            ]
            runs.append(replies.TrialRun(facts, changed, ops))
            outputs.append(flatten(out))
        self.out_bytes = sum(t.numel() * t.element_size() for t in outputs[0] if isinstance(t, torch.Tensor))
        deterministic = all(bitwise_equal(outputs[0], o) for o in outputs[1:])
        self.outputs, self.runs_outputs = outputs[0], outputs
        # This trial's inputs stay alive until the next trial of the variant has made its own, so
        # the model sees each trial's values at other addresses: a CUDA graph (or any result)
        # captured on the first input and replayed without copying the new one in reads the old
        # values and fails there, instead of passing when the allocator hands the address back.
        self.held_inputs = [inputs, call_inputs]
        meta, blob = channel.encode_tensors(self.outputs, self.shared if command.get("ipc") else None)
        return replies.TrialReply(tuple(runs), deterministic, meta).to_json(), blob

    def resend(self, command: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """The last trial's outputs as bytes: for a supervisor that could not open their handles,
        or (``run``: 1) the repeat's, when it differed bit for bit from the first run."""
        run = int(command.get("run", 0))
        meta, blob = channel.encode_tensors(self.runs_outputs[run] if run else self.outputs)
        return replies.OutputsReply(meta).to_json(), blob

    def time(self, command: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """One phase of the candidate's side of the paired timing (worker_timing.py): ``settle``,
        ``block`` (repeated, between the supervisor's reference blocks) and ``finish``, which
        ends with the check call on the ``check_seed``'s values."""
        assert self.task is not None
        phase = command.get("phase")
        try:
            if phase == "settle":
                self.timing = CandidateTiming.start(
                    self.model, self.task, self.device, self.snapshot, command
                )
                return replies.SettleReply(self.timing.settle()).to_json(), b""
            if self.timing is None or phase not in ("block", "finish"):
                out_of_order = replies.Failure("runtime_error", f"timing phase {phase!r} out of order", "")
                return out_of_order.to_json(), b""
            if phase == "block":
                return replies.BlockReply(self.timing.block(int(command["calls"]))).to_json(), b""
            timing, self.timing = self.timing, None
            figures, facts = timing.finish(self.device, self.pool_streams)
        except TimingFailure as failure:
            raise CandidateFailure("runtime_error", failure.reason, failure.feedback) from failure
        copy_values(timing.buffers, make_inputs(self.task, int(command["check_seed"]), self.device))
        self._poison()
        out, check_facts, _ = self._call(timing.buffers)
        meta, blob = channel.encode_tensors(flatten(out))
        return replies.FinishReply(figures, facts, check_facts, meta).to_json(), blob

    def profile(self, command: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """One call on the timing inputs under torch.profiler (profiling/timeline.py), after timing.
        A profiler that fails is reported in the timeline, never as the candidate's failure."""
        assert self.task is not None
        inputs = make_inputs(self.task, 0, self.device)
        try:
            with torch.no_grad():
                found = timeline.profile_call(lambda: self.model(*inputs), self.device)
        except Exception as exc:  # noqa: BLE001 - a profile is advice; the verdict is already made
            found = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        return replies.ProfileReply(found).to_json(), b""
