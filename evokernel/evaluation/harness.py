"""The supervisor: the trusted process that decides a candidate's verdict. It never imports it.

Invoked as ``python -m evokernel.evaluation.harness REQUEST.json KEY_FD RESULT_FD`` by
:mod:`evokernel.evaluation.sandbox`, in a new session whose group the sandbox kills at its
timeout. Why the candidate cannot forge the verdict:

1. The supervisor makes itself non-dumpable, then forks the **worker** before either process
   touches CUDA. Only the worker imports candidate code (:mod:`evokernel.evaluation.worker`).
2. The worker first closes the key pipe and the result pipe. A non-dumpable parent's
   ``/proc/<pid>/fd`` and memory are closed to it, so it has no path back to either.
3. Only then does the supervisor read the per-evaluation HMAC key from the key pipe; the key was
   never in the memory the worker copied at fork. The verdict goes to the sandbox signed with it,
   and the sandbox believes nothing unsigned. Writing to the sandbox's end of the pipe through
   ``/proc/<sandbox>/fd`` therefore gains nothing, and stdout and exit codes are never read as a
   verdict.
4. The worker only makes claims. The supervisor computes the reference itself on inputs it makes
   itself from the same seeds, compares the worker's output bytes (decoded without pickle) and
   applies the integrity facts. A worker that dies, hangs or breaks the protocol is classified
   from the outside (signal, exit code, deadline).

Candidate timings come from the worker (they must be measured where the kernel runs); the
timer objects are checked unchanged and every timed call must launch the candidate's kernel.
Eager and ``torch.compile`` baselines are timed here, with the same method, after the worker is
gone, or taken from the library's cache. A request with ``"mode": "baselines"`` measures only
those (no candidate, no worker): the pool sends one per task before its candidates, so they find
the baselines cached instead of each measuring them.

Started either by a new interpreter (``python -m``) or as a child of the pool's fork-server
(:mod:`evokernel.evaluation.forkserver`), which calls :func:`main` after setting up the same
session, working directory, environment and descriptors.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import triton  # noqa: F401 - imported before the fork so the worker does not pay for it again

from evokernel.evaluation import channel, guards, privileges, worker
from evokernel.evaluation.baselines import measure_reference_baselines
from evokernel.evaluation.gpulock import GpuLock, LockWaitExceeded
from evokernel.evaluation.loading import build_reference, load_source, make_inputs
from evokernel.evaluation.profiling import stage as profiling
from evokernel.evaluation.request import EvaluationRequest
from evokernel.evaluation.supervisor import StageFailure, Supervisor
from evokernel.evaluation.worker_process import WorkerProcess
from evokernel.types import Evaluation, Status


def main(argv: list[str]) -> int:
    request_path, key_fd, result_fd = Path(argv[1]), int(argv[2]), int(argv[3])
    # Decoded once, here, where the JSON crosses into the sandbox: every stage below, and the
    # worker forked from this process (which gets the object, not JSON), reads typed attributes.
    request = EvaluationRequest.from_json(json.loads(request_path.read_text()))
    # The candidate's directory (workspace.py); the request lies outside it, and the task is loaded
    # from the request held in memory, never from a file the worker could rewrite.
    workdir = request.candidate_directory()
    if request.mode == "baselines":
        return _baselines_only(request, key_fd, result_fd)
    (workdir / "candidate.py").write_text(request.candidate_source)
    # Before the fork, so the worker and everything it starts share this /dev/shm (privileges.py).
    shm = privileges.private_shm() if request.isolation != "off" else "shared (isolation off)"
    hidden = guards.hide_from_children()
    # A confirmation (run/confirm.py) times the incumbent beside the candidate: a second worker,
    # in a directory of its own beside the candidate's (Landlock keeps each worker to its own).
    incumbent = request.incumbent_source
    links = [socket.socketpair() for _ in range(2 if incumbent else 1)]
    pids = []
    for n, (parent_sock, child_sock) in enumerate(links):
        directory = workdir if n == 0 else _incumbent_directory(workdir, str(incumbent))
        others = [fd for m, pair in enumerate(links) if m != n for fd in (pair[0].fileno(), pair[1].fileno())]
        pid = os.fork()
        if pid == 0:
            parent_sock.close()
            worker.serve(
                child_sock, [key_fd, result_fd, *others], replace(request, workdir=str(directory)), directory
            )
        pids.append(pid)
    for _, child_sock in links:
        child_sock.close()
    with os.fdopen(key_fd, "rb") as key_pipe:
        key = key_pipe.read()
    start = time.perf_counter()
    start_s = time.monotonic() - request.launched_at if request.launched_at is not None else 0.0
    supervisor = Supervisor(request, links[0][0], pids[0], start)
    if incumbent:
        supervisor.incumbent = WorkerProcess(links[1][0], pids[1])
    try:
        evaluation = supervisor.run()
    except StageFailure as failure:
        evaluation = supervisor.failed(failure)
    except LockWaitExceeded as exc:  # the pool's overload, reported as such
        evaluation = supervisor.failed(StageFailure(Status.TIMEOUT, supervisor.stage, str(exc)))
    except torch.OutOfMemoryError as exc:
        # The supervisor's own allocations (reference, comparison, baselines): on a GPU shared by
        # several evaluations that is the sharing's failure, not the candidate's. The pool runs it
        # again alone and counts it apart (harness_fault).
        evaluation = supervisor.failed(
            StageFailure(
                Status.CRASHED,
                "harness",
                f"harness fault: the evaluator ran out of GPU memory during {supervisor.stage} "
                f"({str(exc).splitlines()[0][:200]}); not the candidate's failure",
            )
        )
        evaluation = replace(evaluation, details={**evaluation.details, "harness_fault": "out_of_memory"})
    except Exception as exc:  # noqa: BLE001 - e.g. the reference itself failed: report, do not hide
        evaluation = Evaluation(
            status=Status.CRASHED,
            stage="harness",
            reason=f"harness error: {type(exc).__name__}: {exc}",
            feedback=traceback.format_exc()[-2000:],
        )
    finally:
        supervisor.stop_worker()
        if supervisor.incumbent is not None:
            supervisor.incumbent.stop()
    details = {
        **evaluation.details,
        "supervisor_hidden": hidden,
        "shm": shm,
        "start_s": round(start_s, 4),
        "gpu_lock": supervisor.gpu.summary(),
    }
    return _send(replace(evaluation, details=details), request, start, key, result_fd)


def _incumbent_directory(workdir: Path, source: str) -> Path:
    directory = workdir.parent / "incumbent"
    directory.mkdir(mode=0o700)
    (directory / "candidate.py").write_text(source)
    return directory


def _baselines_only(request: EvaluationRequest, key_fd: int, result_fd: int) -> int:
    """Measure the task's eager and compile baselines (trusted code only: no worker is forked)."""
    with os.fdopen(key_fd, "rb") as key_pipe:
        key = key_pipe.read()
    start = time.perf_counter()
    gpu = GpuLock.from_request(request)
    try:
        device = torch.device(request.device)
        baselines = measure_reference_baselines(device, request, gpu)
        details: dict[str, Any] = {"timing": baselines}
        if profiling.wanted(request):
            details["reference_profiling"] = _reference_profile(device, request, gpu, baselines)
        evaluation = Evaluation(status=Status.CORRECT, stage="baselines", details=details)
    except Exception as exc:  # noqa: BLE001 - the reference itself failed: the pool logs it
        evaluation = Evaluation(
            status=Status.CRASHED,
            stage="baselines",
            reason=f"baseline measurement failed: {type(exc).__name__}: {exc}"[:500],
            feedback=traceback.format_exc()[-2000:],
        )
    details = {**evaluation.details, "gpu_lock": gpu.summary()}
    return _send(replace(evaluation, details=details), request, start, key, result_fd)


