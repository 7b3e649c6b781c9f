"""The node's cache of compiled ``load_inline`` extensions, built on the trusted side (issue 23).

Why: in a search a child usually keeps its parent's CUDA code and changes the Python around it,
and a real level-3 extension costs 30-50 core-seconds to build (docs/benchmarks.md). Here a
repeated build is a file lookup, across candidates, actors and runs of the node.

How, and why a candidate cannot poison it:

* The worker does not build (:mod:`evokernel.evaluation.remote_builds`): it sends its
  ``load_inline`` call's arguments, after inline_builds' header changes, to its supervisor.
* The supervisor (:class:`ObjectCache`, which never runs candidate code) lets torch's own
  ``load_inline`` write the sources and ``build.ninja`` into a fresh staging directory, with
  ``_run_ninja_build`` replaced so nothing is compiled in its process. The key is the SHA-256 of
  those files (the staging path replaced by a placeholder); the cache root's name covers torch,
  Python, the host compiler and nvcc (:func:`root_key`). So an object is only reused for
  byte-identical sources, flags and toolchain.
* A miss is compiled by ninja in its own session under the worker's confinement
  (:mod:`evokernel.evaluation.object_build`: Landlock writes only to the staging directory,
  seccomp), then killed to the last process, and the supervisor **copies** the ``.so`` (a
  regular file, opened without following links) into ``objects/<key>/``: a process that kept the
  staging file open can no longer reach the cached copy. Workers read the cache and never write
  it (Landlock grants them read only).
* Failed builds are not cached (a compile error is cheap to repeat; an out-of-memory kill is not
  the source's fault).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evokernel.evaluation import sessions
from evokernel.evaluation.workspace import read_tail

# The load_inline arguments a call may send and their types; any other (include paths, build
# directories, SYCL) is built by the worker itself, as before.
STRINGS = ("cpp_sources", "cuda_sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags")
FLAGS = ("with_cuda", "with_pytorch_error_handling", "use_pch", "no_implicit_headers")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
# What a call may send: ~1 MB of sources covers the corpus's largest file 20 times over.
MAX_CALL_BYTES = 4 << 20
MAX_OBJECT_BYTES = 1 << 30
# Builds one evaluation may ask for: the corpus's files make 1-4 calls.
MAX_BUILDS = 16
# Least recently used objects go beyond this total (a level-3 CUDA extension is 1-20 MB); one
# used within the grace period stays, so a worker never loses an object it was just sent.
MAX_CACHE_BYTES = 8 << 30
GRACE_S = 600.0
STAGING_PLACEHOLDER = b"@EVOKERNEL_STAGING@"
ISOLATION_UNAVAILABLE = 75  # object_build's exit code when it cannot confine the build


def root_key() -> str:
    """Toolchain identity: the precompiled header's key (torch, Python, host compiler, CUDA home)
    plus nvcc's version, which can change in place under the same CUDA home."""
    from torch.utils.cpp_extension import CUDA_HOME

    from evokernel.evaluation.pch import cache_key

    nvcc = Path(CUDA_HOME or "/nonexistent", "bin", "nvcc")
    version = ""
    if nvcc.exists():
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    return hashlib.sha256(f"{cache_key()}\n{version}".encode()).hexdigest()[:16]


def default_root() -> Path:
    return Path(tempfile.gettempdir()) / f"evokernel-objects-{os.getuid()}" / root_key()


def call_arguments(call: Any) -> dict[str, Any] | None:
    """The worker's call as ``load_inline`` keyword arguments, or None when it is malformed or
    not one the cache builds (the worker then builds it itself)."""
    if not isinstance(call, dict) or len(json.dumps(call)) > MAX_CALL_BYTES:
        return None
    name = call.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return None
    arguments: dict[str, Any] = {"name": name}
    for key, value in call.items():
        if key == "name":
            continue
        if key in STRINGS:
            if isinstance(value, list) and all(isinstance(s, str) for s in value):
                arguments[key] = list(value)
            elif isinstance(value, str) and key.endswith("sources"):
                arguments[key] = value
            elif value is not None:
                return None
        elif key in FLAGS:
            if value is not None and not isinstance(value, bool):
                return None
            arguments[key] = value
        elif key == "functions":
            if not _names(value):
                return None
            arguments[key] = value
        else:
            return None
    return arguments if "cpp_sources" in arguments else None


