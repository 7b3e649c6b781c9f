"""OS-level isolation of candidates (evaluation/isolation.py): native and shell escape attempts
through the fork-server and the cold path, checked from outside, plus the control run that shows
the same probes do escape when the isolation is off."""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from evokernel.config.loading import load_config
from evokernel.config.schema import EvaluationConfig, TimingConfig
from evokernel.evaluation import isolation, landlock, seccomp
from evokernel.evaluation.forkserver import ForkServer
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.exceptions import ConfigError
from evokernel.types import Status, Task
from tests.core.isolation_probes import cuda_candidate, native_candidate, probe_report, shell_candidate

FAST = TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30)
TIMEOUT_S = 180
# What the kernel offers, not what the probe proved: a broken isolation must fail these tests, not skip them.
needs_isolation = pytest.mark.skipif(
    landlock.abi_version() < 1 or not seccomp.available(), reason="this kernel has no Landlock or seccomp"
)


@dataclass
class Targets:
    """What a candidate must not reach: a TCP and a UNIX listener, a file outside its directory,
    and a library file with known contents."""

    tcp: socket.socket
    unix_path: Path
    unix: socket.socket
    outside: Path
    library: Path
    library_bytes: bytes

    @property
    def port(self) -> int:
        return int(self.tcp.getsockname()[1])

    def connections(self) -> list[str]:
        """Listeners with a connection waiting (a connect() that succeeded lands in the backlog)."""
        ready, _, _ = select.select([self.tcp, self.unix], [], [], 0.2)
        return ["tcp" if s is self.tcp else "unix" for s in ready]


@pytest.fixture
def targets(tmp_path: Path) -> Iterator[Targets]:
    tcp = socket.create_server(("127.0.0.1", 0))
    unix_path = tmp_path / "raylet.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(unix_path))
    unix.listen()
    library = tmp_path / "library.sqlite"
    library.write_bytes(b"SQLite format 3\x00 the run's results")
    try:
        yield Targets(tcp, unix_path, unix, tmp_path / "outside.txt", library, library.read_bytes())
    finally:
        tcp.close()
        unix.close()


def request(task: Task, source: str, mode: str) -> dict[str, Any]:
    # Static rules off: the run-time layers are under test, not the early refusal of the text.
    req = build_request(task, source, device="cpu", scale="small", timing=FAST, static_checks=False)
    return {**req, "isolation": mode}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@needs_isolation
def test_native_escapes_are_refused_on_the_fork_server_path(axpy_task: Task, targets: Targets) -> None:
    server = ForkServer("cpu", Path(tempfile.gettempdir()))
    try:
        source = native_candidate(targets.port, targets.unix_path, targets.outside, targets.library)
        ev = run_sandboxed(request(axpy_task, source, "required"), TIMEOUT_S, launcher=server.spawn)
    finally:
        server.close()
    report = probe_report(ev)
    # The verdict still comes back, through the inherited channel: the daemon the import left
    # running is the candidate's own fault (rule processes).
    assert ev.status is Status.REJECTED and "rule processes: import" in ev.reason, ev.reason + ev.feedback
    assert report["tcp_connect"] == errno.EACCES and report["unix_connect"] == errno.EACCES
    assert targets.connections() == []
    assert report["write_outside"] == errno.EACCES and not targets.outside.exists()
    assert report["write_library"] == errno.EACCES and report["read_library"] == errno.EACCES
    assert targets.library.read_bytes() == targets.library_bytes
    assert report["write_inside"] == 0  # its own directory stays writable
    # The supervisor's memory (where the signing key lives), also for a root worker.
    assert report["read_parent_memory"] == errno.EPERM and report["open_parent_mem"] == errno.EACCES
    assert not _alive(int(report["daemon_pid"])), "a process outlived the kill of the session"
    assert ev.details["isolation"]["filesystem"] and ev.details["isolation"]["seccomp"]


@needs_isolation
def test_a_shell_escape_is_refused_on_the_cold_path(axpy_task: Task, targets: Targets) -> None:
    source = shell_candidate(targets.port, targets.outside, targets.library)
    ev = run_sandboxed(request(axpy_task, source, "required"), TIMEOUT_S)
    report = probe_report(ev)
    assert ev.status is Status.CORRECT, ev.reason + ev.feedback
    assert report["shell_code"] != 0, report
    assert targets.connections() == []
    assert not targets.outside.exists()
    assert targets.library.read_bytes() == targets.library_bytes


