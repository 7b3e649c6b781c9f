"""The Ray build pool (issue 37): object-cache misses compiled on the cluster's CPU nodes, spread
over them, re-run elsewhere when a build node is lost, given to a node that joins; the failure
verdict cache; the placement rules without Ray.

Real parts: a Ray cluster of several raylets on this machine (``ray.cluster_utils.Cluster``, a
head without CPUs and build nodes of one CPU each), the dispatcher actor and its Ray tasks, the
actor-side build service on a unix socket (served here by the test process, as an evaluator
actor serves it), the supervisor's :class:`ObjectCache` and real g++ builds of tiny
``load_inline(functions=...)`` extensions (pybind11 without torch's header: ~2 s each), confined
as every cached build is. Each test checks the object imports and runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from evokernel.config.loading import from_dict
from evokernel.config.schema import EvaluationConfig, RayConfig, TimingConfig
from evokernel.evaluation import confined_build, landlock, seccomp
from evokernel.evaluation.build_client import BuildJob
from evokernel.evaluation.object_cache import ObjectCache
from evokernel.evaluation.pch import cache_key
from evokernel.evaluation.remote_builds import import_object
from evokernel.exceptions import ConfigError
from evokernel.pool import EvaluatorPool, build_task
from evokernel.pool.active_gate import ActiveGate
from evokernel.pool.build_pool import BuildDispatcher, BuildNode, build_slots, choose
from evokernel.pool.build_service import BuildService
from evokernel.pool.placement import pinned
from evokernel.types import Evaluation, Task
from tests.support.ray_cluster import head_only_cluster

from .test_object_cache import AXPY_C, candidate, report

needs_isolation = pytest.mark.skipif(
    landlock.abi_version() < 1 or not seccomp.available(), reason="this kernel has no Landlock or seccomp"
)
# pybind11 instead of torch/extension.h (no_implicit_headers): a build is ~2 s of g++, not ~25.
SHIM = """#include <pybind11/pybind11.h>
namespace torch { template <class F> F wrap_pybind_function(F f) { return f; } }
"""
# A compile that takes ~4 s of one core (constexpr evaluation), so a node can be lost under it.
SLOW = """constexpr long spin(long n) { long s = 0;
  for (long i = 0; i < n; ++i) for (long j = 0; j < 1000; ++j) s += (i ^ j) % 7; return s; }
