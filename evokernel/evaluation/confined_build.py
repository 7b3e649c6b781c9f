"""One confined ``ninja`` build of a staging directory, wherever it runs (issue 37).

The same steps on the GPU node's supervisor (:class:`~evokernel.evaluation.object_cache.ObjectCache`,
``evaluation.builds=local``) and on a build node of the Ray build pool
(:mod:`evokernel.pool.build_task`, ``builds=pool``): ``python -m evokernel.evaluation.object_build``
in its own session under the worker's confinement (writes only beneath the staging directory),
every member of the session killed afterwards, and the log read as any untrusted file is.

What it adds to the old in-place build: the build's **core-seconds** (``os.wait4`` reports the
CPU time of the build and every descendant it reaped: ninja reaps its compilers), so each node's
figures say where the cores went, and :func:`deterministic_failure`, which tells a compile error
(the same inputs fail the same way: worth remembering) from a kill, a full disk or an
out-of-memory compiler (not the source's fault: built again next time).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from evokernel.evaluation import sessions
from evokernel.evaluation.workspace import read_tail

ISOLATION_UNAVAILABLE = 75  # object_build's exit code when it cannot confine the build
# How often the wait looks at the build (wait4 with WNOHANG): 20 ms is nothing next to a compile.
POLL_S = 0.02
# A compiler's own diagnostic: "main.cpp:3:1: error: ..." (g++), "x.cu(3): error: ..." (nvcc).
COMPILER_ERROR = re.compile(r"(:\d+(:\d+)?:|\(\d+\):) (fatal )?error", re.I)
# Failures that are the machine's, not the source's: never remembered.
TRANSIENT = re.compile(
    r"killed|signal|no space left|cannot allocate|out of memory|virtual memory exhausted"
    r"|resource temporarily unavailable|too many open files|input/output error|segmentation fault",
    re.I,
)


@dataclass(frozen=True)
class BuildRun:
    """What one confined build did: ninja's exit code, the log's tail, its wall and core seconds."""

    code: int
    output: str
    seconds: float
    cpu_s: float


def run(
    staging: Path,
    deadline: float,
    isolation: str,
    extra_read: list[str],
    env: dict[str, str],
) -> BuildRun:
    """ninja in ``staging``, confined, in its own session; raises ``TimeoutError`` at ``deadline``
    (``time.perf_counter``), after killing every member of the session."""
    command = [sys.executable, "-P", "-m", "evokernel.evaluation.object_build", isolation, str(staging)]
    env = {**env, "HOME": str(staging), "TMPDIR": str(staging)}
    log = staging / "build.log"
    start = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, *extra_read],
            cwd=staging,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code, cpu_s = _wait(proc, deadline)
        finally:
            sessions.kill_session(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired, ChildProcessError):
                proc.wait(timeout=5)
    # The log sits where the confined build could write: read as any untrusted file is.
    return BuildRun(code, read_tail(log), time.perf_counter() - start, cpu_s)


def _wait(proc: subprocess.Popen[bytes], deadline: float) -> tuple[int, float]:
    """(exit code, core-seconds of the build and what it reaped) by ``wait4``, which
    ``Popen.wait`` does not expose; ``TimeoutError`` past ``deadline``."""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never waits again
            return proc.returncode, usage.ru_utime + usage.ru_stime
        if time.perf_counter() >= deadline:
            raise TimeoutError("the extension build outlived the evaluation's timeout")
        time.sleep(POLL_S)


def deterministic_failure(code: int, output: str) -> bool:
    """Whether a failed build failed because of its inputs alone: a compiler diagnostic, and no
    sign of a kill or of the machine running out of something. Such a verdict is the same for the
    same key, so the cache may answer it again without building (a light-header attempt that
    fails costs a child of the same code 20-30 s of nvcc each time otherwise)."""
    return (
        code > 0
        and code != ISOLATION_UNAVAILABLE
        and bool(COMPILER_ERROR.search(output))
        and not (TRANSIENT.search(output))
    )
