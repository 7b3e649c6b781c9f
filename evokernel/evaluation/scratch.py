"""Scratch directories that go away on every exit path of the process that owns them.

An evaluator actor keeps its fork-server's home, its GPU lock and every candidate's working
directory under one root, ``<tmp>/evokernel-<uid>/actor-<pid>-<random>/``. The owner holds an
exclusive ``flock`` on ``<root>/owner.lock`` for as long as it lives. A clean shutdown removes the
root at once; when the owner dies without one (SIGKILL, the OOM killer, Ray killing or restarting
the actor, a killed driver tearing the cluster down) the kernel drops the lock with the process,
and the next owner that starts on the node sweeps every root whose lock it can take. A days-long
cluster experiment therefore holds at most one root per live actor, whatever killed the others.

An flock rather than a pid file: pids are reused, and a dead owner's lock is free without anyone
having to tell live from dead.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = "owner.lock"


def scratch_base() -> Path:
    """``<tmp>/evokernel-<uid>``: per user, so two users' sweeps never touch each other."""
    return Path(tempfile.gettempdir()) / f"evokernel-{os.getuid()}"


class ScratchDir:
    """A directory owned by this process; ``close()`` removes it, death leaves it to a sweep."""

    def __init__(self, prefix: str, base: Path | None = None) -> None:
        self.base = base or scratch_base()
        self.base.mkdir(mode=0o700, parents=True, exist_ok=True)
        sweep_stale(self.base)
        self.path = Path(tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-", dir=self.base))
        # Locked under another name, then renamed (flock follows the inode): a sweep that sees
        # `owner.lock` always finds it held. O_CLOEXEC: children (the fork-server, candidates)
        # must not keep a dead owner's lock alive.
        pending = self.path / f".{LOCK_NAME}"
        self._lock_fd: int | None = os.open(pending, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        pending.rename(self.path / LOCK_NAME)

    def close(self) -> None:
        """Remove the directory and everything in it; safe to call twice."""
        if self._lock_fd is None:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock_fd)
        self._lock_fd = None


def sweep_stale(base: Path) -> list[Path]:
    """Remove every directory under ``base`` whose owner is gone (its lock can be taken); the
    removed paths. Directories without a lock file are left alone: they are not ours."""
    removed: list[Path] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in base.iterdir():
            lock_path = entry / LOCK_NAME
            try:
                fd = os.open(lock_path, os.O_WRONLY | os.O_CLOEXEC)
            except OSError:  # no lock file (not ours, or mid-creation), or already removed
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner is alive
            finally:
                # Closing drops the lock we may have taken; the directory goes either way below.
                os.close(fd)
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    if removed:
        log.info("removed %d scratch directories of evaluators that died: %s", len(removed), removed)
    return removed