static_assert(spin(3000) >= 0, "");
"""


def call(n: int, slow: bool = False) -> dict[str, Any]:
    source = f"{SHIM}{SLOW if slow else ''}int add_{n}(int x) {{ return x + {n}; }}\n"
    flags = ["-fconstexpr-ops-limit=100000000000"] if slow else []
    return {
        "name": f"evk_pool_{n}",
        "cpp_sources": [source],
        "functions": [f"add_{n}"],
        "no_implicit_headers": True,
        "extra_cflags": flags,
    }


def fresh(name: str) -> None:
    """As in a fresh supervisor: torch names a second build of one name in a process ``name_v1``."""
    import torch.utils.cpp_extension as cpp_extension

    cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(name, None)


def answered(cache: ObjectCache, n: int, slow: bool = False, **changed: Any) -> int:
    """Build call ``n`` (with ``changed`` arguments) through ``cache`` and run the module."""
    fresh(f"evk_pool_{n}")
    reply = cache.answer({**call(n, slow), **changed}, time.perf_counter() + 120)
    assert "object" in reply, reply
    assert Path(reply["object"]).is_relative_to(cache.root / "objects")
    result: int = getattr(import_object(reply["name"], reply["object"]), f"add_{n}")(1)
    return result


def until(check: Callable[[], bool], limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "never got there"
        time.sleep(0.01)


# ---- placement, without Ray ----------------------------------------------------------------------
def test_cpu_only_nodes_first_then_the_gpu_nodes_spare_cores() -> None:
    assert build_slots({"CPU": 16}, -1, 2) == (8, False)
    assert build_slots({"CPU": 16, "GPU": 1}, -1, 2) == (6, True)  # 4 kept per GPU
    assert build_slots({"CPU": 4, "GPU": 1}, 4, 2) == (0, True)  # the split benchmark's GPU node
    assert build_slots({"CPU": 0}, -1, 2) == (0, False)
    gpu, a, b = BuildNode("gpu", 4, True), BuildNode("a", 2, False), BuildNode("b", 2, False)
    assert choose([gpu, a, b]) is a
    a.busy = 1
    assert choose([gpu, a, b]) is b
    b.busy = 2
    assert choose([gpu, a, b]) is a  # half full beats full
    a.busy = 2
    assert choose([gpu, a, b]) is gpu  # CPU-only nodes full: the GPU node's spare cores
    gpu.busy = 4
    assert choose([gpu, a, b]) is None
    # A host binding built on a node brings the next build of it there, unless that is a GPU node
    # while a CPU-only node has room.
    a.busy = b.busy = gpu.busy = 0
    assert choose([gpu, a, b], preferred="b") is b
    assert choose([gpu, a, b], preferred="gpu") is a


def test_the_builds_setting_names_its_valid_values() -> None:
    with pytest.raises(ConfigError, match=r"evaluation\.builds='remote' is not one of local, pool"):
        from_dict({"tasks": ["t.py"]}, ["evaluation.builds=remote"])
    with pytest.raises(ConfigError, match=r"needs evaluation\.object_cache=true"):
        from_dict({"tasks": ["t.py"]}, ["evaluation.builds=pool", "evaluation.object_cache=false"])
    with pytest.raises(ConfigError, match=r"evaluation\.builds_ahead=-2 must be -1 \(automatic"):
        from_dict({"tasks": ["t.py"]}, ["evaluation.builds_ahead=-2"])


def test_only_compile_errors_are_remembered() -> None:
    error = "main.cpp:3:1: error: expected ';' before '}' token\nninja: build stopped"
    assert confined_build.deterministic_failure(1, error)
    assert not confined_build.deterministic_failure(1, error + "\nc++: fatal error: Killed signal terminated")
    assert not confined_build.deterministic_failure(1, "ninja: error: loading 'build.ninja': No space left")
    assert not confined_build.deterministic_failure(confined_build.ISOLATION_UNAVAILABLE, error)
    assert confined_build.deterministic_failure(2, 'k.cu(7): error: identifier "foo" is undefined')


# ---- a real cluster ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster_head() -> Iterator[Cluster]:
    """The head (no CPUs: it builds nothing), started once for the module's cluster tests."""
    temp_dir = tempfile.mkdtemp(prefix="evk-bp-", dir="/tmp")  # short: Ray's socket paths
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_TMPDIR", temp_dir)
        env.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        try:
            with head_only_cluster() as made:
                yield made
        finally:
            shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def cluster(cluster_head: Cluster) -> Iterator[Cluster]:
    """The module's head with no build node: each test adds its own, and they go (with the test's
    driver and so its dispatcher) when it ends. The dispatcher counts only alive nodes, and a new
    one per test starts with no builds, so nothing of one test shows in the next one's stats."""
    assert not cluster_head.worker_nodes
    try:
        yield cluster_head
    finally:
        ray.shutdown()
        for node in list(cluster_head.worker_nodes):
            cluster_head.remove_node(node)


