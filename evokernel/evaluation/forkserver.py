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
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from evokernel.evaluation.forkserver_process import MAX_MESSAGE_BYTES, main
from evokernel.evaluation.launcher import Launch, LauncherError, sandbox_env

__all__ = ["MAX_MESSAGE_BYTES", "START_TIMEOUT_S", "ForkServer", "RemoteChild", "RunnerLost", "main"]

# A cold Python + torch + triton import on a busy node with a network file system can take a minute.
START_TIMEOUT_S = 300.0


class RunnerLost(LauncherError):
    """The fork-server died (or never started); evaluations without a verdict are retried."""


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
            [sys.executable, "-P", "-m", "evokernel.evaluation.forkserver", str(theirs.fileno())],
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
