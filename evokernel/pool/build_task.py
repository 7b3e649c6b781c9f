"""One pooled object build on a build node (issue 37): the Ray task the build pool submits.

Enters: a :class:`~evokernel.evaluation.build_client.BuildJob` (the GPU node's staging files).
Leaves: ``(reply, object bytes)`` as two Ray returns, so the pool's dispatcher waits on the small
reply and hands the bytes' reference on: they travel from this node's object store straight to
the GPU node's actor, never through the dispatcher.

The build is the GPU node's, made here: the files are written into a staging directory of this
node's own object cache root (the placeholder replaced by its path) and compiled by
:func:`evokernel.evaluation.confined_build.run` under the same confinement as on the GPU node
(Landlock writes only beneath staging, seccomp, capabilities dropped). The node must have the
same toolchain, checked by the cache root's key (torch's install path, Python, compiler, CUDA
home and nvcc version): otherwise ``build.ninja``'s absolute include paths would name another
installation, and the reply says ``unavailable`` so the pool tries another node.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import ray

from evokernel.evaluation import confined_build, privileges, quiet
from evokernel.evaluation.build_client import BuildJob, BuildReply
from evokernel.evaluation.object_files import open_object

STAGING_PLACEHOLDER = "@EVOKERNEL_STAGING@"


def node_root() -> Path:
    """This node's object cache root (made if missing): where pooled builds are staged."""
    from evokernel.evaluation.object_cache import default_root

    root = default_root()
    for name in ("staging", "hosts"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return root


def header_base() -> Path:
    """Where this node's precompiled torch headers live (the base evaluator actors build under)."""
    return Path(tempfile.gettempdir()) / f"evokernel-pch-{os.getuid()}"


@functools.cache
def _header_key() -> str:
    """The toolchain's header key (``cache_key`` runs the compiler: once per worker process)."""
    from evokernel.evaluation.pch import cache_key

    return cache_key()


def header_root() -> Path:
    """This node's header directory for its toolchain."""
    return header_base() / _header_key()


def header_reads() -> list[str]:
    """The node's precompiled torch header, when one was built here (evaluation/pch.py): a
    ``build.ninja`` from a GPU node whose header was ready names it with ``-I``, and the same path
    holds the same header on a node of the same toolchain; without it gcc reads the real one."""
    root = header_root()
    return [str(root)] if root.is_dir() else []


def start_header_build(job: BuildJob) -> subprocess.Popen[bytes] | None:
    """Start building this node's precompiled header in the background when ``job`` names one and
    the node has none (nor a build of it under way: ``pch.build`` makes the root first). A CPU-only
    build node runs no evaluator, which is what builds it on a GPU node, and without it the
    host binding's ``main.cpp`` costs ~17 s of one core instead of 7-11 (docs/benchmarks.md,
    session 10): ~80 core-seconds once, paid back in ~8 misses. This build goes on without it."""
    from evokernel.evaluation.launcher import sandbox_env

    base = header_base()
    if str(base) not in job.files.get("build.ninja", "") or header_root().exists():
        return None
    workdir = Path(tempfile.mkdtemp(prefix="pch-", dir=node_root()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "evokernel.evaluation.pch", str(base), "--cuda"],
        env=sandbox_env("cuda", workdir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # Reaped (and its scratch removed) by a thread of this worker, whatever the build task does.
    threading.Thread(target=_reap, args=(proc, workdir), name="evk-pch-reap", daemon=True).start()
    return proc


def _reap(proc: subprocess.Popen[bytes], workdir: Path) -> None:
    proc.wait()
    shutil.rmtree(workdir, ignore_errors=True)


def build_here(job: BuildJob, jobs: int) -> tuple[BuildReply, bytes]:
    """Build ``job`` on this node with ``jobs`` parallel compiles; never raises for the build's
    own faults (they are the reply)."""
    import time

    from evokernel.evaluation.launcher import sandbox_env
    from evokernel.evaluation.object_cache import toolchain_key

    node = ray.get_runtime_context().get_node_id()
    # As the evaluator actor does: the confined build runs as this user and may not read this
    # process's /proc files (evaluation/privileges.py).
    privileges.make_nondumpable()
    if toolchain_key() != job.root_key:
        why = f"node {node[:8]} has another toolchain ({toolchain_key()}, the job's is {job.root_key})"
        return BuildReply("unavailable", why, node, details={"toolchain": True}), b""
    quiet.register_builder()  # on a GPU node, stopped in timing windows like a local build
    root = node_root()
    start_header_build(job)
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=root / "staging"))
    try:
        for name, text in job.files.items():
            (staging / name).write_text(text.replace(STAGING_PLACEHOLDER, str(staging)))
        deadline = time.perf_counter() + job.timeout_s
        env = sandbox_env("cuda", staging, jobs)
        try:
            # The node's holds (run-queue waits; on a GPU node's spare cores, its quiet windows'
            # stops) move the build's deadline, within the job's credit (build_clock.py).
            run = confined_build.run(
                staging, deadline, "required", header_reads(), env, root / "hosts", max_held_s=job.max_held_s
            )
        except TimeoutError:
            return BuildReply("timeout", "the extension build outlived the evaluation's timeout", node), b""
        if run.code == confined_build.ISOLATION_UNAVAILABLE:
            why = f"node {node[:8]} cannot confine builds: {run.output[-300:]}"
            return BuildReply("unavailable", why, node, run.seconds, run.cpu_s, held_s=run.held_s), b""
        if run.code != 0:
            deterministic = confined_build.deterministic_failure(run.code, run.output)
            details = {"deterministic": deterministic}
            reply = BuildReply(
                "failed", run.output, node, run.seconds, run.cpu_s, details=details, held_s=run.held_s
            )
            return reply, b""
        try:
            with open_object(staging / job.so_name) as f:
                data = f.read()
        except (OSError, RuntimeError) as exc:
            why = f"the build left no object: {exc}"
            return BuildReply("failed", why, node, run.seconds, run.cpu_s, held_s=run.held_s), b""
        reply = BuildReply(
            "built", "", node, run.seconds, run.cpu_s, host_reused=run.host_reused, held_s=run.held_s
        )
        return reply, data
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@ray.remote(num_returns=2, max_retries=0)
def build_task(job: dict[str, Any], jobs: int) -> tuple[dict[str, Any], bytes]:
    """The Ray task: ``max_retries=0`` because the dispatcher retries a lost build itself, on
    another node (Ray's own retry would wait for the same pinned node)."""
    reply, data = build_here(BuildJob.from_json(job), jobs)
    return reply.to_json(), data
