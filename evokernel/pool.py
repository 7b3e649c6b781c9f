"""``EvaluatorPool``: Ray actors that turn (task, source) into an :class:`Evaluation`.

One actor per GPU (``num_gpus=1``, so Ray sets ``CUDA_VISIBLE_DEVICES`` and no two actors share a
GPU), or on a CPU-only cluster a few CPU actors whose candidates run under Triton's interpreter.
The same code runs on a laptop's local cluster and on a multi-node cluster reached by address.
An actor runs one sandboxed evaluation at a time, so timings on a GPU never overlap. The pool
knows nothing of islands or strategies.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import ray
from ray.exceptions import RayActorError, WorkerCrashedError

from evokernel.config_schema import EvaluationConfig, RayConfig
from evokernel.evaluation.baselines import KINDS, software_versions
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.exceptions import EvaluationError
from evokernel.types import Evaluation, Status, Task

log = logging.getLogger(__name__)


def init_ray(config: RayConfig) -> None:
    """Start a local cluster (default) or join ``config.address``; a no-op when Ray is up."""
    if ray.is_initialized():
        return
    # Ray's own uv/runtime-env hooks would try the network on some setups; the driver needs none.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": True,
    }
    if config.address:
        ray.init(address=config.address, **kwargs)
    else:
        ray.init(num_cpus=config.num_cpus, **kwargs)


class BaselineStore(Protocol):
    """Where baselines are cached across runs: :class:`evokernel.db.SolutionLibrary` is one."""

    def get_baseline(
        self, task_hash: str, device: str, versions: str, kind: str, variant: str = ""
    ) -> float | None: ...

    def put_baseline(
        self,
        task_hash: str,
        device: str,
        versions: str,
        kind: str,
        median_ms: float,
        iqr_ms: float = 0.0,
        variant: str = "",
    ) -> None: ...


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
    """Runs sandboxed evaluations on the GPU (or CPU) Ray gave it, one at a time."""

    def __init__(self, device: str) -> None:
        self.device = device

    def hardware(self) -> dict[str, str]:
        versions = software_versions(self.device)
        if self.device != "cuda":
            facts = f"{os.cpu_count()} cores"
            return asdict(
                Hardware("cpu", "CPU (Triton interpreter)", facts, versions, "cpu (Triton interpreter)")
            )
        import torch

        from evokernel.mutators.hardware import device_facts, format_hardware

        p = torch.cuda.get_device_properties(0)
        # The formatted line leads with the name; Hardware.describe() adds it back once.
        facts = format_hardware(device_facts(p)).removeprefix(f"{p.name}: ")
        return asdict(Hardware("cuda", p.name, facts, versions, p.name))

    def evaluate(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return run_sandboxed(request, timeout_s).to_dict()


class EvaluatorPool:
    """``baselines``: optional cache of eager/compile timings (the run's SolutionLibrary), so a
    task's baselines are measured once per device and software versions, not per candidate."""

    def __init__(
        self, config: EvaluationConfig, ray_config: RayConfig, baselines: BaselineStore | None = None
    ) -> None:
        init_ray(ray_config)
        self.config = config
        self.baseline_store = baselines
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if config.device == "auto":
            self.device = "cuda" if gpus > 0 else "cpu"
        elif config.device in ("cpu", "cuda"):
            self.device = config.device
        else:
            raise EvaluationError(f"evaluation.device must be auto, cpu or cuda, not {config.device!r}")
        if self.device == "cuda" and gpus == 0:
            raise EvaluationError(
                "evaluation.device=cuda but the Ray cluster has no GPU; use device=auto or cpu"
            )
        cpus = int(ray.cluster_resources().get("CPU", 1))
        default_workers = gpus if self.device == "cuda" else max(1, min(2, cpus))
        self.size = config.workers or default_workers
        self.scale = (
            config.scale if config.scale != "auto" else ("full" if self.device == "cuda" else "small")
        )
        self._actors = [self._new_actor() for _ in range(self.size)]
        self._load = [0] * self.size
        self._hardware: Hardware | None = None

    def _new_actor(self) -> Any:
        actor_cls: Any = EvaluatorActor  # a Ray ActorClass; mypy sees the plain class
        if self.device == "cuda":
            return actor_cls.options(num_gpus=1, num_cpus=1, max_restarts=0).remote("cuda")
        return actor_cls.options(num_cpus=1, max_restarts=0).remote("cpu")

    async def hardware(self) -> Hardware:
        if self._hardware is None:
            self._hardware = Hardware(**await self._actors[0].hardware.remote())
        return self._hardware

    def request(self, task: Task, source: str, baselines: dict[str, Any] | None = None) -> dict[str, Any]:
        return build_request(
            task,
            source,
            device=self.device,
            scale=self.scale,
            seeds=self.config.seeds,
            timing=self.config.timing,
            evaluation=self.config,
            baselines=baselines,
        )

    async def _cached_baselines(self, task: Task) -> dict[str, Any] | None:
        if self.baseline_store is None:
            return None
        hw = await self.hardware()
        key = {"device": hw.label, "versions": hw.versions}
        out: dict[str, Any] = {"key": key}
        for kind in KINDS:
            median = self.baseline_store.get_baseline(
                task.source_hash, hw.label, hw.versions, kind, self.scale
            )
            out[kind] = {"median_ms": median, "iqr_ms": 0.0, "cv": 0.0, "reps": 0} if median else None
        return out

    def _store_baselines(self, task: Task, evaluation: Evaluation) -> None:
        timing = evaluation.details.get("timing") or {}
        key = timing.get("baseline_key")
        if self.baseline_store is None or not key:
            return
        for kind in KINDS:
            measured = timing.get(kind)
            if measured and not measured.get("cached"):
                self.baseline_store.put_baseline(
                    task.source_hash,
                    key["device"],
                    key["versions"],
                    kind,
                    measured["median_ms"],
                    measured["iqr_ms"],
                    self.scale,
                )

    async def evaluate(self, task: Task, source: str) -> Evaluation:
        """Evaluate on the least-loaded actor; an actor that dies is replaced and the candidate
        retried once elsewhere, then classified ``crashed``."""
        request = self.request(task, source, await self._cached_baselines(task))
        last_error = ""
        for _attempt in range(2):
            index = min(range(self.size), key=self._load.__getitem__)
            actor = self._actors[index]
            self._load[index] += 1
            try:
                data = await actor.evaluate.remote(request, self.config.timeout_s)
                evaluation = Evaluation.from_dict(data)
                self._store_baselines(task, evaluation)
                return evaluation
            except (RayActorError, WorkerCrashedError) as exc:
                last_error = f"evaluator actor died: {type(exc).__name__}"
                log.warning("%s; replacing it", last_error)
                if self._actors[index] is actor:
                    self._actors[index] = self._new_actor()
            finally:
                self._load[index] -= 1
        return Evaluation(status=Status.CRASHED, stage="pool", reason=f"{last_error} (twice)")

    def health(self) -> dict[str, Any]:
        return {"device": self.device, "workers": self.size, "in_flight": sum(self._load)}

    def shutdown(self) -> None:
        for actor in self._actors:
            ray.kill(actor)
        self._actors = []

    async def __aenter__(self) -> EvaluatorPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.sleep(0)
        self.shutdown()
