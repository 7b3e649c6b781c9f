"""Landlock (Linux >= 5.13): a filesystem allow-list, TCP refusal and IPC scoping for this process
and everything it starts, which no later code, native or Python, can lift.

Called through ``syscall(2)`` with ctypes: the three syscalls have the same numbers on every
architecture, and PyPI has no maintained binding (there is no ``landlock`` distribution; rust and
go have theirs). What each ABI adds is used when the kernel has it:

* ABI 1: the filesystem rights below; ABI 2 ``REFER`` (renames across directories); ABI 3
  ``TRUNCATE``; ABI 5 ``IOCTL_DEV`` (ioctls on device files: the GPU's ``/dev/nvidia*`` need it).
* ABI 4: TCP ``bind``/``connect`` handled with no port allowed, so both are refused.
* ABI 6: scoping. Abstract UNIX sockets and signals of processes outside the domain are refused.

A Landlock domain also refuses ``ptrace`` of any process outside it (siblings, the supervisor).
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
from collections.abc import Iterable
from pathlib import Path

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
# Rights that make sense on a regular file; the kernel refuses directory rights on a file rule.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
DEVICES = READ | WRITE_FILE | TRUNCATE | IOCTL_DEV


class LandlockError(OSError):
    """The kernel refused a Landlock call (errno and step in the message)."""


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _call(step: str, number: int, *args: object) -> int:
    result = int(_libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"{step}: {os.strerror(errno)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI; 0 when it has none (too old, not in the LSM list, or the syscall
    is filtered, as some container runtimes do)."""
    try:
        return _call(
            "landlock_create_ruleset",
            SYS_CREATE_RULESET,
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(CREATE_RULESET_VERSION),
        )
    except LandlockError:
        return 0


def fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def restrict(
    abi: int,
    read: Iterable[Path],
    write: Iterable[Path],
    devices: Iterable[Path],
) -> dict[str, bool]:
    """Restrict this process (and its future children) to: read and execute beneath ``read``,
    everything beneath ``write``, device access beneath ``devices``; no TCP; no signals or
    abstract sockets outside. Paths that do not exist are skipped. Returns which layers hold."""
    if abi < 1:
        raise LandlockError(0, "Landlock is not available")
    handled = fs_rights(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("=QQQ", handled, net, scoped)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled, net)
    else:
        attr = struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _call(
        "landlock_create_ruleset", SYS_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)
    )
    try:
        for paths, rights in ((read, READ), (devices, DEVICES), (write, handled)):
            for path in paths:
                _allow(ruleset, path, rights & handled)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise LandlockError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        _call("landlock_restrict_self", SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return {"filesystem": True, "tcp": bool(net), "scopes": bool(scoped)}


def _allow(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # absent on this machine (/lib32, a CUDA_HOME that is not there): nothing to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        # struct landlock_path_beneath_attr is packed: u64 allowed_access, s32 parent_fd.
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        _call(
            f"landlock_add_rule({path})",
            SYS_ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(RULE_PATH_BENEATH),
            attr,
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)
