"""Run one evaluation in a fresh process group that a timeout kills, and classify what came back.

Stage 1 (static, :mod:`evokernel.evaluation.static`) runs here, before any process starts. Then
the supervisor process (:mod:`evokernel.evaluation.harness`) gets a trusted root of its own with
the candidate's directory inside it (:mod:`evokernel.evaluation.workspace`), an environment built
from an allow-list (no API keys, tokens or proxy settings), its output captured in a file beside
the request, out of the candidate's reach, whose size the worker's ``RLIMIT_FSIZE`` caps and of
which only a bounded tail is read without following links, and a new session so that killing it
(frozen first, then killed: :mod:`evokernel.evaluation.sessions`) also kills anything it spawned.

The verdict arrives on a pipe, signed with a key this process made for this evaluation and handed
to the supervisor on a second pipe (see harness.py for why the candidate cannot learn it). An
unsigned, mis-signed or missing verdict is ``crashed``, never believed; stdout and exit codes
are only ever used to describe a crash.

How the supervisor process starts is the *launcher*'s business; everything else here (the
request, key and pipes, the wait, the group kill, the classification) is the same for both:

* :func:`popen_launcher` (the default, and what ``evokernel verify`` uses): a new interpreter per
  candidate, ``python -m evokernel.evaluation.harness``; it pays Python + torch + triton imports
  (~4-9 s on a GPU node) every time.
* :class:`evokernel.evaluation.forkserver.ForkServer` (the pool's actors): a fresh process forked
  from a server that imported those modules once and never initialised CUDA.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evokernel.evaluation import channel, privileges, sessions
from evokernel.evaluation.feedback import compiler_errors, tail
from evokernel.evaluation.launcher import (
    ENV_ALLOW,
    Child,
    Launch,
    Launcher,
    LauncherError,
    popen_launcher,
    sandbox_env,
)
from evokernel.evaluation.request import EvaluationRequest
from evokernel.evaluation.static import check_source
from evokernel.evaluation.workspace import Workspace, read_tail
from evokernel.types import Evaluation, Status

__all__ = [
    "ENV_ALLOW",
    "Child",
    "Launch",
    "Launcher",
    "LauncherError",
    "classify",
    "hard_limit_s",
    "popen_launcher",
    "run_sandboxed",
    "sandbox_env",
    "static_stage",
]

# The supervisor enforces ``timeout_s`` on the worker itself and reports which stage hung; this
# grace covers its own work after that (baselines, torch.compile of the reference: ~60 s at most
# on an H100 for the bundled level-3 tasks) before the whole group is killed from here.
SUPERVISOR_GRACE_S = 90.0
MAX_RESULT_BYTES = 16 << 20


def hard_limit_s(request: EvaluationRequest, timeout_s: float) -> float:
    """When the whole group is killed from outside: the timeout, the supervisor's grace, the
    most the supervisor may wait for its GPU lock, and the most the node may hold its builds
    back (the timeout again: build_clock.py); both extend the supervisor's own deadline."""
    waits = request.gpu_lock.max_wait_s if request.gpu_lock is not None else 0.0
    held = timeout_s if request.object_cache else 0.0
    return timeout_s + SUPERVISOR_GRACE_S + waits + held