def _names(value: Any) -> bool:
    """``functions``: None, a name, a list of names or {name: docstring}."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    if isinstance(value, list):
        return all(isinstance(s, str) for s in value)
    return value is None or isinstance(value, str)


@dataclass
class ObjectCache:
    """One supervisor's use of the node's cache: ``answer`` each build request of its worker."""

    root: Path
    isolation: str
    extra_read: list[str]
    env: dict[str, str]
    counts: dict[str, int] = field(default_factory=dict)
    build_s: float = 0.0
    off_reason: str = ""

    def answer(self, call: Any, deadline: float) -> dict[str, Any]:
        """``{"object": path, "name": module}``, ``{"error": compiler output}`` or ``{"local":
        why}`` (build it yourself). Raises ``TimeoutError`` when the build outlives ``deadline``."""
        arguments = call_arguments(call)
        if self.off_reason or arguments is None:
            return self._count("local", {"local": self.off_reason or "not a call the cache builds"})
        if sum(self.counts.values()) >= MAX_BUILDS:
            return self._count("local", {"local": f"more than {MAX_BUILDS} builds"})
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=self._dir("staging")))
        try:
            try:
                so_name, key = self._prepare(arguments, staging)
            except (RuntimeError, ValueError, TypeError, OSError) as exc:
                # The worker's own call raises the same for the candidate to see.
                return self._count("local", {"local": f"torch did not write the build: {exc}"[:300]})
            objects = self._dir("objects")
            target = objects / key / so_name
            module = so_name.removesuffix(".so")
            with _locked(objects / f"{key}.lock", deadline):
                if target.is_file():
                    os.utime(target)  # least recently used goes first
                    return self._count("hits", {"object": str(target), "name": module})
                start = time.perf_counter()
                code, output = self._build(staging, deadline)
                self.build_s += time.perf_counter() - start
                if code == ISOLATION_UNAVAILABLE:
                    self.off_reason = f"the build could not be confined: {output[-300:]}"
                    return self._count("local", {"local": self.off_reason})
                if code != 0:
                    return self._count("failed", {"error": output})
                _copy_object(staging / so_name, target)
            return self._count("built", {"object": str(target), "name": module})
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def summary(self) -> dict[str, Any]:
        return {
            **self.counts,
            "build_s": round(self.build_s, 2),
            **({"off": self.off_reason} if self.off_reason else {}),
        }

    def _count(self, what: str, reply: dict[str, Any]) -> dict[str, Any]:
        self.counts[what] = self.counts.get(what, 0) + 1
        return reply

    def _dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _prepare(self, arguments: dict[str, Any], staging: Path) -> tuple[str, str]:
        """torch writes the build into ``staging`` (nothing runs); returns (object file, key)."""
        import torch.utils.cpp_extension as cpp_extension

        class Written(Exception):
            pass

        def stop(*_args: Any, **_kwargs: Any) -> None:
            raise Written

        run_ninja = cpp_extension._run_ninja_build
        cpp_extension._run_ninja_build = stop
        try:
            with contextlib.suppress(Written):  # raised where ninja would have started
                cpp_extension.load_inline(**arguments, build_directory=str(staging), verbose=False)
        finally:
            cpp_extension._run_ninja_build = run_ninja
        ninja = (staging / "build.ninja").read_text()
        found = re.search(r"^default (\S+\.so)$", ninja, re.M)
        if found is None:
            raise RuntimeError("torch wrote no shared-object target into build.ninja")
        digest = hashlib.sha256()
        placeholder = str(staging).encode()
        for path in sorted(p for p in staging.iterdir() if p.is_file() and p.name != "lock"):
            content = path.read_bytes().replace(placeholder, STAGING_PLACEHOLDER)
            digest.update(f"{path.name}\0{len(content)}\0".encode() + content)
        return found.group(1), digest.hexdigest()

    def _build(self, staging: Path, deadline: float) -> tuple[int, str]:
        """ninja in ``staging``, confined, in its own session; every member killed afterwards."""
        command = [
            sys.executable,
            "-P",
            "-m",
            "evokernel.evaluation.object_build",
            self.isolation,
            str(staging),
        ]
        env = {**self.env, "HOME": str(staging), "TMPDIR": str(staging)}
        log = staging / "build.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*command, *self.extra_read],
                cwd=staging,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                code = proc.wait(timeout=max(0.0, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired as exc:
                raise TimeoutError("the extension build outlived the evaluation's timeout") from exc
            finally:
                sessions.kill_session(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        # The log sits where the confined build could write: read as any untrusted file is.
        return code, read_tail(log)


def object_note(counts: dict[str, int]) -> str:
    """The build stage's note: what the node's object cache did for this candidate."""
    parts = [
        f"{counts[key]} {text}"
        for key, text in (("hits", "from the node's object cache"), ("built", "built into it"))
        if counts.get(key)
    ]
    return f"extensions: {', '.join(parts)}" if parts else ""


def _copy_object(source: Path, target: Path) -> None:
    """A new file with the bytes of ``source``, which must be a regular file (no link)."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_OBJECT_BYTES:
            raise RuntimeError(f"the build left no regular object file of at most {MAX_OBJECT_BYTES} bytes")
        target.parent.mkdir(exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        with partial.open("wb") as out:
            shutil.copyfileobj(f, out, 1 << 20)
    partial.chmod(0o555)
    os.replace(partial, target)


@contextlib.contextmanager
def _locked(path: Path, deadline: float) -> Iterator[None]:
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
    for path in (root / "objects").glob("*/*.so"):
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