class Pool:
    """The dispatcher and an actor's build service, as an evaluator actor holds them."""

    def __init__(self, cluster: Cluster, tmp: Path, kept_cores: int = -1) -> None:
        ray.init(address=cluster.address, include_dashboard=False)
        # On the driver's node, as start_build_pool places it: left to Ray, it could land on the
        # node a test removes, and die with it (seen once under a loaded full suite).
        here = pinned(ray.get_runtime_context().get_node_id())
        dispatcher: Any = BuildDispatcher  # a Ray ActorClass; mypy sees the plain class
        self.dispatcher: Any = dispatcher.options(num_cpus=0, **here).remote(kept_cores, 1)
        self.service = BuildService(
            Path(tempfile.mkdtemp(prefix="evk-bs-", dir="/tmp")) / "b.sock", self.dispatcher
        )
        self.root = tmp / "objects-root"
        self.root.mkdir()

    def cache(self) -> ObjectCache:
        """A supervisor's view: its own ObjectCache on the node's root, builds sent to the pool."""
        return ObjectCache(self.root, "required", [], {"PATH": "/usr/bin:/bin"}, pool=str(self.service.path))

    def stats(self) -> dict[str, Any]:
        got: dict[str, Any] = ray.get(self.dispatcher.stats.remote())
        return got

    def built(self) -> dict[str, int]:
        return {node: s["built"] for node, s in self.stats()["nodes"].items() if s["built"]}

    def close(self) -> None:
        self.service.close()
        shutil.rmtree(self.service.path.parent, ignore_errors=True)


def in_threads(*jobs: Any) -> list[Any]:
    results: list[Any] = [None] * len(jobs)

    def run(i: int) -> None:
        try:
            results[i] = jobs[i]()
        except Exception as exc:  # noqa: BLE001 (the assertion below shows it, with the test's names)
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return results


@needs_isolation
def test_builds_spread_over_the_cpu_nodes_and_keep_off_the_gpu_node(cluster: Cluster, tmp_path: Path) -> None:
    a, b = (str(cluster.add_node(num_cpus=1).node_id) for _ in range(2))
    gpu = str(cluster.add_node(num_cpus=2, num_gpus=1).node_id)  # 1 kept: one spare core
    pool = Pool(cluster, tmp_path, kept_cores=1)
    try:
        # One at a time: always a CPU-only node.
        assert answered(pool.cache(), 1) == 2
        # Four at once, from four supervisors: both CPU nodes build, each object is counted once.
        results = in_threads(*(lambda n=n: answered(pool.cache(), n) for n in range(2, 6)))
        assert results == [3, 4, 5, 6], results
        built = pool.built()
        assert built.get(a, 0) >= 1 and built.get(b, 0) >= 1, built
        assert sum(built.values()) == 5, built
        assert built.get(gpu, 0) <= 1, built  # its one spare slot, only while both others were busy
        # The object came back into the GPU node's cache: the next supervisor hits it.
        again = pool.cache()
        assert answered(again, 3) == 4
        assert again.counts == {"hits": 1}
        # A child of object 1 with the same host binding: built on the pool from the kept main.o.
        child = pool.cache()
        assert answered(child, 1, extra_ldflags=["-Wl,-O1"]) == 2
        assert child.extra.get("host_reused") == 1, child.summary()
        nodes = pool.stats()["nodes"]
        assert all(nodes[n]["cpu_s"] > 0 for n in built), nodes
    finally:
        pool.close()


@needs_isolation
def test_a_build_node_lost_mid_build_has_its_build_run_again_elsewhere(
    cluster: Cluster, tmp_path: Path
) -> None:
    nodes = {str(n.node_id): n for n in (cluster.add_node(num_cpus=1) for _ in range(2))}
    pool = Pool(cluster, tmp_path)
    try:
        cache = pool.cache()
        result = in_threads(lambda: answered(cache, 7, slow=True), lambda: lost(pool, cluster, nodes))
        assert result[0] == 8, result
        victim = result[1]
        stats = pool.stats()
        assert stats["retried"] == 1, stats
        assert stats["nodes"][victim]["built"] == 0 and stats["nodes"][victim]["lost"] == 1, stats
        assert stats["built"] == 1, stats  # counted once, where it finished
        assert cache.counts == {"built": 1}
        assert cache.extra["pool_retried"] == 1
    finally:
        pool.close()


