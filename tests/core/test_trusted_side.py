"""The trusted side trusts nothing a candidate can touch (issue 33): each test is one finding of the
adversarial review, with its side effect checked from outside (a marker file, a canary secret
absent from every verdict field, no process of the candidate alive, nothing left in /dev/shm).

The candidates run as the harness's user (root in CI): the probes that need root to matter
(reading another process's /proc files, another user's shared memory) say so."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from evokernel.config.schema import TimingConfig
from evokernel.evaluation import landlock, seccomp
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.evaluation.workspace import read_tail
from evokernel.types import Evaluation, Status, Task
from tests.core.isolation_probes import AXPY

FAST = TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30)
ROOT = Path(__file__).resolve().parents[2]
needs_isolation = pytest.mark.skipif(
    landlock.abi_version() < 1 or not seccomp.available(), reason="this kernel has no Landlock or seccomp"
)

# The isolation probes' Triton axpy (its import runs ``{escape}`` first), here with its output
# expression replaceable: a wrong kernel shows whether a planted reference was believed.
HONEST = "3.0 * x + tl.load(b_ptr + offs, mask=mask)"


def candidate(escape: str, result: str = HONEST) -> str:
    return AXPY.format(escape=textwrap.dedent(escape)).replace(HONEST, result)


def evaluate(task: Task, source: str) -> Evaluation:
    # Static rules off: the run-time layers and the trusted side are under test.
    request = build_request(task, source, device="cpu", scale="small", timing=FAST, static_checks=False)
    return run_sandboxed(request, 180)


def in_child(task: Task, source: str, canary: str, timeout_s: float = 150) -> tuple[str, str]:
    """Evaluate ``source`` from a new process whose environment holds ``canary`` as an API key, as
    ``evokernel verify`` or an actor would: (the verdict's JSON, everything that process printed)."""
    script = textwrap.dedent(
        f"""
        import json, sys
        from evokernel.config.schema import TimingConfig
        from evokernel.evaluation.request import build_request
        from evokernel.evaluation.sandbox import run_sandboxed
        from evokernel.tasks import load_task
        task = load_task({str(task.path)!r})
        request = build_request(task, sys.stdin.read(), device="cpu", scale="small",
            timing=TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30), static_checks=False)
        print("EVK-VERDICT " + json.dumps(run_sandboxed(request, 120).to_dict()))
        """
    )
    env = {**os.environ, "OPENAI_API_KEY": canary, "PGPASSWORD": canary}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=source,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=ROOT,
    )
    verdicts = [ln for ln in done.stdout.splitlines() if ln.startswith("EVK-VERDICT ")]
    assert verdicts, done.stdout[-2000:] + done.stderr[-3000:]
    return verdicts[-1].removeprefix("EVK-VERDICT "), done.stdout + done.stderr


def probe_report(evaluation: Evaluation | dict[str, Any]) -> dict[str, Any]:
    details = evaluation.details if isinstance(evaluation, Evaluation) else evaluation["details"]
    lines = [ln for ln in str(details.get("output_tail", "")).splitlines() if ln.startswith("EVK-PROBE ")]
    assert lines, f"the probe did not report: {details.get('output_tail')}"
    report: dict[str, Any] = json.loads(lines[-1].removeprefix("EVK-PROBE "))
    return report


@needs_isolation
def test_a_planted_reference_or_module_never_runs_in_the_supervisor(axpy_task: Task, tmp_path: Path) -> None:
    """Finding 1: the supervisor imported ``reference.py`` from the worker's writable directory, so a
    candidate that rewrote it ran code unconfined and could make a wrong kernel 'correct'."""
    marker = tmp_path / "escaped"
    planted = f"""
        import pathlib
        pathlib.Path({str(marker)!r}).write_text("ran in " + str(__import__("os").getpid()))
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x, b):
                return torch.zeros_like(x)
        def get_inputs():
            return [torch.randn(1000), torch.randn(1000)]
        def get_init_inputs():
            return []
        """
    escape = f"""
        _planted = {textwrap.dedent(planted)!r}
        _written, _refused = [], {{}}
        for _path in ("reference.py", "../reference.py", "../supervisor/reference.py",
                      "sympy/__init__.py", "jinja2/__init__.py", "filelock/__init__.py",
                      "../supervisor/sitecustomize.py", "../request.json"):
            try:
                os.makedirs(os.path.dirname(_path) or ".", exist_ok=True)
                with open(_path, "w") as _f:
                    _f.write(_planted)
                _written.append(_path)
            except OSError as _e:
                _refused[_path] = _e.errno
        print("EVK-PROBE " + json.dumps({{"written": _written, "refused": _refused}}), flush=True)
        """
    ev = evaluate(axpy_task, candidate(escape, result="0.0 * x"))
    assert probe_report(ev)["written"][:1] == ["reference.py"]  # its own directory: allowed
    assert not marker.exists(), marker.read_text()
    assert ev.status is Status.INCORRECT, f"{ev.status.value}: {ev.reason}"


