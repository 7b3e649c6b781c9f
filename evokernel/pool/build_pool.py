"""The Ray build pool (issue 37): ``load_inline`` object builds on whichever nodes have cores to
spare, CPU-only nodes first and the GPU nodes' spare cores last.

Enters: build jobs (:class:`~evokernel.evaluation.build_client.BuildJob`) from the evaluator
actors' build services (:mod:`.build_service`), each with the seconds its evaluation has left
and the credit it may spend on the pool's own delays (a slot's wait, a lost node's attempt, the
build node's holds: ``max_held_s``), which the reply's ``held_s`` gives back to the evaluation.
Leaves: a :class:`~evokernel.evaluation.build_client.BuildReply` and a reference to the object's
bytes, which the actor fetches from the build node's object store.

Why one dispatcher actor rather than plain Ray tasks left to Ray's scheduler: Ray's hybrid
policy packs a node to half its CPUs before spreading and keeps CPU tasks off GPU nodes only as
a soft preference, with no notion of cores a GPU node keeps for timing; and the per-node counts
the issue asks for, the retry of a lost node's build elsewhere (a task pinned to a dead node
cannot be retried by Ray) and sending builds of one host binding to one node need one place
that sees every build. So :class:`BuildDispatcher` (no CPU of its own, on the driver's node)
reads Ray's node table (at most every ``REFRESH_S``, and at once after a loss), gives each
alive node ``(CPUs - kept) // cpus_per_build`` build slots (kept: 0 on a CPU-only node,
``evaluation.gpu_node_cores_kept`` on a GPU node), and submits each build as a Ray task with
``num_cpus=cpus_per_build`` pinned to the node it chose (:mod:`.build_task`), so Ray's own
accounting still holds. A node that joins is in the next read: it gets builds within a second
or two. A node lost mid-build fails its task; the build runs again on another node and is
counted once, where it finished (``retried`` counts the re-runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from evokernel.evaluation.build_client import BuildJob, BuildReply

log = logging.getLogger(__name__)
# Seconds between node-table reads (one GCS round trip): a joining node waits at most this.
REFRESH_S = 1.0
# Cores a build is given. One: with the host binding shared (host_binding.py) a build is one nvcc
# of the .cu, a sequence of one-core tools (cicc, ptxas, the host compiler); 16 local builds on an
# H100's 16 cores averaged 0.80 cores each (43.5 core-s over 54.3 s), and two cores a build left
# the pool's 16-core GPU node 6 slots: 45 % of its cores busy and 7.5 candidates/min against 11.7
# with local builds (session 23, 36 level-3 files). A miss of the host binding runs two compiles
# (ninja -j2) on its one slot for ~10 s.
CPUS_PER_BUILD = 1
# Cores a GPU node keeps for its evaluations under the automatic setting, per GPU: one candidate
# in timing and one in correctness, each a supervisor and a worker.
KEPT_PER_GPU = 4
# Host bindings remembered for placement (a few hundred bytes each).
HOST_MEMORY = 4096
# Re-runs of one build after its node was lost, before the supervisor builds it itself.
MAX_RETRIES = 3
# A node whose build was lost gets none for this long, whatever the node table says meanwhile:
# Ray declares a node dead only after its health checks fail (5 x 3 s by default), and a build
# sent there in between is lost again.
LOST_HOLD_S = 30.0


@dataclass
class BuildNode:
    """An alive node of the cluster as the pool uses it, with what it built."""

    node_id: str
    slots: int
    gpu: bool
    busy: int = 0
    alive: bool = True
    built: int = 0
    failed: int = 0
    lost: int = 0
    cpu_s: float = 0.0
    seconds: float = 0.0
    held_until: float = 0.0

    def open(self) -> bool:
        return self.alive and self.busy < self.slots and time.monotonic() >= self.held_until

    def stats(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "slots": self.slots,
            "alive": self.alive,
            "busy": self.busy,
            "built": self.built,
            "failed": self.failed,
            "lost": self.lost,
            "cpu_s": round(self.cpu_s, 2),
            "seconds": round(self.seconds, 2),
        }


def build_slots(
    resources: dict[str, float], kept_cores: int, cpus_per_build: int, evaluators: int = 0
) -> tuple[int, bool]:
    """(build slots, is a GPU node) for a node with these Ray resources and ``evaluators``
    evaluator actors (one Ray CPU each). ``kept_cores`` < 0: :data:`KEPT_PER_GPU` per GPU."""
    cpus, gpus = int(resources.get("CPU", 0)) - evaluators, int(resources.get("GPU", 0))
    if gpus:
        cpus -= kept_cores if kept_cores >= 0 else KEPT_PER_GPU * gpus
    return max(0, cpus // max(1, cpus_per_build)), gpus > 0


def choose(nodes: list[BuildNode], preferred: str = "") -> BuildNode | None:
    """The node for the next build: ``preferred`` (where its host binding was built) when it has
    room and is not a GPU node while a CPU-only node has room; else CPU-only nodes before GPU
    nodes, the least loaded first (ties: fewer builds so far, so work spreads)."""
    candidates = [n for n in nodes if n.open()]
    if not candidates:
        return None
    cpu_only = any(not n.gpu for n in candidates)
    for node in candidates:
        if node.node_id == preferred and not (node.gpu and cpu_only):
            return node
    return min(candidates, key=lambda n: (n.gpu, n.busy / n.slots, n.built + n.failed))


@ray.remote(num_cpus=0)
class BuildDispatcher:
    """Places, runs and re-runs the cluster's pooled builds; :meth:`stats` has per-node figures."""

    def __init__(self, kept_cores: int = -1, cpus_per_build: int = CPUS_PER_BUILD) -> None:
        self.kept_cores, self.cpus_per_build = kept_cores, cpus_per_build
        self.nodes: dict[str, BuildNode] = {}
        self.hosts: OrderedDict[str, str] = OrderedDict()
        self.wrong_toolchain: set[tuple[str, str]] = set()
        self.retried = self.unavailable = self.waiting = 0
        # Evaluator actors per node (the pool says when they change): each holds one Ray CPU, which
        # a build task could then never get (it would wait for it until its deadline).
        self.evaluators: dict[str, int] = {}
        self._refreshed_at = -float("inf")
        self._changed: asyncio.Event | None = None
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._refreshed_at < REFRESH_S:
            return
        self._refreshed_at = now
        try:
            table = ray.nodes()
        except (RayError, ConnectionError, TimeoutError) as exc:
            log.warning("could not read Ray's node table (%s); keeping the build nodes as they are", exc)
            return
        seen = set()
        for entry in table:
            if not entry.get("Alive"):
                continue
            node_id = entry["NodeID"]
            seen.add(node_id)
            resources, evaluators = entry.get("Resources", {}), self.evaluators.get(node_id, 0)
            slots, gpu = build_slots(resources, self.kept_cores, self.cpus_per_build, evaluators)
            node = self.nodes.setdefault(node_id, BuildNode(node_id, slots, gpu))
            node.slots, node.gpu, node.alive = slots, gpu, True
        for node in self.nodes.values():
            node.alive = node.alive and node.node_id in seen
        self._wake()

    def set_evaluators(self, per_node: dict[str, int]) -> None:
        """The evaluator pool's actors per node id, after every change (placement.ActorSet)."""
        self.evaluators = dict(per_node)
        self.refresh(force=True)

    async def build(self, job_json: dict[str, Any]) -> dict[str, Any]:
        """``{"reply": BuildReply, "blob": [ObjectRef] or None}``; never raises."""
        job = BuildJob.from_json(job_json)
        arrived = time.monotonic()
        retried, last_loss = 0, ""
        while True:
            # Waiting for a slot, and a lost node's attempt, are the pool's doing: they use the
            # job's credit, not its own seconds (session 34's split runs: two heavy builds queued
            # behind 32 others timed out at 300 s where builds on the GPU node had reached
            # their verdicts).
            node = await self._slot(job, arrived + job.timeout_s + job.max_held_s)
            held = min(job.max_held_s, time.monotonic() - arrived)
            if node is None:
                self.unavailable += 1
                why = last_loss or "no build node of the cluster has room (or the job's toolchain)"
                return _answer(BuildReply("unavailable", why, retried=retried, held_s=held))
            node.busy += 1
            started = time.monotonic()
            # The build's own seconds from where it starts, and what is left of the credit for
            # the build node's holds of it.
            own_deadline = arrived + job.timeout_s + held
            attempt = dataclasses.replace(
                job, timeout_s=max(0.0, own_deadline - started), max_held_s=job.max_held_s - held
            )
            try:
                reply, blob = await self._run(node, attempt, own_deadline + attempt.max_held_s)
            except RayTaskError as exc:  # evokernel's own code failed there: not the build's fault
                self.unavailable += 1
                why = f"the build task failed: {exc}"[:600]
                return _answer(BuildReply("unavailable", why, node.node_id, held_s=held))
            except RayError as exc:  # the node or its worker died under the build: run it elsewhere
                node.lost += 1
                node.held_until = time.monotonic() + LOST_HOLD_S
                self.retried, retried = self.retried + 1, retried + 1
                last_loss = f"build node {node.node_id[:8]} lost: {type(exc).__name__}"
                log.warning("%s; building again elsewhere", last_loss)
                self._refreshed_at = -float("inf")
                if retried > MAX_RETRIES:
                    self.unavailable += 1
                    return _answer(BuildReply("unavailable", last_loss, retried=retried))
                continue
            except TimeoutError:
                return _answer(
                    BuildReply(
                        "timeout", "the build outlived its evaluation's timeout", node.node_id, held_s=held
                    )
                )
            finally:
                node.busy -= 1
                self._wake()
            if reply.status == "unavailable" and reply.details.get("toolchain"):
                self.wrong_toolchain.add((node.node_id, job.root_key))
                continue
            node.seconds += time.monotonic() - started
            node.cpu_s += reply.cpu_s
            if reply.status == "built":
                node.built += 1
                if job.host_key:
                    self.hosts[job.host_key] = node.node_id
                    self.hosts.move_to_end(job.host_key)
                    while len(self.hosts) > HOST_MEMORY:
                        self.hosts.popitem(last=False)
            elif reply.status == "failed":
                node.failed += 1
            reply = BuildReply(**{**reply.to_json(), "retried": retried, "held_s": held + reply.held_s})
            return _answer(reply, blob if reply.status == "built" else None)

    async def _run(self, node: BuildNode, job: BuildJob, deadline: float) -> tuple[BuildReply, Any]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from evokernel.pool.build_task import build_task

        remote: Any = build_task  # a Ray RemoteFunction; mypy sees the plain function
        meta_ref, blob_ref = remote.options(
            num_cpus=self.cpus_per_build,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        ).remote(job.to_json(), self.cpus_per_build)
        try:
            meta = await asyncio.wait_for(asyncio.wrap_future(meta_ref.future()), deadline - time.monotonic())
        except TimeoutError:
            ray.cancel(meta_ref, force=True)
            raise
        return BuildReply.from_json(meta), blob_ref

    async def _slot(self, job: BuildJob, deadline: float) -> BuildNode | None:
        """A node with a free slot, waiting for one while the cluster has any; None when it has
        none at all, or none frees before ``deadline``."""
        if self._changed is None:
            self._changed = asyncio.Event()
        self.waiting += 1
        try:
            while True:
                self.refresh()
                usable = [
                    n for n in self.nodes.values() if (n.node_id, job.root_key) not in self.wrong_toolchain
                ]
                node = choose(usable, self.hosts.get(job.host_key, ""))
                remaining = deadline - time.monotonic()
                if node is not None or remaining <= 0 or not any(n.alive and n.slots for n in usable):
                    return node
                self._changed.clear()
                # A slot freeing wakes us; a node joining is seen at the next refresh.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), min(remaining, REFRESH_S))
        finally:
            self.waiting -= 1

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def stats(self) -> dict[str, Any]:
        """Per node (by id): slots, builds done, failed, lost mid-build, core-seconds; and totals."""
        self.refresh()
        return {
            "nodes": {node_id: node.stats() for node_id, node in self.nodes.items()},
            "built": sum(n.built for n in self.nodes.values()),
            "retried": self.retried,
            "unavailable": self.unavailable,
            "waiting": self.waiting,
        }

    def in_flight(self) -> dict[str, int]:
        """Builds running now, per node id (for tests and diagnosis)."""
        return {node_id: node.busy for node_id, node in self.nodes.items() if node.busy}


def _answer(reply: BuildReply, blob: Any = None) -> dict[str, Any]:
    # The reference goes inside a list so Ray hands it on instead of resolving it here.
    return {"reply": reply.to_json(), "blob": [blob] if blob is not None else None}


def start_build_pool(kept_cores: int, cpus_per_build: int = CPUS_PER_BUILD) -> Any:
    """The pool's dispatcher, on this (the driver's) node: it lives and dies with the run."""
    from evokernel.pool.placement import pinned

    dispatcher: Any = BuildDispatcher  # a Ray ActorClass; mypy sees the plain class
    here = ray.get_runtime_context().get_node_id()
    return dispatcher.options(max_restarts=0, **pinned(here)).remote(kept_cores, cpus_per_build)
