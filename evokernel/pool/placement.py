"""Where the evaluator actors run: one set of actors kept in step with the Ray cluster's nodes.

Ray's node table (``ray.nodes()``: which nodes are alive and what each has) is the source of
truth. Each actor is pinned to a node (``NodeAffinitySchedulingStrategy``, hard), so the pool
knows where every actor is without asking it, and :meth:`ActorSet.refresh` can compare the
actors with the nodes:

* **Automatic size** (``evaluation.workers=0``): one actor per GPU of every node (device cuda),
  or ``min(2, CPUs)`` per node (device cpu, as on a single machine). A node that joins gets its
  actors at the next refresh, without restarting the run.
* **Fixed size** (``workers=N``): N actors spread over the nodes, the node with the fewest first,
  each node holding at most one per GPU (or CPU). An actor lost with its node moves to another
  node with room, else waits for a node to join.

A lost actor (its node died, or it was killed) is dropped at once and :meth:`refresh` starts the
actors the plan is then short of. Refreshes are cheap (one GCS call) and happen at most every
``REFRESH_S`` on the pool's call path, and at once after a loss: a new node gets work within one
evaluation's time, which is what matters for minute-long cluster runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray

log = logging.getLogger(__name__)
# Seconds between node-table reads on the pool's call path (one GCS round trip each).
REFRESH_S = 2.0
# Actors per CPU-only node under the automatic size (the interpreter is CPU-bound: more only contend).
CPU_ACTORS_PER_NODE = 2
# With no actor alive, how often to look for a node that joined.
NO_ACTOR_POLL_S = 1.0


@dataclass(frozen=True)
class NodeRoom:
    """An alive node and how many evaluator actors fit on it (its GPUs, or its CPUs)."""

    node_id: str
    room: int


def alive_nodes(device: str) -> list[NodeRoom]:
    """The cluster's alive nodes, in Ray's order (the head first on a ``Cluster``), with room:
    an actor takes one CPU, and on cuda one GPU too."""
    out = []
    for node in ray.nodes():
        if node.get("Alive"):
            resources = node.get("Resources", {})
            cpus, gpus = int(resources.get("CPU", 0)), int(resources.get("GPU", 0))
            out.append(NodeRoom(node["NodeID"], min(cpus, gpus) if device == "cuda" else cpus))
    return out


def additions(nodes: list[NodeRoom], device: str, workers: int, current: dict[str, int]) -> list[str]:
    """Nodes to start one more actor on each (a node may repeat), given ``current`` actors per node.

    Never moves an existing actor; fills the node with the fewest actors first so actors spread."""
    if workers > 0:
        caps = {n.node_id: n.room for n in nodes}
        limit = workers - sum(current.get(n.node_id, 0) for n in nodes)
    else:
        caps = {n.node_id: n.room if device == "cuda" else min(CPU_ACTORS_PER_NODE, n.room) for n in nodes}
        limit = sum(caps.values())
    counts = {n.node_id: current.get(n.node_id, 0) for n in nodes}
    out: list[str] = []
    while limit > 0:
        open_nodes = [node for node, count in counts.items() if count < caps[node]]
        if not open_nodes:
            break
        node = min(open_nodes, key=counts.__getitem__)  # ties: Ray's order
        counts[node] += 1
        out.append(node)
        limit -= 1
    return out


@dataclass
class Slot:
    """One actor, the node it is pinned to, and the requests it has in flight."""

    actor: Any
    node_id: str
    load: int = 0
    # Set once a call returned: a retry prefers actors known to work over ones still starting.
    answered: bool = False


class ActorSet:
    """The pool's actors. ``start(node_id)`` creates an actor pinned to that node; ``resized(n)``
    hears of every change in the number of actors (the pool sizes its admission queue by it)."""

    def __init__(
        self, start: Callable[[str], Any], device: str, workers: int, resized: Callable[[int], None]
    ) -> None:
        self._start = start
        self._resized = resized
        self.device = device
        self.workers = workers
        self.slots: list[Slot] = []
        self.lost = 0
        self.added_later = 0
        self._refreshed_at = -float("inf")
        self._refreshed_once = False

    def refresh(self, force: bool = False) -> bool:
        """Drop actors whose node left, start those the plan is short of; True if anything changed.
        Reads the node table at most every ``REFRESH_S`` unless ``force``."""
        now = time.monotonic()
        if not force and now - self._refreshed_at < REFRESH_S:
            return False
        self._refreshed_at = now
        try:
            nodes = alive_nodes(self.device)
        except (ray.exceptions.RayError, ConnectionError, TimeoutError) as exc:
            log.warning("could not read Ray's node table (%s); keeping the actors as they are", exc)
            return False
        alive = {n.node_id for n in nodes}
        gone = [s for s in self.slots if s.node_id not in alive]
        for slot in gone:
            self.drop(slot, reason="its node left the cluster")
        current: dict[str, int] = {}
        for slot in self.slots:
            current[slot.node_id] = current.get(slot.node_id, 0) + 1
        started = additions(nodes, self.device, self.workers, current)
        for node_id in started:
            self.slots.append(Slot(self._start(node_id), node_id))
        if started and self._refreshed_once:
            self.added_later += len(started)
            log.warning("started %d evaluator actor(s) on node(s) %s", len(started), _short(started))
        self._refreshed_once = True
        if started:
            self._resized(len(self.slots))
        return bool(gone or started)

    async def slot(self, avoid: str, timeout_s: float) -> Slot | None:
        """An actor to submit to (:meth:`pick`); with none alive (every node lost), wait up to
        ``timeout_s`` for a node to join."""
        self.refresh()
        deadline = time.monotonic() + timeout_s
        while (slot := self.pick(avoid)) is None and time.monotonic() < deadline:
            await asyncio.sleep(NO_ACTOR_POLL_S)
            self.refresh(force=True)
        return slot

    def pick(self, avoid: str = "") -> Slot | None:
        """The least-loaded actor; with ``avoid`` (a node that just lost an actor), one elsewhere
        that has answered before if there is one, so a retry does not wait on a starting actor."""
        if not self.slots:
            return None
        if avoid:
            proven = [s for s in self.slots if s.answered and s.node_id != avoid]
            if proven:
                return min(proven, key=lambda s: s.load)
        return min(self.slots, key=lambda s: s.load)

    def drop(self, slot: Slot, reason: str) -> bool:
        """Forget ``slot``'s actor (and kill it, should it still hold its GPU); False if already gone."""
        if slot not in self.slots:
            return False
        self.slots.remove(slot)
        self.lost += 1
        self._resized(len(self.slots))
        log.warning("evaluator actor on node %s lost: %s", _short([slot.node_id]), reason)
        try:
            ray.kill(slot.actor, no_restart=True)
        except (ray.exceptions.RayError, ValueError) as exc:  # already gone with its node
            log.debug("kill of a lost actor: %s", exc)
        return True

    def nodes(self) -> dict[str, int]:
        """Actors per node id."""
        out: dict[str, int] = {}
        for slot in self.slots:
            out[slot.node_id] = out.get(slot.node_id, 0) + 1
        return out

    def kill_all(self) -> None:
        for slot in self.slots:
            ray.kill(slot.actor)
        self.slots = []


def pinned(node_id: str) -> dict[str, Any]:
    """Actor options that keep it on ``node_id`` (it fails, rather than moves, if the node dies)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


def _short(node_ids: list[str]) -> str:
    return ", ".join(n[:8] for n in node_ids)
