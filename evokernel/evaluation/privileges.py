"""What Landlock and seccomp leave a candidate that runs as root, taken away; and the trusted
processes' own guard against a same-user candidate reading them (issue 33).

* **Capabilities** (:func:`drop_capabilities`): a root worker keeps ``CAP_SYS_PTRACE`` and
  ``CAP_DAC_OVERRIDE``, so ``/proc/<pid>/environ`` of every process on the node (the verify
  process's and the Ray actor's API key, the driver's library URL) and files of other users (a
  PostgreSQL server's shared memory under ``/dev/shm``) were open to it. With every capability
  dropped (effective, permitted, inheritable, ambient and the bounding set, so an ``execve`` gets
  none back either), the kernel's ptrace-access check refuses a capability-less process the
  ``/proc`` files of any process that holds capabilities it lacks, which is every root process.
* **Dumpability** (:func:`make_nondumpable`): a non-root candidate shares its uid with the driver,
  the actors and ``evokernel verify``; a process that is not dumpable has its ``/proc/<pid>``
  files (environ, mem, fd, maps) owned by root, so a same-user process cannot read them. The
  supervisor always did this; the driver's CLI and every evaluator actor now do too.
* **A private /dev/shm** (:func:`private_shm`): the supervisor moves itself into a mount namespace
  of its own with a fresh tmpfs on ``/dev/shm`` before it forks the worker, so the candidate sees
  neither the host's segments nor other candidates', and whatever it leaves there is freed when
  its last process ends. It needs ``CAP_SYS_ADMIN`` (root outside a restricted container); where
  the kernel refuses, ``/dev/shm`` stays the host's and the verdict's ``details["isolation"]``
  says so.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_NOSUID, MS_NODEV = 0x2, 0x4
# The candidate's /dev/shm: torch's CUDA IPC reference counters are a few KiB each; 1 GiB leaves
# room for a candidate that shares host tensors between its own processes.
SHM_BYTES = 1 << 30


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _status_field(name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1], 16)
    return 0


def drop_capabilities() -> str:
    """Drop every capability of this process for good; what held, for the verdict's details.
    A process that holds none (any non-root user) has nothing to drop."""
    if _status_field("CapEff") == 0 and _status_field("CapPrm") == 0:
        return "none held"
    libc = _libc()
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):  # the bounding set first: dropping it needs CAP_SETPCAP
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), f"capset: {os.strerror(ctypes.get_errno())}")
    if _status_field("CapEff") or _status_field("CapPrm") or _status_field("CapBnd"):
        raise OSError("capabilities are still held after dropping them")
    return "dropped"


def make_nondumpable() -> None:
    """Close this process's ``/proc/<pid>`` files (environ, mem, fd) to same-user processes."""
    _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def private_shm(size_bytes: int = SHM_BYTES) -> str:
    """Give this process (and every child it starts later) a ``/dev/shm`` of its own; what held."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        return f"shared (no mount namespace: {os.strerror(ctypes.get_errno())})"
    # Mounts made here must not propagate back to the host's namespace.
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"shared (mounts not private: {os.strerror(ctypes.get_errno())})"
    options = f"size={size_bytes},mode=1777".encode()
    if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        return f"shared (tmpfs not mounted: {os.strerror(ctypes.get_errno())})"
    return "private"
