"""Nodes that come and go under a real run: a Ray cluster of several nodes on this machine
(``ray.cluster_utils.Cluster``: a head that runs no actor and worker nodes of one CPU each, each
its own raylet) runs the quickstart (three tasks, ``tune``, PIKE-B, Triton's interpreter) while a
thread removes or adds a node. What is checked is what the library recorded: one evaluation per
candidate, the budget met exactly, which node evaluated what.

Each cluster gets its own Ray temp dir (``RAY_TMPDIR``: ``Cluster`` writes its address there, and
a plain ``ray.init()`` elsewhere on the machine would otherwise join it) and free ports, and is
shut down in a ``finally``."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from evokernel.config import load_config
from evokernel.config.schema import EvaluationConfig, ExperimentConfig, RayConfig
from evokernel.db import SolutionLibrary
from evokernel.pool import EvaluatorPool
from evokernel.pool.placement import NodeRoom, additions
from evokernel.run.progress import ProgressPrinter
from evokernel.run.runner import RunSummary, run_experiment
from tests.support.ray_cluster import head_only_cluster

QUICKSTART = Path(__file__).resolve().parents[2] / "experiments" / "quickstart.yaml"
FAST = [
    "evaluation.timing.warmup_ms=1",
    "evaluation.timing.min_reps=3",
    "evaluation.timing.max_ms=50",
    "evaluation.timeout_s=120",
    "strategy.params.branches=2",
]
# A lost node is declared dead after 3 missed 0.5 s health checks (Ray's default: 5 x 3 s).
WAIT_S = 90.0


# ---- the placement plan (no Ray) ------------------------------------------------------------------
def test_actors_spread_over_nodes_and_follow_them() -> None:
    a, b, head = NodeRoom("a", 4), NodeRoom("b", 4), NodeRoom("head", 0)
    # Automatic: two CPU actors per CPU node (as on one machine), one actor per GPU.
    assert sorted(additions([head, a, b], "cpu", 0, {})) == ["a", "a", "b", "b"]
    assert sorted(additions([a, b], "cuda", 0, {"a": 4})) == ["b"] * 4
    # Fixed size: spread first, never more than fits, and a lost node's share moves elsewhere.
    assert additions([a, b], "cpu", 3, {}) == ["a", "b", "a"]
    assert additions([a], "cpu", 3, {"a": 1}) == ["a", "a"]
    assert additions([NodeRoom("a", 1)], "cpu", 3, {"a": 1}) == []
    # A node that joins fills to its share; a full plan adds nothing.
    assert additions([a, b, NodeRoom("c", 1)], "cpu", 0, {"a": 2, "b": 2}) == ["c"]
    assert additions([a, b], "cpu", 2, {"a": 1, "b": 1}) == []


# ---- a real cluster ---------------------------------------------------------------------------------
@pytest.fixture
def ray_temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # Short: Ray's socket paths live under it and must stay under 107 bytes.
    temp_dir = tempfile.mkdtemp(prefix="evk-rc-", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", temp_dir)
    monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        yield temp_dir
    finally:
        # Ray's last processes may still write a log folder there just after shutdown.
        for _ in range(3):
            shutil.rmtree(temp_dir, ignore_errors=True)
            time.sleep(0.5)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_a_run_told_to_use_n_gpus_gets_n_actors_one_gpu_each(ray_temp_dir: str) -> None:
    """``evaluation.workers=2`` on a machine with three GPUs (fake ones: Ray only counts them; no
    evaluation runs, so no CUDA is needed): two actors, each with a GPU of its own."""
    ray.init(num_cpus=2, num_gpus=3, include_dashboard=False)
    try:
        config = EvaluationConfig(device="cuda", workers=2, warm=False, precompiled_header=False)
        pool = EvaluatorPool(config, RayConfig())
        try:
            labels = ray.get([a.__ray_call__.remote(lambda actor: actor.label) for a in pool.actors])
            gpus = {label.split("@")[0] for label in labels}
            assert len(gpus) == len(labels) == 2 and all(g.startswith("gpu") for g in gpus), labels
            # Each admits as many again as it keeps active: on a GPU a candidate's build uses the
            # node's cores, not its GPU (evaluation.builds_ahead, automatic; pool/active_gate.py).
            assert pool.ahead == pool.concurrency
            assert pool.health()["capacity"] == 2 * (pool.concurrency + pool.ahead)
        finally:
            pool.shutdown()
    finally:
        ray.shutdown()


@pytest.fixture
def cluster(ray_temp_dir: str) -> Iterator[Cluster]:
    with head_only_cluster() as made:
        yield made


def add_node(cluster: Cluster, name: str) -> str:
    """A worker node with one CPU and a resource of its own; returns its node id."""
    return str(cluster.add_node(num_cpus=1, resources={name: 1}).node_id)


def quickstart(tmp_path: Path, budget: int) -> tuple[ExperimentConfig, SolutionLibrary]:
    overrides = [f"library={tmp_path / 'lib.db'}", f"budget.evaluations={budget}", *FAST]
    config = load_config(str(QUICKSTART), overrides)
    return config, SolutionLibrary(config.library)


def run_with(
    cluster: Cluster, tmp_path: Path, budget: int, during: Callable[[EvaluatorPool], None]
) -> tuple[RunSummary, dict[str, Any], Path]:
    """Run the quickstart on ``cluster`` in a thread while ``during(pool)`` runs here (Ray starts
    and stops nodes from the main thread only: it installs signal handlers); returns the run's
    summary, the pool's health at its end, and the library file."""
    ray.init(address=cluster.address, include_dashboard=False)
    config, baselines = quickstart(tmp_path, budget)
    pool = EvaluatorPool(config.evaluation, config.ray, baselines=baselines)
    outcome: list[RunSummary | Exception] = []

    def run() -> None:
        try:
            outcome.append(run_experiment(config, pool=pool, reporter=ProgressPrinter(io.StringIO())))
        except Exception as exc:  # noqa: BLE001 - re-raised in the test's thread below
            outcome.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        during(pool)
    finally:
        runner.join(WAIT_S)
        health = pool.health()
        pool.shutdown()
        baselines.close()
    assert outcome, "the run did not finish"
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0], health, tmp_path / "lib.db"


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def evaluation_rows(db: Path, run_id: str) -> list[tuple[int, str, str, dict[str, object]]]:
    """(candidate id, task, status, details) of every evaluation row of the run."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT e.candidate_id, t.name, e.status, e.details FROM evaluations e "
            "JOIN candidates c ON c.id = e.candidate_id JOIN tasks t ON t.id = c.task_id "
            "WHERE c.run_id = ?",
            (run_id,),
        ).fetchall()
        candidates = conn.execute("SELECT COUNT(*) FROM candidates WHERE run_id = ?", (run_id,)).fetchone()
    assert candidates[0] == len(rows)  # no candidate left without its evaluation
    return [(cid, task, status, json.loads(details)) for cid, task, status, details in rows]


def assert_exact_budget(db: Path, summary: RunSummary, budget: int) -> list[dict[str, object]]:
    rows = evaluation_rows(db, summary.run_id)
    per_candidate = [cid for cid, *_ in rows]
    assert len(per_candidate) == len(set(per_candidate))  # nothing evaluated (counted) twice
    tasks = {task for _, task, _, _ in rows}
    assert tasks == {"softmax", "rmsnorm", "matmul_fp16"}
    lib = SolutionLibrary(db)
    try:
        for task in tasks:
            assert lib.count_evaluated(summary.run_id, task) == budget
            assert sum(1 for _, t, _, _ in rows if t == task) == budget
        assert lib.get_run(summary.run_id).status == "finished"
    finally:
        lib.close()
    assert all(status == "correct" for _, _, status, _ in rows), [(s, d.get("retried")) for *_, s, d in rows]
    assert set(summary.stopped.values()) == {f"budget of {budget} evaluations reached"}
    return [details for *_, details in rows]


@pytest.mark.slow
def test_a_node_lost_and_a_node_added_mid_run_lose_nothing_and_share_the_work(
    cluster: Cluster, tmp_path: Path
) -> None:
    first, second = add_node(cluster, "node_a"), add_node(cluster, "node_b")
    victim = next(n for n in cluster.worker_nodes if n.node_id == second)
    runner_pids: list[int] = []
    added: list[str] = []
    # 8 per task: enough work left after the loss (about 20 interpreter evaluations on the one
    # remaining actor) for the joining node's actor to start and take some. At 4 the run could end
    # before it was up on a loaded 2-core machine (seen once).
    budget = 8

    def lose_a_node_then_add_one(pool: EvaluatorPool) -> None:
        assert sorted(pool.workers.nodes().values()) == [1, 1]  # spread: one actor per node
        slot = next(s for s in pool.workers.slots if s.node_id == second)
        runner_pids.append(ray.get(slot.actor.runner_pids.remote())["forkserver"])
        # Past the baselines (candidates only from here), then mid-evaluation on the second node.
        wait_for(lambda: pool.stats.completed >= 2 and slot.answered, "candidates on both nodes")
        wait_for(lambda: slot.load > 0, "a candidate in flight on the second node")
        time.sleep(0.2)  # inside the actor: an interpreter evaluation takes over a second
        cluster.remove_node(victim, allow_graceful=False)
        wait_for(lambda: pool.workers.lost == 1 and pool.size == 1, "the pool to shrink to one actor")
        assert pool.capacity == pool.concurrency
        added.append(add_node(cluster, "node_c"))
        wait_for(lambda: pool.size == 2, "the joining node's actor")

    summary, health, db = run_with(cluster, tmp_path, budget, lose_a_node_then_add_one)
    details = assert_exact_budget(db, summary, budget)
    nodes = [d["node"] for d in details]
    third = added[0]
    # Every node evaluated candidates: the two it started with, and the one that joined.
    assert {first, second, third} == set(nodes), nodes
    retried = [d for d in details if d.get("retried")]
    assert retried, "the candidate in flight on the lost node was not re-run"
    for d in retried:  # re-run on a node that stayed, and says why
        assert d["node"] == first and d["retried"]["lost_node"] == second  # type: ignore[index]
        assert "ActorDiedError" in str(d["retried"]["after"])  # type: ignore[index]
    assert health["replacements"] == 1 and health["actors_added"] == 1
    assert health["workers"] == health["nodes"] == 2 and health["capacity"] == 2
    with pytest.raises(ProcessLookupError):  # the lost node's runner went with it
        os.kill(runner_pids[0], 0)
