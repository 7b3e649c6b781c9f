"""Process-level guards: resource limits, the network refusal, and hiding the supervisor.

Applied inside the evaluation processes themselves, not through ``preexec_fn``: the sandbox runs
in a multi-threaded Ray actor, where code between fork and exec is unsafe.

* **Limits** (worker only, before candidate code): CPU seconds, data segment, file size, process
  count, no core files. ``RLIMIT_AS`` is never used: CUDA reserves tens of GiB of address space at
  ``cuInit``. ``RLIMIT_DATA`` (private writable mappings, Linux >= 4.7) bounds host memory on a
  CPU by default; on a GPU only when ``evaluation.host_memory_mb`` is set, because how the CUDA
  driver's pinned and managed mappings count against it has not been verified on every driver,
  and a limit that breaks ``cuInit`` would fail every candidate.
* **Network**: a CPython audit hook refuses to create IPv4/IPv6/raw/netlink sockets and to
  resolve names. An audit hook cannot be removed once added (``sys.addaudithook`` is itself
  audited), so a candidate cannot undo it from Python; ``unshare -n`` would also stop native code
  but needs user namespaces, which containers and clusters commonly disable, so it is not relied
  on. Native code (a ``load_inline`` extension) could still open a socket: the static rules and
  the environment allow-list (no credentials reach the process) bound what it could do.
* **Root**: root ignores ``RLIMIT_NPROC`` and may read any process's memory (``CAP_SYS_PTRACE``
  overrides the dumpable flag), so run evaluators as an unprivileged user. Dropping to ``nobody``
  inside the worker is not done: Python and torch often live under a 0700 ``/root`` (pyenv, conda),
  which ``nobody`` cannot import from. Leftover processes are found by the integrity stage and
  killed with the process group either way.
* **Dumpable off** (supervisor): ``/proc/<pid>/fd``, ``/proc/<pid>/mem`` and ptrace of the
  supervisor are then refused to its own child, so the worker cannot reach the result pipe or
  the signing key through the supervisor.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import resource
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
# Families a kernel never needs; AF_UNIX stays (torch and the worker's own link use it).
REFUSED_FAMILIES = frozenset(
    int(getattr(socket, name))
    for name in ("AF_INET", "AF_INET6", "AF_PACKET", "AF_NETLINK")
    if hasattr(socket, name)
)
REFUSED_EVENTS = frozenset({"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"})


@dataclass(frozen=True)
class Limits:
    cpu_s: int
    data_bytes: int | None
    file_bytes: int
    extra_processes: int


def default_limits(device: str, timeout_s: float, host_memory_mb: int) -> Limits:
    """``host_memory_mb``: 0 picks 8 GiB on cpu (small task sizes need well under 1 GiB; the rest is
    headroom for Triton's interpreter) and no limit on cuda (see the module docstring); -1 sets
    no limit; a positive value is the limit in MiB."""
    if host_memory_mb == 0:
        host_memory_mb = 8192 if device == "cpu" else -1
    data = None if host_memory_mb < 0 else host_memory_mb * 2**20
    # CPU seconds count every thread; twice the wall timeout leaves room for the compile threads.
    return Limits(cpu_s=int(2 * timeout_s) + 10, data_bytes=data, file_bytes=256 * 2**20, extra_processes=256)


def apply_limits(limits: Limits) -> None:
    _set(resource.RLIMIT_CPU, limits.cpu_s)
    if limits.data_bytes is not None:
        _set(resource.RLIMIT_DATA, limits.data_bytes)
    # Past 256 MiB a write fails with EFBIG instead of killing the process with SIGXFSZ, so a stdout
    # flood becomes an OSError in the candidate's own call.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _set(resource.RLIMIT_FSIZE, limits.file_bytes)
    _set(resource.RLIMIT_CORE, 0)
    # RLIMIT_NPROC counts every thread of the user, so the cap is relative to what runs now.
    _set(resource.RLIMIT_NPROC, _user_tasks() + limits.extra_processes)


def limit_reached(exc: BaseException) -> str | None:
    """The limit a candidate's exception comes from, in evokernel's words (the exception's own text
    is the operating system's); None for any other exception."""
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "output limit: wrote past the sandbox's cap on a file's size (RLIMIT_FSIZE, 256 MiB)"
    return None


def _set(which: int, value: int) -> None:
    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, hard if hard != resource.RLIM_INFINITY else value))


def _user_tasks() -> int:
    uid, count = os.getuid(), 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if proc.stat().st_uid == uid:
                count += len(os.listdir(proc / "task"))
        except OSError:
            continue  # the process exited while we looked
    return count


def _refuse_network(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.__new__" and len(args) >= 2 and args[1] in REFUSED_FAMILIES:
        raise PermissionError("network access is disabled in the evokernel sandbox")
    if event in REFUSED_EVENTS:
        raise PermissionError("network access is disabled in the evokernel sandbox")


def refuse_network() -> None:
    sys.addaudithook(_refuse_network)


def _prctl(option: int, value: int) -> bool:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return int(libc.prctl(option, value, 0, 0, 0)) == 0


def hide_from_children() -> bool:
    """Make this process non-dumpable; True when the kernel accepted it."""
    return _prctl(PR_SET_DUMPABLE, 0)


def die_with_parent() -> None:
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