def test_the_same_probes_escape_without_isolation(axpy_task: Task, targets: Targets) -> None:
    """The control: with the isolation off, every attempt above succeeds, so the tests above fail
    if the isolation stops working."""
    source = native_candidate(targets.port, targets.unix_path, targets.outside, targets.library)
    ev = run_sandboxed(request(axpy_task, source, "off"), TIMEOUT_S)
    report = probe_report(ev)
    daemon = int(report["daemon_pid"])
    try:
        assert ev.status is Status.REJECTED and "rule processes: import" in ev.reason, ev.reason
        assert report["tcp_connect"] == 0 and report["unix_connect"] == 0
        assert sorted(targets.connections()) == ["tcp", "unix"]
        assert targets.outside.read_bytes() == b"x"
        assert targets.library.read_bytes() == targets.library_bytes + b"x"
        if os.getuid() == 0:  # the supervisor is non-dumpable, which binds everyone but root
            assert report["read_parent_memory"] == 0 and report["open_parent_mem"] == 0
        assert _alive(daemon), "without seccomp the daemon's setsid takes it out of the killed session"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)


def test_required_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    lacking = isolation.Support(landlock_abi=0, seccomp=False, uid=1000, refused={})
    monkeypatch.setattr(isolation, "detect", lambda: lacking)
    with pytest.raises(isolation.IsolationUnavailable, match=r"Landlock.*seccomp.*best-effort"):
        isolation.check("required")
    assert isolation.check("best-effort") is lacking


def test_the_config_key_takes_only_the_two_modes(tmp_path: Path) -> None:
    assert EvaluationConfig().isolation == "required"
    config = tmp_path / "x.yaml"
    config.write_text("tasks: [tests/fixtures/tasks/axpy.py]\n")
    with pytest.raises(ConfigError, match=r"evaluation\.isolation='none'.*required, best-effort"):
        load_config(config, ["evaluation.isolation=none"])


@pytest.mark.skipif(not seccomp.supported_arch(), reason="no filter for this architecture")
def test_the_filter_is_whole_instructions() -> None:
    assert len(seccomp.program()) % 8 == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_extension_is_confined_and_its_outputs_still_come_back(
    axpy_task: Task, targets: Targets
) -> None:
    """On the GPU machine: the probes from the host code of a CUDA load_inline extension, through
    the fork-server at full size; the outputs still reach the supervisor through CUDA IPC (which
    needs /dev/nvidia*, /dev/shm and the build dirs inside the confinement)."""
    server = ForkServer("cuda", Path(tempfile.gettempdir()))
    try:
        source = cuda_candidate(targets.port, targets.unix_path, targets.outside, targets.library)
        req = build_request(
            axpy_task,
            source,
            device="cuda",
            scale="full",
            timing=FAST,
            static_checks=False,
            evaluation=EvaluationConfig(compile_baseline="off"),
        )
        ev = run_sandboxed(req, 600, launcher=server.spawn)
    finally:
        server.close()
    report = probe_report(ev)
    assert ev.status is Status.CORRECT, ev.reason + ev.feedback
    assert ev.details["outputs_via"] == "cuda-ipc"
    assert report["tcp_connect"] == errno.EACCES and report["unix_connect"] == errno.EACCES
    assert targets.connections() == []
    assert report["write_outside"] == errno.EACCES and not targets.outside.exists()
    assert report["write_library"] == errno.EACCES and report["read_library"] == errno.EACCES
    assert targets.library.read_bytes() == targets.library_bytes
    assert report["write_inside"] == 0
    assert report["read_parent_memory"] == errno.EPERM and report["open_parent_mem"] == errno.EACCES
    assert ev.details["isolation"]["filesystem"] and ev.details["isolation"]["seccomp"]


def test_build_tools_outside_usr_are_readable_with_their_prefix_but_never_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The GPU image's compiler is /opt/gcc/bin/g++: without its prefix every CUDA build failed
    # with "Permission denied" under confinement.
    toolchain, checkout = tmp_path / "opt" / "gcc", tmp_path / "checkout"
    for folder in (toolchain / "bin", checkout / "bin"):
        folder.mkdir(parents=True)
    for tool in (toolchain / "bin" / "g++", checkout / "bin" / "ninja"):
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{toolchain / 'bin'}:{checkout / 'bin'}:/usr/bin")
    prefixes = isolation.toolchain_prefixes(checkout.resolve())
    assert toolchain.resolve() in prefixes
    assert checkout / "bin" in prefixes and checkout not in prefixes and tmp_path not in prefixes