@needs_isolation
@pytest.mark.parametrize("replacement", ["symlink", "fifo"])
def test_the_output_log_is_not_read_through_what_the_candidate_put_there(
    axpy_task: Task, replacement: str
) -> None:
    """Finding 2: the log was read through a symlink (``/proc/<verify pid>/environ`` put the API key
    into the verdict and the library) and a FIFO there hung the whole run."""
    canary = "sk-evk-canary-" + secrets.token_hex(8)
    escape = f"""
        _parent = int(open("/proc/%d/stat" % os.getppid()).read().rsplit(")", 1)[1].split()[1])
        _done, _refused = [], {{}}
        for _log in ("output.log", "../output.log"):
            try:
                if os.path.lexists(_log):
                    os.unlink(_log)
                if {replacement!r} == "symlink":
                    os.symlink("/proc/%d/environ" % _parent, _log)
                else:
                    os.mkfifo(_log)
                _done.append(_log)
            except OSError as _e:
                _refused[_log] = _e.errno
        print("EVK-PROBE " + json.dumps({{"replaced": _done, "refused": _refused}}), flush=True)
        sys.exit(3)  # a crash: its output's tail goes into the feedback
        """
    started = time.monotonic()
    verdict, printed = in_child(axpy_task, candidate(escape), canary)
    assert time.monotonic() - started < 120
    assert canary not in verdict and canary not in printed
    assert json.loads(verdict)["status"] == "crashed"


def test_read_tail_reads_only_a_bounded_regular_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("the library's rows")
    (tmp_path / "link").symlink_to(secret)
    assert "rows" not in read_tail(tmp_path / "link")
    (tmp_path / "zero").symlink_to("/dev/zero")
    assert read_tail(tmp_path / "zero").startswith("[evokernel:")
    os.mkfifo(tmp_path / "fifo")
    started = time.monotonic()
    assert "not a regular file" in read_tail(tmp_path / "fifo")
    assert time.monotonic() - started < 1
    big = tmp_path / "big"
    big.write_bytes(b"a" * 100_000 + b"THE END")
    tail = read_tail(big, cap=1000)
    assert len(tail) == 1000 and tail.endswith("THE END")
    assert read_tail(tmp_path / "missing") == ""


@needs_isolation
def test_no_process_environment_on_the_node_is_readable_by_the_candidate(axpy_task: Task) -> None:
    """Finding 3: a root candidate read ``/proc/<pid>/environ`` of the verify process and the Ray
    actor, API key included. Every process on the machine is tried."""
    canary = "sk-evk-canary-" + secrets.token_hex(8)
    escape = f"""
        _found, _readable = [], 0
        for _pid in os.listdir("/proc"):
            if not _pid.isdigit():
                continue
            try:
                with open("/proc/%s/environ" % _pid, "rb") as _f:
                    _env = _f.read()
            except OSError:
                continue
            _readable += 1
            if {canary!r}.encode() in _env:
                _found.append(int(_pid))
        _report = {{"found": _found, "readable": _readable, "me": os.getpid()}}
        print("EVK-PROBE " + json.dumps(_report), flush=True)
        """
    verdict, printed = in_child(axpy_task, candidate(escape), canary)
    assert canary not in printed
    report = probe_report(json.loads(verdict))
    assert report["found"] == [], report
    assert json.loads(verdict)["status"] == "correct", verdict[:2000]
    assert canary not in verdict