@needs_isolation
def test_a_build_queued_behind_a_held_one_keeps_its_own_seconds(cluster: Cluster, tmp_path: Path) -> None:
    """One build slot: the first build's compiler is stopped for 25 s (as a node's load would
    hold it back), and a second build with 20 s of its own (a build here takes ~8) waits for the
    slot meanwhile. The wait is the pool's doing: it comes out of the evaluation's credit (as a
    local build's holds do, build_clock.py), so the second build is made on the pool, neither
    timed out nor built by its supervisor."""
    cluster.add_node(num_cpus=1)
    pool = Pool(cluster, tmp_path)
    try:
        first, second = pool.cache(), pool.cache()
        first.max_held_s = second.max_held_s = 60.0

        def queued() -> dict[str, Any]:
            until(lambda: bool(ray.get(pool.dispatcher.in_flight.remote())), 60)
            fresh("evk_pool_62")
            return second.answer(call(62), time.perf_counter() + 22.0)  # 20 s for the build itself

        results = in_threads(lambda: answered(first, 61), queued, lambda: stop_compiler("evk_pool_61", 25.0))
        assert results[0] == 62 and results[2] is True, results
        reply = results[1]
        assert isinstance(reply, dict) and "object" in reply, reply
        assert import_object(reply["name"], reply["object"]).add_62(1) == 63
        assert second.counts == {"built": 1} and "pool_fallback" not in second.extra, second.summary()
        # The second's wait (the 25 s less the first build's start) is credited to it, and the
        # stopped compiler's 25 s to the first by the build node's clock.
        assert second.held_s > 20.0, second.summary()
        assert first.held_s > 20.0, first.summary()
    finally:
        pool.close()


def stop_compiler(name: str, seconds: float) -> bool:
    """SIGSTOP the compiler of the build of module ``name`` for ``seconds``, once it runs."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() != "cc1plus":
                    continue
                if name.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
                    continue
                os.kill(int(pid), signal.SIGSTOP)
                try:
                    time.sleep(seconds)
                finally:
                    os.kill(int(pid), signal.SIGCONT)
                return True
        time.sleep(0.01)
    return False


def lost(pool: Pool, cluster: Cluster, nodes: dict[str, Any]) -> str:
    """Remove the node that is building, once its compiler runs; returns its id."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        busy = ray.get(pool.dispatcher.in_flight.remote())
        if busy:
            victim = next(iter(busy))
            time.sleep(2.0)  # into the compile (worker start and torch import take ~1-2 s)
            cluster.remove_node(nodes[victim], allow_graceful=False)
            return victim
        time.sleep(0.1)
    raise AssertionError("no build started")


@needs_isolation
def test_a_node_that_joins_mid_run_gets_builds(cluster: Cluster, tmp_path: Path) -> None:
    first = str(cluster.add_node(num_cpus=1).node_id)
    pool = Pool(cluster, tmp_path)
    try:
        assert answered(pool.cache(), 11) == 12
        joined = str(cluster.add_node(num_cpus=1).node_id)
        time.sleep(1.5)  # the dispatcher reads the node table at most every second
        results = in_threads(*(lambda n=n: answered(pool.cache(), n) for n in (12, 13)))
        assert results == [13, 14], results
        built = pool.built()
        assert built.get(joined, 0) >= 1, built
        assert built.get(first, 0) >= 1, built
    finally:
        pool.close()


