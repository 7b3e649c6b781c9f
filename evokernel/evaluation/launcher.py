"""How a sandboxed evaluation's supervisor process starts: the allow-listed environment
(:func:`sandbox_env`), what it is started with (:class:`Launch`), the started process
(:class:`Child`) and the default, cold launcher (:func:`popen_launcher`, a new interpreter per
candidate). :mod:`evokernel.evaluation.forkserver` is the warm one; :mod:`evokernel.evaluation.sandbox`
runs either."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from evokernel.evaluation.quiet import REGISTRY_VAR, node_registry
from evokernel.evaluation.workspace import directory_env
from evokernel.exceptions import EvaluationError

# Variables a candidate process may inherit. Everything else (OPENAI_API_KEY, AWS_*, HTTP_PROXY,
# ...) is dropped. PYTHONPATH stays because evaluation nodes may install packages with --target.
ENV_ALLOW = (
    "PATH",
    "LANG",
    "LC_ALL",
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TRITON_PTXAS_PATH",
    "TORCH_CUDA_ARCH_LIST",
    "CC",
    "CXX",
)
# TRITON_CACHE_DIR is deliberately absent: a cache shared between candidates could be poisoned (a
# candidate plants a binary under a key another candidate's kernel will hit). Each evaluation gets
# its own under its working directory.


def sandbox_env(device: str, workdir: Path, build_jobs: int | None = None) -> dict[str, str]:
    """The allow-listed environment with every cache and scratch path inside ``workdir`` (the
    supervisor's own directory: the worker moves to the candidate's after its fork, workspace.py).
    ``build_jobs``: ``MAX_JOBS`` for a ``load_inline`` build (ninja's default is every core,
    which oversubscribes a node where several builds run at once)."""
    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    env.update(directory_env(workdir))
    env[REGISTRY_VAR] = str(node_registry())  # the caller's, before TMPDIR above moved
    # PYTHONSAFEPATH (``-P``): the current directory never goes on sys.path, so a module planted
    # in a directory a candidate wrote is never imported by a process started there.
    env.update(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", PYTHONSAFEPATH="1", OMP_NUM_THREADS="1")
    if build_jobs is not None:
        env["MAX_JOBS"] = str(max(1, build_jobs))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class LauncherError(EvaluationError):
    """The launcher lost the supervisor it started (e.g. its fork-server died), so no exit status
    will come; raised only when no authentic verdict arrived either. The caller may retry."""


@dataclass(frozen=True)
class Launch:
    """What one supervisor process is started with: the request file in its working directory,
    its environment, and the three descriptors it inherits (key pipe, result pipe, output file)."""

    workdir: Path
    request_path: Path
    env: dict[str, str]
    key_fd: int
    result_fd: int
    output_fd: int

    def argv(self) -> list[str]:
        return [str(self.request_path), str(self.key_fd), str(self.result_fd)]


class Child(Protocol):
    """A started supervisor, leader of its own process group (``pid`` is the group id);
    ``subprocess.Popen`` is one. Exit codes follow Popen: negative for a signal."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


Launcher = Callable[[Launch], Child]


def popen_launcher(launch: Launch) -> Child:
    """The cold path: a new interpreter per candidate, in a new session."""
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "evokernel.evaluation.harness", *launch.argv()],
        cwd=launch.workdir,
        env=launch.env,
        stdin=subprocess.DEVNULL,
        stdout=launch.output_fd,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        pass_fds=(launch.key_fd, launch.result_fd),
    )
