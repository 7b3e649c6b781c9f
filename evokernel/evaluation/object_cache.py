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
* A failed build's verdict is kept (``failed/<key>``) only when the compiler's own diagnostic
  says the inputs failed it (:func:`~evokernel.evaluation.confined_build.deterministic_failure`):
  a child that keeps a parent's ``.cu`` whose light-header attempt failed gets that verdict back
  at once instead of 20-30 s of nvcc. A kill, a full disk or an out-of-memory compiler is not the
  source's fault and is built again.
* ``evaluation.builds=pool`` (issue 37): a miss goes to the Ray build pool through the actor
  (:mod:`evokernel.evaluation.build_client`) and is compiled, confined the same way, on a node
  with cores to spare; the object's bytes come back and are written here under the key computed
  here. When the pool cannot answer, the miss is built here as before and the summary says why.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evokernel.evaluation import confined_build, host_binding
from evokernel.evaluation.build_call import FLAGS, STRINGS, call_arguments
from evokernel.evaluation.build_client import (
    RETURN_MARGIN_S,
    BuildJob,
    BuildPoolUnavailable,
    ask_pool,
    stepped_out,
)
from evokernel.evaluation.confined_build import ISOLATION_UNAVAILABLE
from evokernel.evaluation.object_files import copy_object, locked, prune, write_object

# Builds one evaluation may ask for: the corpus's files make 1-4 calls.
MAX_BUILDS = 16
# The compiler output a remembered failure keeps (read_tail's cap).
OUTPUT_CAP = 64 << 10
STAGING_PLACEHOLDER = b"@EVOKERNEL_STAGING@"
_PREPARING = threading.Lock()
__all__ = [
    "FLAGS",
    "ISOLATION_UNAVAILABLE",
    "STRINGS",
    "ObjectCache",
    "call_arguments",
    "object_note",
    "prune",
]


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


@functools.cache
def toolchain_key() -> str:
    """:func:`root_key` once per process (two compiler subprocesses each time otherwise)."""
    return root_key()


def default_root() -> Path:
    return Path(tempfile.gettempdir()) / f"evokernel-objects-{os.getuid()}" / root_key()


