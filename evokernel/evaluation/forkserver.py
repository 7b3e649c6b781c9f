"""Warm sandbox runners: a fork-server that pays Python + torch + triton start-up once per actor.

A new interpreter per candidate spends seconds importing torch and triton (~2 s on the CI
machine, ~4-9 s on a GPU node) before it does any work. The fork-server imports them once and
then forks a brand-new supervisor per candidate; only the imported modules are shared, copy on
write. Isolation stays what :mod:`evokernel.evaluation.sandbox` and
:mod:`evokernel.evaluation.harness` describe:

* **No secrets in it.** It is started with the sandbox's allow-listed environment, so no API key
  or token is ever in its memory, and a forked child inherits nothing the cold path would not
  give it. The per-evaluation HMAC key never passes through it either: the actor writes the key
  into a pipe and hands the server only the pipe's *descriptor* (``socket.send_fds``), together
  with the result pipe and the output file; the server passes them to the child and closes them.
* **CUDA only in per-candidate processes.** The server never initialises CUDA (it imports torch
  and triton, nothing touches a device), so every candidate still gets fresh CUDA contexts in
  its own supervisor and worker. A candidate that corrupts its context (an illegal address, a
  hung kernel) cannot affect a later candidate: nothing of that context outlives its process
  group, and the server that forks the next one never had one. "Never touches a device" includes
  the driver's device count: ``torch.utils.cpp_extension`` asks ``torch.cuda.is_available()`` at
  import, which by default calls ``cudaGetDeviceCount`` and marks every later fork as unable to
  use CUDA ("Cannot re-initialize CUDA in forked subprocess"); the server asks NVML instead
  (``PYTORCH_NVML_BASED_CUDA_CHECK=1``) and, before it answers hello, forks a probe to confirm
  that a child can still initialise CUDA; if not, it says why and exits, and the actor uses the
  cold path.
* **Same process tree as the cold path.** The child calls ``setsid()`` (its own session and
  process group, which the actor kills at the timeout with ``os.killpg``), changes to its own
  temporary working directory, replaces its environment with the candidate's (per-candidate
  ``HOME``, ``TRITON_HOME``, ``TMPDIR``, ``TORCH_EXTENSIONS_DIR``), and runs
  :func:`evokernel.evaluation.harness.main`, which forks the worker and applies the limits as
  before. The server is non-dumpable, so a candidate running as the same user cannot ptrace it
  or read its memory to tamper with later children.
* **Exit statuses.** Only a parent can reap a child, so the server (single-threaded: a select
  loop woken by SIGCHLD through a wakeup pipe) reports each child's pid when it starts and its
  exit status when it ends; the actor classifies signals and exit codes with the same code as the
  cold path (:func:`evokernel.evaluation.sandbox.classify`).
* **Faults.** If the actor goes away the server sees EOF, kills its children's groups and exits.
  If the server dies, :class:`ForkServer` raises :class:`RunnerLost` to the evaluations that had
  not received a verdict yet; the actor replaces the server and retries them once.

Protocol (``SOCK_SEQPACKET``, one JSON object per message): the actor sends
``{"id", "request", "cwd", "env"}`` with three descriptors; the server answers ``{"id", "pid"}`` (or
``{"id", "error"}``) and later ``{"pid", "code"}`` (Popen's convention: negative for a signal).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from pathlib import Path
from typing import Any

from evokernel.evaluation.sandbox import Launch, LauncherError, sandbox_env

MAX_MESSAGE_BYTES = 1 << 20
# A cold Python + torch + triton import on a busy node with a network file system can take a minute.
START_TIMEOUT_S = 300.0


class RunnerLost(LauncherError):
    """The fork-server died (or never started); evaluations without a verdict are retried."""


# ---- the server (its own process) ----------------------------------------------------------------
def _preload() -> None:
    """Everything a supervisor and a worker import, without touching a device."""
    import numpy  # noqa: F401
    import torch
    import torch.utils.cpp_extension  # noqa: F401 - load_inline candidates
    import triton
    import triton.language  # noqa: F401

    import evokernel.evaluation.harness  # noqa: F401


POISONED = (
    "the fork-server's imports initialised the CUDA driver, so its children could not use CUDA "
    "(is NVML missing?)"
)


def _children_can_use_cuda() -> bool:
    """Fork a probe: torch marks a child "in bad fork" when its parent initialised CUDA."""
    import torch

    in_bad_fork = getattr(torch._C, "_cuda_isInBadFork", None)
    if in_bad_fork is None:  # a CPU-only torch build: nothing to poison
        return True
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, b"1" if in_bad_fork() else b"0")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    return answer == b"0"


def serve(sock: socket.socket) -> None:
    from evokernel.evaluation import guards

    guards.hide_from_children()
    # Read by torch.cuda.is_available() at call time; the children get the candidate's own env.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    _preload()
    if not _children_can_use_cuda():
        sock.send(json.dumps({"ready": False, "error": POISONED}).encode())
        return
    # Python 3.12 warns on every fork of a process with several OS threads; importing torch starts
    # one idle native thread (the cold path's supervisor forks its worker with it too).
    warnings.filterwarnings(
        "ignore", message=r".*multi-threaded, use of fork\(\)", category=DeprecationWarning
    )
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: set[int] = set()
    sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    try:
        while True:
            ready, _, _ = select.select([sock.fileno(), wake_read], [], [])
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_read, 4096):
                        pass
                _reap(sock, children)
            if sock.fileno() in ready:
                message, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 3)
                if not message:
                    return  # the actor went away
                header = json.loads(message)
                try:
                    pid = _spawn(header, fds, sock, (wake_read, wake_write))
                    reply: dict[str, Any] = {"id": header["id"], "pid": pid}
                    children.add(pid)
                except OSError as exc:  # e.g. EAGAIN from fork: that evaluation fails, not the server
                    reply = {"id": header["id"], "error": f"fork failed: {exc}"}
                for fd in fds:
                    os.close(fd)
                sock.send(json.dumps(reply).encode())
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        sock.send(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _spawn(header: dict[str, Any], fds: list[int], sock: socket.socket, wake: tuple[int, int]) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(header, fds, sock, wake)
    return pid


def _child(header: dict[str, Any], fds: list[int], sock: socket.socket, wake: tuple[int, int]) -> None:
    """Become the candidate's supervisor, as the cold path's new interpreter would; never returns."""
    code = 70
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in wake:
            os.close(fd)
        key_fd, result_fd, output_fd = fds
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(devnull)
        os.close(output_fd)
        os.chdir(header["cwd"])
        os.environ.clear()
        os.environ.update(header["env"])
        tempfile.tempdir = None  # gettempdir() caches; the candidate's TMPDIR is its workdir
        from evokernel.evaluation import harness

        code = harness.main(["harness", header["request"], str(key_fd), str(result_fd)])
    except BaseException:  # noqa: BLE001 - report on the candidate's output, then exit
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: list[str]) -> int:
    serve(socket.socket(fileno=int(argv[1])))
    return 0


# ---- the actor's side ----------------------------------------------------------------------------
class RemoteChild:
    """A supervisor the server forked: ``poll``/``wait`` like ``subprocess.Popen``."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self._server, self._pid = server, pid
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        return self._pid

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self._pid, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self._pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired("evokernel supervisor", timeout or 0.0)
        return self.returncode