def run_sandboxed(
    request: EvaluationRequest | Mapping[str, Any],
    timeout_s: float,
    *,
    launcher: Launcher | None = None,
    build_jobs: int | None = None,
    scratch: Path | None = None,
) -> Evaluation:
    """Evaluate ``request`` (see request.py) in a fresh process group; never raises for candidate
    faults. ``timeout_s`` wins over the request's own. A dict (what :func:`build_request` gives
    ``verify`` and tests) is decoded here first, so a malformed one is the caller's
    :class:`~evokernel.exceptions.RequestError`, raised before any process starts. ``launcher``
    starts the supervisor (default: a new interpreter, :func:`popen_launcher`); a launcher's own
    failure (e.g. :class:`~evokernel.evaluation.forkserver.RunnerLost`) propagates.
    ``scratch``: where the candidate's working directory goes (an actor's root, so a killed actor's
    candidates are swept with it; default: the system's temp directory)."""
    # Whoever starts candidates (an actor, `evokernel verify`) closes its own /proc files to them.
    privileges.make_nondumpable()
    if not isinstance(request, EvaluationRequest):
        request = EvaluationRequest.from_json({**request, "timeout_s": timeout_s})
    request = dataclasses.replace(request, timeout_s=timeout_s)
    evaluation = _run_sandboxed(request, timeout_s, launcher, build_jobs, scratch)
    # Every verdict says which contract reached it (evaluation/profiles.py), crashes included.
    return dataclasses.replace(evaluation, profile=request.profile)


