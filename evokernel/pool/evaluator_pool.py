"""``EvaluatorPool``: Ray actors that turn (task, source) into an :class:`Evaluation`.

One actor per GPU (CPU actors on a cluster without GPUs, whose candidates run under Triton's
interpreter), each with ``concurrency_per_worker`` candidates in flight
(:mod:`evokernel.pool.actor`). The same code runs on a laptop's local cluster and on a multi-node
cluster reached by address. The pool knows nothing of islands or strategies.

In front of the actors:

* **Admission** (:mod:`evokernel.pool.fair_queue`): never more than workers x concurrency calls
  submitted to Ray; up to ``max_queue`` more wait, served round robin over tenants (runs) and by
  priority within one (fix attempts first); callers beyond that wait to enter.
* **Deduplication** (:mod:`evokernel.pool.dedup`): identical (task, source, settings) requests
  are evaluated once; a request that arrives while its twin is in flight waits for it, later ones
  get the remembered result (crashes and timeouts are not remembered). Either copy says
  ``details["deduplicated"]``.
* **Baselines** (:mod:`evokernel.pool.baseline_cache`): a task's eager and ``torch.compile`` baselines
  are measured once, by a request of their own before its first candidate, and cached.
* **Faults**: an actor that dies (node lost, killed) is dropped, and every candidate it had in
  flight is retried once on the least-loaded actor elsewhere, then ``crashed`` with the reason;
  a harness fault runs again alone (:mod:`evokernel.pool.solo_retry`).
* **Nodes** (:mod:`evokernel.pool.placement`): actors are pinned to the nodes in Ray's node table and
  follow it: a lost node's actors are replaced where there is room, a node that joins gets actors.

Each evaluation's ``details["stages"]`` starts with ``queue`` (waiting here and for the GPU lock)
and ``start`` (launch until the supervisor runs) before the verifier's own stages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

import ray
from ray.exceptions import RayActorError, WorkerCrashedError

from evokernel.config.schema import EvaluationConfig, RayConfig
from evokernel.evaluation import privileges
from evokernel.evaluation.baselines import compile_enabled
from evokernel.evaluation.profiles import get_profile
from evokernel.evaluation.request import EvaluationRequest
from evokernel.exceptions import EvaluationError
from evokernel.pool.active_gate import builds_ahead
from evokernel.pool.actor import EvaluatorActor, Hardware
from evokernel.pool.baseline_cache import BaselineCache, BaselineStore
from evokernel.pool.build_pool import start_build_pool
from evokernel.pool.dedup import Deduplicator
from evokernel.pool.fair_queue import FairQueue
from evokernel.pool.health import PoolStats
from evokernel.pool.placement import ActorSet, additions, alive_nodes, pinned
from evokernel.pool.ray_cluster import default_concurrency, init_ray
from evokernel.pool.solo_retry import SoloRetry
from evokernel.types import Evaluation, Status, Task, source_hash

__all__ = ["BaselineStore", "EvaluatorPool", "Hardware", "default_concurrency", "init_ray"]

log = logging.getLogger(__name__)
# Seconds an actor gets to stop its fork-server and remove its scratch root before it is killed.
SHUTDOWN_GRACE_S = 10.0
BASELINES_TENANT = "baselines"


class EvaluatorPool:
    """``baselines``: optional cache of eager/compile timings (the run's SolutionLibrary), so a
    task's baselines are measured once per device and software versions, not per candidate."""

    def __init__(
        self, config: EvaluationConfig, ray_config: RayConfig, baselines: BaselineStore | None = None
    ) -> None:
        # The driver holds the LLM keys: a same-user candidate on this node may not read its
        # /proc files (evaluation/privileges.py); Ray's processes start without them (environment.py).
        privileges.make_nondumpable()
        init_ray(ray_config)
        self.config = config
        resources = ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        if config.device == "auto":
            self.device = "cuda" if self.gpus > 0 else "cpu"
        elif config.device in ("cpu", "cuda"):
            self.device = config.device
        else:
            raise EvaluationError(f"evaluation.device must be auto, cpu or cuda, not {config.device!r}")
        if self.device == "cuda" and self.gpus == 0:
            raise EvaluationError(
                "evaluation.device=cuda but the Ray cluster has no GPU; use device=auto or cpu"
            )
        if config.concurrency_per_worker < 0 or config.max_queue < 0:
            raise EvaluationError(
                "evaluation.concurrency_per_worker and evaluation.max_queue must be >= 0 (0: automatic)"
            )
        cpus = int(resources.get("CPU", 1))
        planned = len(additions(alive_nodes(self.device), self.device, config.workers, {}))
        if planned == 0:
            raise EvaluationError(f"no node of the Ray cluster has a free {self.device} for an evaluator")
        if config.workers > planned:
            log.warning("evaluation.workers=%d but the cluster has room for %d", config.workers, planned)
        automatic = default_concurrency(self.device, cpus // planned)
        self.concurrency = config.concurrency_per_worker or automatic
        # A load_inline build gets the actor's share of the CPUs, split among its candidates.
        self.build_jobs = max(1, cpus // planned // self.concurrency)
        self.scale = (
            config.scale if config.scale != "auto" else ("full" if self.device == "cuda" else "small")
        )
        # evaluation.builds=pool: one dispatcher for the cluster's builds (pool/build_pool.py);
        # each actor admits `ahead` more evaluations than it keeps active (pool/active_gate.py).
        self.build_pool: Any = None
        if config.builds == "pool" and config.object_cache:
            self.build_pool = start_build_pool(config.gpu_node_cores_kept)
        self.ahead = builds_ahead(config, self.device, self.concurrency)
        capacity = planned * (self.concurrency + self.ahead)
        self.queue = FairQueue(capacity, config.max_queue or 4 * capacity)
        # Retries after a harness fault run one at a time, alone (_retry_alone).
        self._solo = SoloRetry(self.queue)
        self.stats = PoolStats()
        self.size = self.capacity = 0
        self.workers = ActorSet(self._new_actor, self.device, config.workers, self._resized)
        self.workers.refresh(force=True)
        self.max_submitted = 0
        self._hardware: Hardware | None = None
        self._dedup = Deduplicator(self.stats)
        self.baselines = BaselineCache(
            baselines,
            scale=self.scale,
            compile_on=compile_enabled(config.compile_baseline, self.device),
            hardware=self.hardware,
            measure=self._measure_baselines,
            profiling=config.profiling if self.device == "cuda" else "none",  # a CPU profiles nothing
        )

    # Actor handles, the requests each has in flight, its size: read them; the pool changes them.
    @property
    def actors(self) -> list[Any]:
        return [slot.actor for slot in self.workers.slots]

    @property
    def loads(self) -> list[int]:
        return [slot.load for slot in self.workers.slots]

    def _resized(self, actors: int) -> None:  # a node came or went, or an actor died
        self.size, self.capacity = actors, actors * (self.concurrency + self.ahead)
        self.queue.resize(self.capacity)
        if self.build_pool is not None:  # its actors' CPUs are no build's (pool/build_pool.py)
            self.build_pool.set_evaluators.remote(self.workers.nodes())

    def _new_actor(self, node_id: str) -> Any:
        actor_cls: Any = EvaluatorActor  # a Ray ActorClass; mypy sees the plain class
        # +2 threads: hardware() and diagnostics are answered while evaluations run.
        options: dict[str, Any] = {
            "num_cpus": 1,
            "max_restarts": 0,
            "max_concurrency": self.concurrency + self.ahead + 2,
            **pinned(node_id),
        }
        if self.device == "cuda":
            options["num_gpus"] = 1
        # The precompiled header pays off for CUDA load_inline builds; on a CPU node it would cost
        # ~50 s of two cores at start (46.6 s on the H100 node) for candidates that rarely build C++.
        headers = self.config.precompiled_header and self.device == "cuda"
        return actor_cls.options(**options).remote(
            self.device,
            self.build_jobs,
            self.config.warm,
            headers,
            self.config.isolation,
            self.config.object_cache,
            self.build_pool,
            self.concurrency if self.ahead else 0,
        )

    async def hardware(self) -> Hardware:
        if self._hardware is None:
            slot = await self.workers.slot("", self.config.timeout_s)
            if slot is None:
                raise EvaluationError("no evaluator actor is alive to describe the hardware")
            keyed_by = (self.config.timing.call_start, get_profile(self.config.profile).training)
            self._hardware = Hardware(**await slot.actor.hardware.remote(*keyed_by))
        return self._hardware

    def request(self, task: Task, source: str, baselines: dict[str, Any] | None = None) -> EvaluationRequest:
        return EvaluationRequest.build(
            task,
            source,
            device=self.device,
            scale=self.scale,
            seeds=self.config.seeds,
            timing=self.config.timing,
            evaluation=self.config,
            baselines=baselines,
        )

    # ---- the public call --------------------------------------------------------------------------
    async def evaluate(
        self, task: Task, source: str, *, tenant: str = "default", priority: int = 0
    ) -> Evaluation:
        """Evaluate ``source`` for ``task``; ``tenant`` (a run id) and ``priority`` (higher first)
        order the wait when the pool is full."""
        if not self.config.dedup:
            return await self._evaluate_new(task, source, tenant, priority)
        key = self._dedup_key(task, source)
        return await self._dedup.evaluate(key, lambda: self._evaluate_new(task, source, tenant, priority))

    async def confirm(
        self,
        task: Task,
        source: str,
        incumbent_source: str | None,
        *,
        tenant: str = "default",
        priority: int = 0,
    ) -> Evaluation:
        """A confirmation (run/confirm.py): ``source`` evaluated again, its timing window shared
        with ``incumbent_source`` when given (evaluation/confirmation.py). Never deduplicated: its
        point is a fresh measurement."""
        return await self._evaluate_new(task, source, tenant, priority, incumbent_source)

    def _dedup_key(self, task: Task, source: str) -> str:
        # The rest of a request (variants, seeds, timing, device) follows from the task's source and
        # the pool's settings, which are fixed for its life: no need to build one per call.
        return f"{task.source_hash}:{source_hash(source)}"

    async def _evaluate_new(
        self, task: Task, source: str, tenant: str, priority: int, incumbent_source: str | None = None
    ) -> Evaluation:
        arrived = time.monotonic()
        await self.baselines.ensure(task)
        await self.queue.acquire(tenant, priority)
        queued_s = time.monotonic() - arrived
        try:
            request = self.request(task, source, self.known_baselines(task))
            if incumbent_source is not None:
                request = dataclasses.replace(request, incumbent_source=incumbent_source)
            evaluation = await self._submit(request)
            if evaluation.details.get("harness_fault"):
                evaluation = await self._retry_alone(request, evaluation)
        finally:
            self.queue.release()
        evaluation = _with_queue_and_start(evaluation, queued_s)
        self.baselines.store(task, evaluation)
        self.stats.record(evaluation)
        return evaluation

    async def _retry_alone(self, request: EvaluationRequest, first: Evaluation) -> Evaluation:
        """After the harness itself failed: again, alone on the pool (:mod:`evokernel.pool.solo_retry`)."""
        self.stats.harness_faults += 1
        return await self._solo.run(lambda: self._submit(request), lambda: self.capacity, first)

    async def _submit(self, request: EvaluationRequest) -> Evaluation:
        """On the least-loaded actor; when an actor dies (its node lost, or killed) every request it
        had in flight is retried once on the least-loaded actor of another node if there is one,
        then ``crashed``. A retried evaluation says so in ``details["retried"]``."""
        last_error, lost_node = "", ""
        for _attempt in range(2):
            slot = await self.workers.slot(lost_node, self.config.timeout_s)
            if slot is None:
                reason = f"no evaluator actor alive for {self.config.timeout_s:.0f} s"
                return Evaluation(status=Status.CRASHED, stage="pool", reason=reason)
            slot.load += 1
            self.max_submitted = max(self.max_submitted, sum(self.loads))
            try:
                data = await slot.actor.evaluate.remote(request)
            except (RayActorError, WorkerCrashedError) as exc:
                last_error, lost_node = f"evaluator actor died: {type(exc).__name__}", slot.node_id
                self.workers.drop(slot, reason=last_error)
                self.workers.refresh(force=True)  # its replacement, if its node is still there
                continue
            finally:
                slot.load -= 1
            slot.answered = True
            self.workers.refresh()
            evaluation = Evaluation.from_dict(data)
            if last_error:
                retried = {"after": last_error, "lost_node": lost_node}
                details = {**evaluation.details, "retried": retried}
                evaluation = dataclasses.replace(evaluation, details=details)
            return evaluation
        return Evaluation(status=Status.CRASHED, stage="pool", reason=f"{last_error} (twice)")

    # ---- baselines --------------------------------------------------------------------------------
    async def prepare(self, tasks: list[Task]) -> None:
        """Measure (or look up) the tasks' baselines now rather than before their first candidates."""
        await asyncio.gather(*(self.baselines.ensure(task) for task in tasks))

    async def header_caches(self, wait_s: float = 0.0) -> list[dict[str, Any]]:
        """Each actor's precompiled-header state (evaluation/pch.py), after waiting up to
        ``wait_s`` for the builds; a benchmark waits so that it measures the steady state."""
        return list(await asyncio.gather(*(a.header_cache.remote(wait_s) for a in self.actors)))

    async def build_stats(self) -> dict[str, Any]:
        """The build pool's figures (per node: slots, builds, failures, lost, core-seconds; per
        actor: its gate, pool/active_gate.py); under ``evaluation.builds=local`` the gates alone,
        or ``{}`` when its actors keep all they admit active."""
        if self.build_pool is None and not self.ahead:
            return {}
        stats: dict[str, Any] = {}
        if self.build_pool is not None:
            stats = await self.build_pool.stats.remote()
        # Per actor: how many were active, and waiting on their pooled builds, at most.
        stats["gates"] = list(await asyncio.gather(*(a.gate_stats.remote() for a in self.actors)))
        return stats

    def known_baselines(self, task: Task) -> dict[str, Any] | None:
        """The baselines entry requests of ``task`` carry (None until measured or looked up)."""
        return self.baselines.known(task)

    async def _measure_baselines(self, task: Task, cached: dict[str, Any] | None) -> Evaluation:
        request = self.request(task, "", cached).for_baselines()
        await self.queue.acquire(BASELINES_TENANT, priority=1)
        try:
            return await self._submit(request)
        finally:
            self.queue.release()

    # ---- health and lifetime ----------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "gpus": self.gpus,
            "workers": self.size,
            "nodes": len(self.workers.nodes()),
            # Actors lost (their node left, or they died) and actors started on nodes that joined.
            "replacements": self.workers.lost,
            "actors_added": self.workers.added_later,
            "concurrency_per_worker": self.concurrency,
            "builds_ahead": self.ahead,
            "capacity": self.capacity,
            "in_flight": self.queue.in_flight,
            "submitted": sum(self.loads),
            "queued": self.queue.waiting,
            "max_submitted": self.max_submitted,
            "max_queued": self.queue.max_waiting,
            **self.stats.snapshot(),
        }

    def shutdown(self) -> None:
        # A graceful stop first, so each actor removes its scratch root and fork-server; an actor
        # that does not answer within the grace is killed, and the next actor on its node sweeps
        # what it left (evaluation/scratch.py).
        if not ray.is_initialized():
            # Ray is already down (an interrupt reached ray.init or Ray's own handlers): its actors
            # died with it, and any Ray call here would start a new local cluster and wait on it.
            return
        stops = [actor.shutdown.remote() for actor in self.actors]
        if stops:
            _done, pending = ray.wait(stops, num_returns=len(stops), timeout=SHUTDOWN_GRACE_S)
            if pending:
                log.warning("%d evaluator actors did not stop in %.0f s", len(pending), SHUTDOWN_GRACE_S)
        self.workers.kill_all()
        if self.build_pool is not None:
            ray.kill(self.build_pool)
            self.build_pool = None

    async def __aenter__(self) -> EvaluatorPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.sleep(0)
        self.shutdown()


def _with_queue_and_start(evaluation: Evaluation, queued_s: float) -> Evaluation:
    """Prepend ``queue`` (the pool's queue plus the supervisor's GPU lock waits) and ``start``."""
    details = dict(evaluation.details)
    lock_wait = float((details.get("gpu_lock") or {}).get("wait_s", 0.0))
    entries = [
        {"stage": "queue", "status": "passed", "reason": "", "seconds": round(queued_s + lock_wait, 4)}
    ]
    if "start_s" in details:
        entries.append({"stage": "start", "status": "passed", "reason": "", "seconds": details["start_s"]})
    details["stages"] = entries + list(details.get("stages", []))
    return dataclasses.replace(evaluation, details=details)
