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
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evokernel.evaluation import host_binding, sessions
from evokernel.evaluation.build_clock import BuildClock
from evokernel.evaluation.object_files import copy_object
from evokernel.evaluation.workspace import read_tail

ISOLATION_UNAVAILABLE = 75  # object_build's exit code when it cannot confine the build
# The ninja targets object_build builds (all when empty): a split build's .cu half (host_binding.py).
TARGETS = "EVOKERNEL_NINJA_TARGETS"
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
    """What one confined build did: ninja's exit code, the log's tail, its wall and core seconds,
    whether its host binding's ``main.o`` came from the cache (host_binding.py), and the seconds
    the node held it back (build_clock.py), by which its deadline moved."""

    code: int
    output: str
    seconds: float
    cpu_s: float
    host_reused: bool = False
    held_s: float = 0.0


def run(
    staging: Path,
    deadline: float,
    isolation: str,
    extra_read: list[str],
    env: dict[str, str],
    hosts: Path | None = None,
    max_held_s: float = 0.0,
) -> BuildRun:
    """ninja in ``staging``, confined, in its own session; raises ``TimeoutError`` at ``deadline``
    (``time.perf_counter``) plus the seconds the node held the build back, up to ``max_held_s``
    (build_clock.py; 0: the wall clock alone), after killing every member of the session.
    ``hosts``: where compiled host bindings are kept (the cache root's ``hosts/``), None to
    compile ``main.cpp`` every time."""
    found = None
    if hosts is not None and isolation != "off":
        ninja = (staging / "build.ninja").read_text().replace(str(staging), host_binding.PLACEHOLDER)
        main_cpp = staging / "main.cpp"
        found = host_binding.plan(ninja, main_cpp.read_text()) if main_cpp.is_file() else None
    if found is None:
        return _runs(deadline, max_held_s, _start(staging, isolation, extra_read, env))
    host = Path(tempfile.mkdtemp(prefix=f"{staging.name}-host-", dir=staging.parent))
    try:
        host_binding.write_host_dir(found, staging, host)
        kept = hosts / found.key / "main.o" if hosts is not None else host
        reused = kept.is_file()
        if reused:
            copy_object(kept, host / "main.o")
            os.utime(kept)  # least recently used goes first
            first = None
        else:
            # main.o alone in its own directory while the .cu compiles in staging: two domains.
            starts = [_start(host, isolation, extra_read, env)]
            if found.targets:
                starts.append(_start(staging, isolation, extra_read, env, found.targets))
            first = _runs(deadline, max_held_s, *starts)
            if first.code != 0:
                return first
            copy_object(host / "main.o", kept)
        host_binding.link_through(found, staging, host)
        held = first.held_s if first is not None else 0.0
        start = _start(staging, isolation, [*extra_read, str(host)], env)
        last = _runs(deadline + held, max_held_s - held, start)
    finally:
        shutil.rmtree(host, ignore_errors=True)
    if first is None:
        return dataclasses.replace(last, host_reused=True)
    return BuildRun(
        last.code,
        f"{first.output}{last.output}",
        first.seconds + last.seconds,
        first.cpu_s + last.cpu_s,
        held_s=first.held_s + last.held_s,
    )


@dataclass
class _Started:
    proc: subprocess.Popen[bytes]
    log: Path
    code: int | None = None
    cpu_s: float = 0.0


def _start(
    directory: Path, isolation: str, extra_read: list[str], env: dict[str, str], targets: tuple[str, ...] = ()
) -> _Started:
    command = [sys.executable, "-P", "-m", "evokernel.evaluation.object_build", isolation, str(directory)]
    env = {**env, "HOME": str(directory), "TMPDIR": str(directory), TARGETS: " ".join(targets)}
    log = directory / "build.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, *extra_read],
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return _Started(proc, log)


def _runs(deadline: float, max_held_s: float, *started: _Started) -> BuildRun:
    """Wait for builds started at once; the first non-zero exit code, every log, the core-seconds
    of all, the seconds the node held them back. ``wait4`` (which ``Popen.wait`` does not expose)
    gives each build's CPU time and that of everything it reaped (ninja reaps its compilers)."""
    begin = time.perf_counter()
    clock = BuildClock([s.proc.pid for s in started], max_held_s)
    try:
        while any(s.code is None for s in started):
            for s in started:
                if s.code is None:
                    pid, status, usage = os.wait4(s.proc.pid, os.WNOHANG)
                    if pid == s.proc.pid:
                        s.code = s.proc.returncode = os.waitstatus_to_exitcode(status)
                        s.cpu_s = usage.ru_utime + usage.ru_stime
            if any(s.code is None for s in started):
                if time.perf_counter() >= deadline + clock.look():
                    raise TimeoutError("the extension build outlived the evaluation's timeout")
                time.sleep(POLL_S)
    finally:
        for s in started:
            sessions.kill_session(s.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired, ChildProcessError):
                s.proc.wait(timeout=5)
    code = next((s.code for s in started if s.code), 0)
    # The logs sit where the confined builds could write: read as any untrusted file is.
    output = "".join(read_tail(s.log) for s in started)
    seconds = time.perf_counter() - begin
    return BuildRun(code or 0, output, seconds, sum(s.cpu_s for s in started), held_s=clock.held_s)


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