def _run_sandboxed(
    request: EvaluationRequest,
    timeout_s: float,
    launcher: Launcher | None,
    build_jobs: int | None,
    scratch: Path | None,
) -> Evaluation:
    start = time.perf_counter()
    rejected = static_stage(request, start)
    if rejected is not None:
        return rejected
    static_s = time.perf_counter() - start
    limit_s = hard_limit_s(request, timeout_s)
    with tempfile.TemporaryDirectory(prefix="evk-cand-", dir=scratch) as tmp:
        space = Workspace.create(Path(tmp))
        # launched_at (CLOCK_MONOTONIC, shared by every process of the machine): the supervisor
        # reports how long it took to start (details["start_s"]).
        placed = dataclasses.replace(request, workdir=str(space.work), launched_at=time.monotonic())
        space.request_path.write_text(json.dumps(placed.to_json()))
        space.request_path.chmod(0o400)
        key = secrets.token_bytes(32)
        key_read, key_write = os.pipe()
        result_read, result_write = os.pipe()
        os.write(key_write, key)
        os.close(key_write)
        output_fd = os.open(
            space.output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        env = sandbox_env(request.device, space.supervisor, build_jobs)
        try:
            try:
                proc = (launcher or popen_launcher)(
                    Launch(space.supervisor, space.request_path, env, key_read, result_write, output_fd)
                )
            finally:
                for fd in (key_read, result_write, output_fd):
                    os.close(fd)
            code, message, lost = _wait(proc, result_read, limit_s)
        finally:
            os.close(result_read)
        output = read_tail(space.output_path)
    if lost and _verified(message, key) is None:
        raise LauncherError(lost)
    return classify(code, message, key, output, start, static_s, timeout_s, limit_s)


def classify(
    code: int | None,
    message: bytes,
    key: bytes,
    output: str,
    start: float,
    static_s: float,
    timeout_s: float,
    limit_s: float,
) -> Evaluation:
    """The verdict from what came back: a signed result is believed, anything else is described."""
    if code is None:
        return Evaluation(
            status=Status.TIMEOUT,
            stage="timeout",
            reason=f"killed after {limit_s:.0f} s (timeout plus supervisor grace)",
            feedback=f"the evaluation did not finish within {timeout_s:.0f} s",
            duration_s=time.perf_counter() - start,
        )
    evaluation = _verified(message, key)
    if evaluation is None:
        if code < 0:
            return _crashed(f"killed by signal {signal.Signals(-code).name}", output, start)
        what = "an unauthenticated result" if message else "no result"
        return _crashed(f"exited with code {code} with {what}", output, start)
    details = dict(evaluation.details)
    stages = [{"stage": "static", "status": "passed", "reason": "", "seconds": round(static_s, 4)}]
    details["stages"] = stages + list(details.get("stages", []))
    feedback, reason = evaluation.feedback, evaluation.reason
    if evaluation.status is Status.COMPILE_ERROR and "build failed:" not in reason:
        # A verbose build prints the compiler's output instead of putting it in the exception.
        errors = compiler_errors(output)
        if errors:
            reason = f"{reason[:200]}: build failed: " + " | ".join(errors[:3])
            feedback = "compiler errors:\n" + "\n".join(errors) + "\n" + feedback
    if output.strip():
        details["output_tail"] = tail(output, 2000)
        if evaluation.status is Status.CRASHED:
            feedback = f"{feedback}\n{tail(output, 1200)}".strip()
    return Evaluation.from_dict(
        {
            **evaluation.to_dict(),
            "details": details,
            "reason": reason,
            "feedback": feedback,
            "duration_s": time.perf_counter() - start,
        }
    )


def static_stage(request: EvaluationRequest, start: float) -> Evaluation | None:
    """Stage 1: None when the candidate passes (or the request turns the rules off for a test of
    the run-time layers), else its ``rejected`` (or, for a syntax error, ``compile_error``)."""
    if not request.static_checks:
        return None
    violations = check_source(request.candidate_source)
    seconds = time.perf_counter() - start
    if not violations:
        return None
    first = violations[0]
    status = Status.COMPILE_ERROR if first.rule == "syntax" else Status.REJECTED
    stage = "build" if first.rule == "syntax" else "static"
    more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
    listing = "\n".join(v.describe() for v in violations[:8])
    return Evaluation(
        status=status,
        stage=stage,
        reason=first.describe() + more,
        feedback=listing,
        duration_s=seconds,
        details={
            "stages": [{"stage": stage, "status": "failed", "reason": first.describe(), "seconds": seconds}],
            "violations": [v.__dict__ for v in violations],
        },
    )


def _wait(proc: Child, fd: int, timeout_s: float) -> tuple[int | None, bytes, str]:
    """(exit code, or None at the timeout; what arrived on the result pipe, capped; why the
    launcher lost the child, "" normally). The group is killed in every case."""
    deadline = time.monotonic() + timeout_s
    received = bytearray()

    def drain() -> None:
        while select.select([fd], [], [], 0)[0] and (data := os.read(fd, 1 << 16)):
            received.extend(data[: max(0, MAX_RESULT_BYTES - len(received))])

    try:
        while (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.05))
            data = os.read(fd, 1 << 16) if ready else None
            if data:
                received += data[: max(0, MAX_RESULT_BYTES - len(received))]
                continue
            if data == b"":  # EOF: the supervisor closed its end, normally by exiting
                try:
                    return proc.wait(timeout=max(remaining, 0.1)), bytes(received), ""
                except subprocess.TimeoutExpired:
                    return None, b"", ""
            if (code := proc.poll()) is not None:
                drain()
                return code, bytes(received), ""
        return None, b"", ""
    except LauncherError as exc:
        drain()
        return 0, bytes(received), str(exc) or type(exc).__name__
    finally:
        # Anything the candidate left running in its group dies with it.
        _kill_group(proc)


def _verified(message: bytes, key: bytes) -> Evaluation | None:
    try:
        envelope = json.loads(message)
        payload = envelope["payload"].encode()
        if not channel.verify_signed(key, payload, str(envelope["signature"])):
            return None
        return Evaluation.from_dict(json.loads(payload))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _crashed(reason: str, output: str, start: float) -> Evaluation:
    return Evaluation(
        status=Status.CRASHED,
        stage="sandbox",
        reason=reason,
        feedback=f"{reason}\n{tail(output, 1200)}".strip(),
        duration_s=time.perf_counter() - start,
    )


def _kill_group(proc: Child) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    # Members that moved to another group of the session (ninja's compiles; setsid is refused).
    sessions.kill_session(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired, LauncherError):
        if proc.poll() is None:
            proc.wait(timeout=10.0)  # a fork-server child is reaped by its server, which reports it
    # SIGKILL is delivered asynchronously: wait (at most 2 s) until every member of the session is
    # gone, so a caller never sees the candidate's leftovers still running.
    sessions.wait_gone(proc.pid)
