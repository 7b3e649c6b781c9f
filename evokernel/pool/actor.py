"""``EvaluatorActor``: the Ray actor that owns one GPU (or a CPU share) and evaluates on it.

One actor per GPU (``num_gpus=1``, so Ray sets ``CUDA_VISIBLE_DEVICES`` and no two actors share
a GPU). It is a threaded actor: up to ``concurrency`` evaluations run at once, each in its own
process group started by the actor's fork-server (:mod:`evokernel.evaluation.forkserver`), so
building and correctness checking overlap while the GPU lock
(:mod:`evokernel.evaluation.gpulock`, one lock directory per actor) keeps timings from
overlapping anything. ``warm=False`` starts a new interpreter per candidate instead (the cold
path, :func:`evokernel.evaluation.sandbox.popen_launcher`).
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import ray

from evokernel.evaluation import isolation, privileges
from evokernel.evaluation.baselines import software_versions
from evokernel.evaluation.forkserver import ForkServer
from evokernel.evaluation.object_cache import default_root as object_cache_root
from evokernel.evaluation.object_cache import prune
from evokernel.evaluation.pch import HeaderCache
from evokernel.evaluation.quiet import node_registry, start_keeper, stop_keeper
from evokernel.evaluation.request import EvaluationRequest, GpuLockSpec
from evokernel.evaluation.sandbox import Launcher, LauncherError, run_sandboxed, sandbox_env
from evokernel.evaluation.scratch import ScratchDir
from evokernel.pool.active_gate import ActiveGate
from evokernel.pool.build_service import BuildService
from evokernel.types import Evaluation, Status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hardware:
    device: str
    name: str
    facts: str
    # Software versions and the device label that key cached baselines (see evaluation/baselines.py).
    versions: str = ""
    label: str = ""

    def describe(self) -> str:
        return f"{self.name} ({self.facts})" if self.facts else self.name


@ray.remote
class EvaluatorActor:
    """Runs sandboxed evaluations on the GPU (or CPU) Ray gave it, several at a time."""

    def __init__(
        self,
        device: str,
        build_jobs: int,
        warm: bool = True,
        precompiled_header: bool = False,
        isolation_mode: str = "required",
        object_cache: bool = False,
        build_pool: Any = None,
        active_limit: int = 0,
    ) -> None:
        # A same-user candidate may not read this process's /proc files (privileges.py).
        privileges.make_nondumpable()
        # On this node, before anything starts: `required` where the kernel cannot isolate fails here.
        self.isolation = isolation.check(isolation_mode)
        self.device = device
        self.build_jobs = build_jobs
        # Recorded with every evaluation: which node, and which GPU (or CPU actor) of it, evaluated it.
        self.node_id = ray.get_runtime_context().get_node_id()
        gpus = ",".join(str(g) for g in ray.get_gpu_ids())
        self.label = f"{'gpu' + gpus if gpus else f'cpu{os.getpid()}'}@{self.node_id[:8]}"
        # Everything the actor writes lives under this root, which goes on every exit path
        # (evaluation/scratch.py): removed by shutdown(), swept by the next actor after a kill.
        self.scratch = ScratchDir("actor")
        self.root = self.scratch.path
        self.lock_dir = self.root / "gpulock"
        self.lock_dir.mkdir()
        # Shared by the node's actors and reused by later runs (see evaluation/pch.py).
        self.headers: HeaderCache | None = None
        if precompiled_header:
            workdir = self.root / "pch"
            workdir.mkdir()
            base = Path(tempfile.gettempdir()) / f"evokernel-pch-{os.getuid()}"
            self.headers = HeaderCache(base, device == "cuda", sandbox_env(device, workdir))
        # Compiled load_inline extensions, shared by the node's actors and later runs (built on
        # the trusted side: evaluation/object_cache.py); least recently used go at start.
        self.objects: Path | None = None
        if object_cache:
            # Made now: a worker's Landlock rule can only name a directory that exists when it
            # confines itself (a root made later by the first build is unreadable to it).
            self.objects = object_cache_root()
            self.objects.mkdir(parents=True, exist_ok=True)
            prune(self.objects)
        # evaluation.builds=pool: the supervisors hand the cache's misses to the Ray build pool
        # through this socket (pool/build_service.py); they have no Ray connection of their own.
        # active_limit: of the evaluations admitted, how many may be active at once; those waiting
        # on a pooled build are not (pool/active_gate.py). 0: all admitted ones are.
        # The same socket lets a supervisor that builds on this node step out of the gate for it
        # (evaluation.builds=local, or the pool's fallback).
        self.gate = ActiveGate(active_limit)
        self.builds: BuildService | None = None
        self.pooled = build_pool is not None
        if self.objects is not None and (self.pooled or active_limit > 0):
            self.builds = BuildService(self.root / "builds.sock", build_pool, self.gate)
        self._server_lock = threading.Lock()
        self.runner_restarts = 0
        self._keeper: tuple[subprocess.Popen[bytes], Path] | None = None
        # Started now so its imports overlap Ray's start-up; evaluations wait until it is ready.
        self._server: ForkServer | None = ForkServer(device, self.root) if warm else None

    def hardware(self, call_start: str, training: bool = False) -> dict[str, str]:
        """The device and the software (and timing method: ``call_start``; the models' mode:
        ``training``) baselines are keyed by."""
        versions = software_versions(self.device, call_start, training)
        if self.device != "cuda":
            facts = f"{os.cpu_count()} cores"
            return asdict(
                Hardware("cpu", "CPU (Triton interpreter)", facts, versions, "cpu (Triton interpreter)")
            )
        import torch

        from evokernel.pool.hardware import device_facts, format_hardware

        p = torch.cuda.get_device_properties(0)
        # The formatted line leads with the name; Hardware.describe() adds it back once.
        facts = format_hardware(device_facts(p)).removeprefix(f"{p.name}: ")
        return asdict(Hardware("cuda", p.name, facts, versions, p.name))

    def header_cache(self, wait_s: float = 0.0) -> dict[str, Any]:
        """The precompiled header's state (``off``, ``building``, ``ready``, ``failed``), after
        waiting up to ``wait_s`` for its build."""
        if self.headers is None:
            return {"state": "off", "reason": "", "build_s": 0.0, "built": []}
        return self.headers.wait(wait_s)

    def runner_pids(self) -> dict[str, int]:
        """For tests and diagnosis: the actor's and its fork-server's process ids."""
        server = self._server
        return {"actor": os.getpid(), "forkserver": server.process.pid if server else -1}

    def _launcher(self) -> tuple[ForkServer | None, Launcher | None]:
        with self._server_lock:
            server = self._server
            if server is not None and not server.alive() and not server.ready:
                # It never started (an import failed?): new interpreters per candidate still work.
                log.warning("fork-server failed to start (%s); using the cold path", server.lost)
                server = self._server = None
            elif server is not None and not server.alive():
                log.warning("fork-server died (%s); starting a new one", server.lost or "exited")
                server = self._server = ForkServer(self.device, self.root)
                self.runner_restarts += 1
        return server, server.spawn if server is not None else None

    def evaluate(self, request: EvaluationRequest) -> dict[str, Any]:
        """One evaluation; a fork-server that dies before the verdict is replaced and the
        evaluation retried once on the new one, then ``crashed``."""
        # Waits for the GPU are bounded by the timeout itself (see gpulock.py).
        quiet = self._quiet_keeper() if request.timing.quiet_builds else None
        lock = GpuLockSpec(str(self.lock_dir), float(request.timeout_s), quiet)
        headers = self.headers.root() if self.headers is not None else None
        timeout_s = request.timeout_s
        objects = str(self.objects) if self.objects is not None else None
        service = str(self.builds.path) if self.builds is not None else None
        sandboxed = replace(
            request,
            gpu_lock=lock,
            torch_pch=headers,
            object_cache=objects,
            build_pool=service if self.pooled else None,
            build_gate=service if self.gate.limit > 0 else None,
        )
        with self.gate.evaluation() as waited_s:
            result = self._evaluate(sandboxed, timeout_s)
        if self.gate.limit > 0:  # seconds this one waited for an active place on the node
            result["details"] = {**result.get("details", {}), "active_wait_s": round(waited_s, 3)}
        return result

    def _evaluate(self, sandboxed: EvaluationRequest, timeout_s: float) -> dict[str, Any]:
        lost = ""
        for _attempt in range(2):
            server, launcher = self._launcher()
            try:
                evaluation = run_sandboxed(
                    sandboxed, timeout_s, launcher=launcher, build_jobs=self.build_jobs, scratch=self.root
                )
            except LauncherError as exc:  # e.g. forkserver.RunnerLost
                lost = str(exc)
                with self._server_lock:
                    if server is not None and self._server is server and server.alive():
                        server.close()  # it answers no more; the next _launcher() replaces it
                continue
            where = {"node": self.node_id, "actor": self.label}
            # "runner": forked from the warm fork-server, or a new interpreter (the cold path).
            runner = "forkserver" if server is not None else "cold"
            details = {
                **evaluation.details,
                "runner": runner,
                "runner_restarts": self.runner_restarts,
                **where,
            }
            return {**evaluation.to_dict(), "details": details}
        return Evaluation(
            status=Status.CRASHED, stage="sandbox", reason=f"the evaluation runner died twice: {lost}"
        ).to_dict()

    def gate_stats(self) -> dict[str, Any]:
        """The active gate's counts (pool/active_gate.py)."""
        return self.gate.stats()

    def _quiet_keeper(self) -> str:
        """The socket of this actor's quiet-window keeper (evaluation/quiet.py), started on first use."""
        with self._server_lock:
            if self._keeper is None or self._keeper[0].poll() is not None:
                self._keeper = start_keeper(self.root, node_registry())
            return str(self._keeper[1])

    def shutdown(self) -> None:
        """Stop the fork-server (it kills its candidates' process groups) and remove the root."""
        with self._server_lock:
            if self._keeper is not None:
                stop_keeper(self._keeper[0])
                self._keeper = None
            if self._server is not None:
                self._server.close()
                self._server = None
            if self.builds is not None:
                self.builds.close()
                self.builds = None
            self.scratch.close()
