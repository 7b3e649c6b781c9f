"""The fork-server process itself (``python -m evokernel.evaluation.forkserver`` runs
:func:`main`): it imports what a supervisor and a worker need without touching a device, then
forks one supervisor per request in a select loop and reports pids and exit statuses. The design,
the protocol and the actor's handle (:class:`~evokernel.evaluation.forkserver.ForkServer`) are in
:mod:`evokernel.evaluation.forkserver`."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback
import warnings
from typing import Any

MAX_MESSAGE_BYTES = 1 << 20


def _preload() -> None:
    """Everything a supervisor and a worker import, without touching a device."""
    import numpy  # noqa: F401
    import torch
    import torch.utils.cpp_extension  # noqa: F401 - load_inline candidates
    import triton
    import triton.language  # noqa: F401

    import evokernel.evaluation.harness  # noqa: F401
    from evokernel.evaluation import isolation, seccomp

    # Computed once here, inherited by every child: what each candidate's confinement would redo.
    isolation.machine_paths()
    if seccomp.supported_arch():
        seccomp.program()


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
    try:
        sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    except (BrokenPipeError, ConnectionResetError):
        return  # the actor went away while we imported (a run that stopped at once): nothing to serve
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
        tempfile.tempdir = None  # gettempdir() caches; TMPDIR is now the supervisor's own directory
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
