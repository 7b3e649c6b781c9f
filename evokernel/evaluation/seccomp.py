"""A seccomp filter for the candidate's process tree: no new network endpoints, no escape from the
session that the sandbox kills, no tracing, no io_uring (which would bypass all of this).

Written as ~30 classic-BPF instructions installed with ``prctl``: ``pyseccomp`` (0.1.2, a ctypes
shim) and Debian's ``python3-seccomp`` both need ``libseccomp.so.2`` from the system, which slim
CUDA containers often lack, for a filter this small. Refused (errno, so the caller sees an
ordinary failure instead of a kill):

* ``socket``: every family but ``AF_UNIX``, and ``AF_UNIX`` datagrams (``EACCES``). Only connected
  stream/seqpacket pairs remain, as ``socketpair`` makes them (the supervisor channel is one).
* ``connect``: always (``EACCES``): a stream ``AF_UNIX`` socket could otherwise reach a path
  (Ray's raylet socket, ``/var/run/docker.sock``); Landlock does not cover that on kernel 6.18.
* ``io_uring_setup/enter/register`` (``EPERM``): io_uring opens sockets and files without these
  syscalls. ``ptrace``, ``process_vm_readv/writev`` (``EPERM``).
* ``setsid`` (``EPERM``): every descendant stays in the supervisor's session, which the sandbox
  kills as a whole (sessions.py). ``setpgid`` stays allowed: ninja puts each compile in a group.
* ``unshare``, ``setns``, ``clone`` with a namespace flag (``EPERM``); ``clone3`` (``ENOSYS``: its
  flags are behind a pointer the filter cannot read; glibc then falls back to ``clone``).
* A system call of another ABI (i386 or x32 on x86_64) kills the process: nothing legitimate
  makes one, and the filter's numbers would not apply to it.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import struct

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
LD_W_ABS, JMP_JEQ_K, JMP_JGE_K, JMP_JSET_K, ALU_AND_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
AF_UNIX, SOCK_STREAM, SOCK_SEQPACKET, SOCK_TYPE_MASK = 1, 1, 5, 0xF
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (NEWTIME is clone3-only).
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
X32_SYSCALL_BIT = 0x40000000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0, OFFSET_ARG1 = 0, 4, 16, 24  # struct seccomp_data, little endian

_ARCHES = {
    # machine: (AUDIT_ARCH, {name: number})
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "connect": 42,
            "clone": 56,
            "ptrace": 101,
            "setsid": 112,
            "unshare": 272,
            "setns": 308,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "socket": 198,
            "connect": 203,
            "clone": 220,
            "ptrace": 117,
            "setsid": 157,
            "unshare": 97,
            "setns": 268,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
        },
    ),
}
_libc = ctypes.CDLL(None, use_errno=True)
_GENERIC = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "clone3": 435}


class SeccompError(OSError):
    """The filter could not be installed (no seccomp in the kernel, an unknown architecture)."""


def supported_arch() -> bool:
    return platform.machine() in _ARCHES


def available() -> bool:
    """The kernel has seccomp filters (CONFIG_SECCOMP_FILTER) with errno returns, for this arch."""
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail") as f:
            actions = f.read().split()
    except OSError:
        return False
    return supported_arch() and "errno" in actions


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


@functools.cache
def program() -> bytes:
    """The filter for this machine's architecture, as ``struct sock_filter[]`` bytes."""
    machine = platform.machine()
    if machine not in _ARCHES:
        raise SeccompError(errno.ENOSYS, f"no seccomp filter for the {machine} architecture")
    arch, numbers = _ARCHES[machine]
    nr = {**numbers, **_GENERIC}
    deny = {
        "connect": errno.EACCES,
        "ptrace": errno.EPERM,
        "process_vm_readv": errno.EPERM,
        "process_vm_writev": errno.EPERM,
        "setsid": errno.EPERM,
        "unshare": errno.EPERM,
        "setns": errno.EPERM,
        "io_uring_setup": errno.EPERM,
        "io_uring_enter": errno.EPERM,
        "io_uring_register": errno.EPERM,
        "clone3": errno.ENOSYS,
    }
    code = [
        _insn(LD_W_ABS, OFFSET_ARCH),
        _insn(JMP_JEQ_K, arch, 1, 0),
        _insn(RET_K, RET_KILL_PROCESS),
        _insn(LD_W_ABS, OFFSET_NR),
    ]
    if machine == "x86_64":
        code += [_insn(JMP_JGE_K, X32_SYSCALL_BIT, 0, 1), _insn(RET_K, RET_KILL_PROCESS)]
    for name, number in deny.items():
        code += [_insn(JMP_JEQ_K, nr[name], 0, 1), _insn(RET_K, RET_ERRNO | number)]
    code += [
        # clone: refused when its flags (argument 0) ask for a new namespace.
        _insn(JMP_JEQ_K, nr["clone"], 0, 4),
        _insn(LD_W_ABS, OFFSET_ARG0),
        _insn(JMP_JSET_K, CLONE_NAMESPACES, 0, 1),
        _insn(RET_K, RET_ERRNO | errno.EPERM),
        _insn(RET_K, RET_ALLOW),
        # socket: AF_UNIX stream or seqpacket only.
        _insn(JMP_JEQ_K, nr["socket"], 0, 8),
        _insn(LD_W_ABS, OFFSET_ARG0),
        _insn(JMP_JEQ_K, AF_UNIX, 0, 5),
        _insn(LD_W_ABS, OFFSET_ARG1),
        _insn(ALU_AND_K, SOCK_TYPE_MASK),
        _insn(JMP_JEQ_K, SOCK_STREAM, 1, 0),
        _insn(JMP_JEQ_K, SOCK_SEQPACKET, 0, 1),
        _insn(RET_K, RET_ALLOW),
        _insn(RET_K, RET_ERRNO | errno.EACCES),
        _insn(RET_K, RET_ALLOW),
    ]
    return b"".join(code)


def install() -> None:
    """Install the filter on this thread and every process it starts later; it cannot be removed.
    Call it while the process has one thread (the worker right after its fork)."""
    filters = program()
    buffer = ctypes.create_string_buffer(filters, len(filters))
    # struct sock_fprog { unsigned short len; struct sock_filter *filter; }
    fprog = struct.pack("=HxxxxxxQ", len(filters) // 8, ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog_buffer, 0, 0) != 0:
        code = ctypes.get_errno()
        raise SeccompError(code, f"prctl(PR_SET_SECCOMP): {os.strerror(code)}")