def test_ray_processes_start_without_the_drivers_secrets(tmp_path: Path) -> None:
    """Finding 3, the actor's side: the local cluster (and so every actor) starts from the driver's
    environment less its secrets (a Ray worker reads its own environment here)."""
    canary = "sk-evk-canary-" + secrets.token_hex(8)
    script = textwrap.dedent(
        """
        import json, ray
        from evokernel.config.schema import RayConfig
        from evokernel.pool.ray_cluster import init_ray

        @ray.remote(num_cpus=0)
        def environ():
            with open("/proc/self/environ", "rb") as f:
                return f.read().decode(errors="replace")
        init_ray(RayConfig(num_cpus=1))
        env = ray.get(environ.remote())
        print("EVK-RAY " + json.dumps({"env": env}))
        ray.shutdown()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "OPENAI_API_KEY": canary, "HF_TOKEN": canary},
        cwd=tmp_path,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("EVK-RAY ")]
    assert lines, done.stdout[-1000:] + done.stderr[-3000:]
    seen = json.loads(lines[-1].removeprefix("EVK-RAY "))
    assert canary not in seen["env"]
    assert "PATH=" in seen["env"]  # the environment was read, and it is the ordinary one


@needs_isolation
def test_no_process_of_the_candidate_outlives_the_verdict(axpy_task: Task) -> None:
    """Finding 5: a chain of children whose parents exit (each re-parented as it goes) outran the
    session sweep."""
    tag = "evkchain" + secrets.token_hex(3)
    escape = f"""
        import ctypes
        _libc = ctypes.CDLL(None)
        def _chain():
            _libc.prctl(15, {tag!r}.encode(), 0, 0, 0)  # PR_SET_NAME: found by name afterwards
            while True:
                if os.fork() != 0:
                    os._exit(0)  # the parent leaves, the child is re-parented and goes on
                os.setpgid(0, 0)  # allowed: its session still holds it
                time.sleep(0.002)
        if os.fork() == 0:
            _chain()
        """
    ev = evaluate(axpy_task, candidate(escape))
    assert ev.status is Status.REJECTED and "rule processes" in ev.reason, ev.reason
    time.sleep(1.0)
    alive = []
    for pid in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text() if pid.isdigit() else ""
        except OSError:
            continue
        name, state = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 2 :][:1]
        if name == tag and state != "Z":  # a zombie runs nothing; it waits for init to reap it
            alive.append((pid, state))
    assert alive == []


def _private_shm_here() -> str:
    """What privileges.private_shm gives a process of this machine ("private", or why not)."""
    probe = "from evokernel.evaluation.privileges import private_shm; print(private_shm())"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    return done.stdout.strip() or done.stderr.strip()[-300:]


@needs_isolation
def test_dev_shm_is_the_candidates_own_and_goes_with_it(axpy_task: Task) -> None:
    """Finding 6: ``/dev/shm`` was the host's, writable, never cleaned (1 GiB left after a verdict),
    and a root candidate could open another user's segment (a PostgreSQL server's)."""
    available = _private_shm_here()
    if available != "private":  # a mount namespace needs CAP_SYS_ADMIN: the README says what then
        pytest.skip(f"no private /dev/shm on this machine: {available}")
    name = "evk-test-" + secrets.token_hex(4)
    host_segment = Path("/dev/shm") / f"{name}-host"
    host_segment.write_bytes(b"a server's shared memory")
    host_segment.chmod(0o600)
    if os.getuid() == 0:
        os.chown(host_segment, 65534, 65534)  # another user's, as PostgreSQL's are
    escape = f"""
        _report = {{}}
        try:
            with open("/dev/shm/{name}-left", "wb") as _f:
                _f.write(b"x" * (8 << 20))
            _report["wrote"] = True
        except OSError as _e:
            _report["wrote"] = _e.errno
        try:
            with open({str(host_segment)!r}, "r+b") as _f:
                _report["host"] = _f.read().decode()
        except OSError as _e:
            _report["host"] = _e.errno
        print("EVK-PROBE " + json.dumps(_report), flush=True)
        """
    try:
        ev = evaluate(axpy_task, candidate(escape))
        report = probe_report(ev)
        assert ev.status is Status.CORRECT, ev.reason
        assert report["wrote"] is True  # it still has a /dev/shm to use
        assert isinstance(report["host"], int), report  # the host's segment: not even seen
        assert not (Path("/dev/shm") / f"{name}-left").exists()
        assert ev.details["shm"] == "private"
    finally:
        host_segment.unlink(missing_ok=True)
        (Path("/dev/shm") / f"{name}-left").unlink(missing_ok=True)