class ForkServer:
    """The actor's handle on one fork-server process; ``spawn`` is a sandbox launcher and is
    safe to call from several threads at once."""

    def __init__(self, device: str, root: Path) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="evk-forkserver-", dir=root))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self.process = subprocess.Popen(
            [sys.executable, "-m", "evokernel.evaluation.forkserver", str(theirs.fileno())],
            cwd=self.home,
            env=sandbox_env(device, self.home),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._next_id = 0
        self._started: dict[int, dict[str, Any]] = {}
        self._codes: dict[int, int] = {}
        self.lost = ""
        self.ready = False  # it answered hello: its imports worked
        self._ours_ready = threading.Event()
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        if not self._ours_ready.wait(timeout_s):
            self.close()
            raise RunnerLost(f"the fork-server did not start within {timeout_s:.0f} s")
        if self.lost:
            raise RunnerLost(self.lost)

    def _read(self) -> None:
        reason = "the fork-server closed its connection"
        try:
            while True:
                data = self._sock.recv(MAX_MESSAGE_BYTES)
                if not data:
                    break
                message = json.loads(data)
                with self._cond:
                    if message.get("ready"):
                        self.ready = True
                        self._ours_ready.set()
                    elif "error" in message and "id" not in message:
                        reason = f"the fork-server refused to start: {message['error']}"
                    elif "id" in message:
                        self._started[int(message["id"])] = message
                    else:
                        self._codes[int(message["pid"])] = int(message["code"])
                    self._cond.notify_all()
        except (OSError, ValueError) as exc:
            reason = f"the fork-server link broke: {exc}"
        code = self.process.poll()
        if code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout=1.0)
        with self._cond:
            self.lost = f"{reason} (exit code {code})"
            self._cond.notify_all()
        self._ours_ready.set()

    def spawn(self, launch: Launch) -> RemoteChild:
        self.wait_ready()
        with self._send_lock:
            self._next_id += 1
            ident = self._next_id
            header = {
                "id": ident,
                "request": str(launch.request_path),
                "cwd": str(launch.workdir),
                "env": launch.env,
            }
            try:
                socket.send_fds(
                    self._sock,
                    [json.dumps(header).encode()],
                    [launch.key_fd, launch.result_fd, launch.output_fd],
                )
            except OSError as exc:
                raise RunnerLost(f"could not reach the fork-server: {exc}") from exc
        with self._cond:
            self._cond.wait_for(lambda: ident in self._started or bool(self.lost), START_TIMEOUT_S)
            reply = self._started.pop(ident, None)
        if reply is None:
            raise RunnerLost(self.lost or "the fork-server did not answer")
        if "error" in reply:
            raise LauncherError(str(reply["error"]))
        return RemoteChild(self, int(reply["pid"]))

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        """The child's exit code once the server reaped it; None while it runs (after ``timeout``)."""
        with self._cond:
            self._cond.wait_for(lambda: pid in self._codes or bool(self.lost), timeout)
            if pid in self._codes:
                return self._codes.pop(pid)
            if self.lost:
                raise RunnerLost(self.lost)
            return None

    def alive(self) -> bool:
        return not self.lost and self.process.poll() is None

    def close(self) -> None:
        """Stop the server (it kills the groups of children still running as it exits) and remove its home."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