def _reference_profile(
    device: torch.device, request: EvaluationRequest, gpu: GpuLock, baselines: dict[str, Any]
) -> dict[str, Any]:
    """The reference's profile at the timing variant's sizes (the figures beside its baselines)."""

    def model_inputs() -> tuple[Any, list[Any]]:
        task = load_source(request.task.source, "evokernel_reference_profiled", request.overrides[0])
        return build_reference(task, device, request.training), make_inputs(task, 0, device)

    eager = (baselines.get("eager") or {}).get("median_ms")
    try:
        return profiling.profile_reference(request, device, gpu, model_inputs, eager)
    except (RuntimeError, ValueError, OSError) as exc:  # advice only: the baselines stand
        return {"level": request.profiling, "status": f"failed: {type(exc).__name__}: {exc}"[:400]}


def _send(
    evaluation: Evaluation, request: EvaluationRequest, start: float, key: bytes, result_fd: int
) -> int:
    device = torch.device(request.device)
    label = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"
    evaluation = replace(
        evaluation,
        device=label,
        interpreter=device.type == "cpu",
        duration_s=time.perf_counter() - start,
    )
    payload = json.dumps(evaluation.to_dict()).encode()
    message = json.dumps({"payload": payload.decode(), "signature": channel.sign(key, payload)})
    with os.fdopen(result_fd, "wb") as out:
        out.write(message.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