@dataclass
class ObjectCache:
    """One supervisor's use of the node's cache: ``answer`` each build request of its worker.
    ``pool``: the actor's build-service socket (``evaluation.builds=pool``), else None."""

    root: Path
    isolation: str
    extra_read: list[str]
    env: dict[str, str]
    pool: str | None = None
    # The actor's socket for stepping out of its active gate around a build made here
    # (build_client.stepped_out), or None.
    gate: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    build_s: float = 0.0
    # Core-seconds of this candidate's builds, here or on a build node (confined_build.py).
    build_cpu_s: float = 0.0
    # Seconds this node held the builds made here back (build_clock.py), by which the
    # evaluation's deadline moves, up to max_held_s (the supervisor's timeout; 0: none).
    max_held_s: float = 0.0
    held_s: float = 0.0
    off_reason: str = ""
    # What the build pool did: objects built there per node, failures answered from the cache,
    # builds re-run after a node was lost, and why a build fell back to this node.
    extra: dict[str, Any] = field(default_factory=dict)

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
            with locked(objects / f"{key}.lock", deadline):
                if target.is_file():
                    os.utime(target)  # least recently used goes first
                    return self._count("hits", {"object": str(target), "name": module})
                known = self._known_failure(key)
                if known is not None:
                    self._add("failed_cached")
                    return self._count("failed", {"error": known})
                start = time.perf_counter()
                try:
                    failed = self._build(staging, so_name, key, target, deadline)
                finally:
                    self.build_s += time.perf_counter() - start
                if failed is not None:
                    return failed
            return self._count("built", {"object": str(target), "name": module})
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def summary(self) -> dict[str, Any]:
        return {
            **self.counts,
            "build_s": round(self.build_s, 2),
            **({"build_cpu_s": round(self.build_cpu_s, 2)} if self.build_cpu_s else {}),
            **({"build_held_s": round(self.held_s, 2)} if self.held_s else {}),
            **self.extra,
            **({"off": self.off_reason} if self.off_reason else {}),
        }

    def _count(self, what: str, reply: dict[str, Any]) -> dict[str, Any]:
        self.counts[what] = self.counts.get(what, 0) + 1
        return reply

    def _add(self, what: str, node: str = "") -> None:
        if node:
            nodes = self.extra.setdefault(what, {})
            nodes[node] = nodes.get(node, 0) + 1
        else:
            self.extra[what] = self.extra.get(what, 0) + 1

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

        # One thread at a time: the patch is the module's (a supervisor has one build thread; a
        # process that asks for builds from several threads, a test or a tool, must not race it).
        with _PREPARING:
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
        for name, content in staged_files(staging).items():
            digest.update(f"{name}\0{len(content)}\0".encode() + content)
        return found.group(1), digest.hexdigest()

    def _build(
        self, staging: Path, so_name: str, key: str, target: Path, deadline: float
    ) -> dict[str, Any] | None:
        """Build the object into ``target``: on the pool when there is one, else (or when it
        cannot answer) here. None when built, else the reply for the worker."""
        if self.pool and self.isolation != "off":
            held = self.held_s
            try:
                return self._pool_build(staging, so_name, key, target, deadline)
            except BuildPoolUnavailable as exc:
                self._add("pool_fallback")
                self.extra["pool_fallback_reason"] = str(exc)[:300]
            deadline += self.held_s - held  # what the pool took before it gave up is not ours
        hosts = self._dir("hosts")
        with stepped_out(self.gate, deadline) as waited:
            room = self.max_held_s - self.held_s
            run = confined_build.run(
                staging, deadline, self.isolation, self.extra_read, self.env, hosts, max_held_s=room
            )
        self.held_s += run.held_s
        if "back_wait_s" in waited:  # seconds the build's evaluation waited for an active place again
            self.extra["back_wait_s"] = round(self.extra.get("back_wait_s", 0.0) + waited["back_wait_s"], 3)
        self.build_cpu_s += run.cpu_s
        if run.host_reused:
            self._add("host_reused")
        if run.code == ISOLATION_UNAVAILABLE:
            self.off_reason = f"the build could not be confined: {run.output[-300:]}"
            return self._count("local", {"local": self.off_reason})
        if run.code != 0:
            if confined_build.deterministic_failure(run.code, run.output):
                self._remember_failure(key, run.output)
            return self._count("failed", {"error": run.output})
        copy_object(staging / so_name, target)
        return None

    def _pool_build(
        self, staging: Path, so_name: str, key: str, target: Path, deadline: float
    ) -> dict[str, Any] | None:
        """The miss on the Ray build pool (build_client.py); raises BuildPoolUnavailable when
        the pool cannot build it, so the caller builds here."""
        assert self.pool is not None
        try:
            files = {name: content.decode() for name, content in staged_files(staging).items()}
        except UnicodeDecodeError as exc:
            raise BuildPoolUnavailable("a staged file is not text") from exc
        timeout_s = deadline - time.perf_counter() - RETURN_MARGIN_S
        if timeout_s <= 0:
            raise BuildPoolUnavailable("too little time left to send the build away")
        # The pool's queue, lost nodes and the build node's holds move the deadline as this node's
        # holds do, from the same credit (build_clock.py): the candidate's seconds are its build's.
        room = max(0.0, self.max_held_s - self.held_s)
        host = host_binding.host_key(files)
        job = BuildJob(key, so_name, toolchain_key(), files, timeout_s, host, max_held_s=room)
        reply, blob = ask_pool(self.pool, job, deadline + room)
        self.held_s += min(room, reply.held_s)
        if reply.status == "unavailable":
            raise BuildPoolUnavailable(reply.output or "the build pool could not build it")
        if reply.status == "timeout":
            raise TimeoutError("the extension build outlived the evaluation's timeout (on the build pool)")
        self.build_cpu_s += reply.cpu_s
        if reply.retried:
            self.extra["pool_retried"] = self.extra.get("pool_retried", 0) + reply.retried
        if reply.status == "failed":
            self._add("pool_failed", reply.node[:12])
            if reply.details.get("deterministic"):
                self._remember_failure(key, reply.output)
            return self._count("failed", {"error": reply.output})
        write_object(blob, target)
        if reply.host_reused:
            self._add("host_reused")
        self._add("pool", reply.node[:12])
        return None

    def _known_failure(self, key: str) -> str | None:
        path = self.root / "failed" / key
        try:
            return path.read_text()[-OUTPUT_CAP:]
        except (OSError, UnicodeDecodeError):
            return None

    def _remember_failure(self, key: str, output: str) -> None:
        write_object(output[-OUTPUT_CAP:].encode(), self._dir("failed") / key, mode=0o444)


def staged_files(staging: Path) -> dict[str, bytes]:
    """The staging directory's files (what torch wrote), by name, with the staging path replaced
    by a placeholder: the build's identity, the same wherever it is staged."""
    placeholder = str(staging).encode()
    return {
        path.name: path.read_bytes().replace(placeholder, STAGING_PLACEHOLDER)
        for path in sorted(p for p in staging.iterdir() if p.is_file() and p.name != "lock")
    }


def object_note(counts: dict[str, int]) -> str:
    """The build stage's note: what the node's object cache did for this candidate."""
    parts = [
        f"{counts[key]} {text}"
        for key, text in (("hits", "from the node's object cache"), ("built", "built into it"))
        if counts.get(key)
    ]
    return f"extensions: {', '.join(parts)}" if parts else ""