@needs_isolation
def test_a_build_node_without_the_precompiled_header_starts_building_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job from a GPU node whose header was ready names it; a CPU-only build node that has none
    starts one header build in the background (killed here: it is ~80 core-seconds)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = build_task.header_base()
    named = BuildJob("k", "x.so", "r", {"build.ninja": f"cflags = -I{base}/0123/O3 -O3\n"}, 60.0)
    plain = BuildJob("k", "x.so", "r", {"build.ninja": "cflags = -O3\n"}, 60.0)
    assert build_task.start_header_build(plain) is None  # the GPU node used no header
    proc = build_task.start_header_build(named)
    assert proc is not None
    try:
        deadline = time.monotonic() + 60
        while not (base / cache_key()).is_dir():  # pch.build makes its root before compiling
            assert proc.poll() is None, "the header build ended before it started compiling"
            assert time.monotonic() < deadline, "the header build never started"
            time.sleep(0.1)
        assert build_task.header_reads() == [str(base / cache_key())]
        assert build_task.start_header_build(named) is None  # under way: not a second one
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def test_without_a_pool_the_supervisor_builds_itself_and_says_why(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    cache = ObjectCache(root, "required", [], {"PATH": "/usr/bin:/bin"}, pool=str(tmp_path / "nobody.sock"))
    assert answered(cache, 21) == 22
    assert cache.counts == {"built": 1}
    assert cache.extra["pool_fallback"] == 1
    assert "no build service" in cache.extra["pool_fallback_reason"]


@needs_isolation
def test_a_child_that_keeps_its_host_binding_does_not_compile_it_again(tmp_path: Path) -> None:
    """A link flag changes the object's key but not main.cpp's: the child links the kept main.o
    (on a GPU the child's .cu changes instead; a CPU extension has main.cpp alone)."""
    parent = ObjectCache(tmp_path, "required", [], {"PATH": "/usr/bin:/bin"})
    assert answered(parent, 41) == 42
    assert len(list((tmp_path / "hosts").glob("*/main.o"))) == 1
    child = ObjectCache(tmp_path, "required", [], {"PATH": "/usr/bin:/bin"})
    assert answered(child, 41, extra_ldflags=["-Wl,-O1"]) == 42
    assert child.counts == {"built": 1} and child.extra == {"host_reused": 1}
    assert child.build_cpu_s < parent.build_cpu_s / 2, (child.build_cpu_s, parent.build_cpu_s)
    # A changed declaration is another binding.
    other = ObjectCache(tmp_path, "required", [], {"PATH": "/usr/bin:/bin"})
    assert answered(other, 41, cpp_sources=[SHIM + "int add_41(int x) { return x + 41; } // v2\n"]) == 42
    assert "host_reused" not in other.extra
    assert len(list((tmp_path / "hosts").glob("*/main.o"))) == 2


@needs_isolation
def test_a_compile_error_is_answered_from_the_cache_the_second_time(tmp_path: Path) -> None:
    broken = {**call(31), "cpp_sources": [SHIM + "int add_31(int x) { return x + }\n"]}
    first = ObjectCache(tmp_path, "required", [], {"PATH": "/usr/bin:/bin"})
    error = first.answer(broken, time.perf_counter() + 120)["error"]
    assert "error: expected" in error and first.build_cpu_s > 0
    second = ObjectCache(tmp_path, "required", [], {"PATH": "/usr/bin:/bin"})
    fresh("evk_pool_31")
    assert second.answer(broken, time.perf_counter() + 120) == {"error": error}
    assert second.counts == {"failed": 1} and second.extra == {"failed_cached": 1}
    assert second.build_cpu_s == 0.0


@needs_isolation
def test_a_build_made_here_steps_out_of_the_gate_and_waits_for_its_place_back(tmp_path: Path) -> None:
    """builds=local: the supervisor's own build leaves the actor's active gate over the build
    service's socket, so another evaluation becomes active while it compiles; when the build ends,
    its evaluation waits for the place back before it goes on."""
    gate = ActiveGate(1)
    service = BuildService(tmp_path / "builds.sock", None, gate)
    root = tmp_path / "root"
    root.mkdir()
    cache = ObjectCache(root, "required", [], {"PATH": "/usr/bin:/bin"}, gate=str(service.path))
    results: dict[str, int] = {}
    second_in, second_go = threading.Event(), threading.Event()

    def first() -> None:
        with gate.evaluation():
            results["first"] = answered(cache, 51, slow=True)

    def second() -> None:
        with gate.evaluation():
            second_in.set()
            second_go.wait(60)

    building = threading.Thread(target=first, daemon=True)
    other = threading.Thread(target=second, daemon=True)
    try:
        building.start()
        until(lambda: gate.stats()["waiting_on_builds"] == 1, 60)
        other.start()
        assert second_in.wait(30), gate.stats()  # active while the first one compiles
        until(lambda: gate.stats()["waiting_on_builds"] == 0, 60)  # its build ended
        time.sleep(0.5)
        assert building.is_alive() and "first" not in results, gate.stats()  # waiting for its place
        second_go.set()
        building.join(60)
        assert results == {"first": 52}
    finally:
        second_go.set()
        service.close()
    assert cache.counts == {"built": 1} and "pool_fallback" not in cache.extra, cache.extra
    assert cache.extra["back_wait_s"] >= 0.5, cache.extra
    assert service.stepped_out == 1 and service.served == 0
    stats = gate.stats()
    assert stats["peak_active"] == 1 and stats["over_limit"] == 0 and stats["active"] == 0, stats


@needs_isolation
@pytest.mark.parametrize("builds", ["pool", "local"])
def test_an_evaluator_actors_builds_step_out_of_its_gate(
    axpy_task: Task, monkeypatch: pytest.MonkeyPatch, builds: str
) -> None:
    """The whole way: pool -> actor -> fork-server -> supervisor -> the actor's build service ->
    dispatcher -> a build task, and the object back into the candidate's import; or, under
    builds=local, the supervisor's own build stepped out of the gate over the same socket."""
    temp_dir = tempfile.mkdtemp(prefix="evk-bp-", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", temp_dir)
    monkeypatch.setenv("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    fast = TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30)
    # One active evaluation, and one more admitted to wait on its build (builds_ahead: automatic
    # under pool; on a CPU device local builds step out only when it is set).
    config = EvaluationConfig(
        device="cpu",
        workers=1,
        timeout_s=120,
        builds=builds,
        timing=fast,
        concurrency_per_worker=1,
        builds_ahead=-1 if builds == "pool" else 1,
    )
    slow = ", extra_cflags=['-fconstexpr-ops-limit=100000000000']"  # each build ~4 s of one core
    # Objects of their own per mode: the node's object cache outlives the test within the session.
    numbers = (7, 8) if builds == "pool" else (9, 10)
    sources = [
        candidate(f"{builds} {n}", SLOW + AXPY_C.replace("3.0f", f"(3.0f + 0.0f * {n})"), slow)
        for n in numbers
    ]
    try:
        pool = EvaluatorPool(config, RayConfig(num_cpus=4))  # one actor's CPU, three build slots
        try:

            async def both() -> list[Evaluation]:
                return list(await asyncio.gather(*(pool.evaluate(axpy_task, s) for s in sources)))

            evaluations = asyncio.run(both())
            stats = asyncio.run(pool.build_stats())
        finally:
            pool.shutdown()
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
    pooled = 1 if builds == "pool" else 0
    for ev in evaluations:
        cache = ev.details.get("object_cache") or {}
        on_pool = sum((cache.get("pool") or {}).values())
        assert cache.get("built") == 1 and on_pool == pooled, (ev.reason, cache)
        assert "pool_fallback" not in cache, cache
        assert report(ev)["object"].endswith(".so")  # the candidate imported the built object
    if builds == "pool":
        assert stats["built"] == 2 and stats["retried"] == 0, stats
    else:
        assert "nodes" not in stats, stats
    # Both builds were waited on at once while one evaluation at most was active on the node: the
    # first stepped out of the actor's gate for its build and let the second start.
    [gate] = stats["gates"]
    assert gate["peak_waiting_on_builds"] == 2 and gate["peak_active"] == 1, gate
    assert gate["over_limit"] == 0 and gate["active"] == 0, gate
