"""The object cache's files on disk (:mod:`evokernel.evaluation.object_cache`): objects written
whole or not at all, a per-key lock, and pruning of the least recently used.

Apart from the cache's logic so that both ends of a pooled build (the supervisor that stores
the object, the build task that reads it out of its staging directory: issue 37) use the same
rules: a regular file read without following links, at most :data:`MAX_OBJECT_BYTES`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

MAX_OBJECT_BYTES = 1 << 30
# Least recently used objects go beyond this total (a level-3 CUDA extension is 1-20 MB); one
# used within the grace period stays, so a worker never loses an object it was just sent.
MAX_CACHE_BYTES = 8 << 30
GRACE_S = 600.0


def copy_object(source: Path, target: Path) -> None:
    """A new file with the bytes of ``source``, which must be a regular file (no link)."""
    with open_object(source) as f:
        write_object(f, target)


def open_object(source: Path) -> BinaryIO:
    """``source`` opened for reading if it is a regular file (no link) of at most
    :data:`MAX_OBJECT_BYTES`; raises ``RuntimeError`` otherwise."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    f = os.fdopen(fd, "rb")
    info = os.fstat(f.fileno())
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_OBJECT_BYTES:
        f.close()
        raise RuntimeError(f"the build left no regular object file of at most {MAX_OBJECT_BYTES} bytes")
    return f


def write_object(data: bytes | BinaryIO, target: Path, mode: int = 0o555) -> None:
    """``target`` with ``data``, whole or not at all (written beside it, then renamed)."""
    target.parent.mkdir(exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    with partial.open("wb") as out:
        if isinstance(data, bytes):
            out.write(data)
        else:
            shutil.copyfileobj(data, out, 1 << 20)
    partial.chmod(mode)
    os.replace(partial, target)


@contextlib.contextmanager
def locked(path: Path, deadline: float) -> Iterator[None]:
    """An exclusive lock on ``path`` (two siblings asking for the same object build it once)."""
    with path.open("a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.perf_counter() >= deadline:
                    raise TimeoutError(
                        "waited past the timeout for another build of the same extension"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def prune(root: Path, max_bytes: int = MAX_CACHE_BYTES, grace_s: float = GRACE_S) -> list[Path]:
    """Remove the least recently used objects beyond ``max_bytes`` and staging directories left
    by killed supervisors; returns what went."""
    now, removed = time.time(), []
    for stale in (root / "staging").glob("build-*"):
        with contextlib.suppress(OSError):
            if now - stale.stat().st_mtime > 3600:
                shutil.rmtree(stale, ignore_errors=True)
                removed.append(stale)
    entries = []
    # Host bindings (host_binding.py) count and go like objects: a main.o is 1-10 MB.
    for path in [*(root / "objects").glob("*/*.so"), *(root / "hosts").glob("*/main.o")]:
        with contextlib.suppress(OSError):
            info = path.stat()
            entries.append((info.st_mtime, info.st_size, path))
    total = sum(size for _, size, _ in entries)
    for mtime, size, path in sorted(entries):
        if total <= max_bytes:
            break
        if now - mtime < grace_s:
            continue
        shutil.rmtree(path.parent, ignore_errors=True)
        path.parent.with_name(f"{path.parent.name}.lock").unlink(missing_ok=True)
        total -= size
        removed.append(path.parent)
    return removed
