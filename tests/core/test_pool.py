"""The evaluation pool on a real local Ray cluster: warm runners, several candidates in flight per
actor, faults (a killed actor, a dead fork-server, a hanging candidate), backpressure, dedup and
fairness. One pool (2 CPU actors x 2 candidates) serves the module; the sources are the axpy seed
with small distinct edits, so nothing is deduplicated unless a test means it."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import ray
import torch

from evokernel.config.schema import EvaluationConfig, RayConfig, TimingConfig
from evokernel.evaluation.forkserver import ForkServer
from evokernel.evaluation.gpulock import GpuLock
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import Child, Launch, Launcher, run_sandboxed
from evokernel.pool.evaluator_pool import EvaluatorPool, default_concurrency
from evokernel.pool.fair_queue import FairQueue
from evokernel.types import Evaluation, Status, Task
from tests.core.corpus import FIXTURES, assert_supervised_verdict

FAST = TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30)
TIMEOUT_S = 12.0
SECRET = "sk-evokernel-test-secret"


def variant(task: Task, tag: str, body: str = "") -> str:
    """The seed with ``body`` run at the top of forward and a tag that makes the source unique."""
    assert task.seed_source is not None
    source = task.seed_source.replace("import torch\n", "import os\nimport time\nimport torch\n", 1)
    if body:
        source = source.replace("        n = x.numel()", body + "\n        n = x.numel()", 1)
    return f"{source}\n# {tag}\n"


SLOW = "        time.sleep(0.15)"
HANG = "        while x.numel() > 0:\n            n = x.numel()"
ENV_PROBE = (
    "        if 'OPENAI_API_KEY' in os.environ:\n"
    "            raise RuntimeError('candidate saw OPENAI_API_KEY=' + os.environ['OPENAI_API_KEY'])"
)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=4, include_dashboard=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def pool(local_ray: None) -> Iterator[EvaluatorPool]:
    config = EvaluationConfig(
        device="cpu", timeout_s=TIMEOUT_S, timing=FAST, workers=2, concurrency_per_worker=2, max_queue=8
    )
    evaluator = EvaluatorPool(config, RayConfig())
    yield evaluator
    evaluator.shutdown()


def gather(pool: EvaluatorPool, task: Task, sources: list[str], **kw: object) -> list[Evaluation]:
    async def run() -> list[Evaluation]:
        return list(await asyncio.gather(*(pool.evaluate(task, s, **kw) for s in sources)))  # type: ignore[arg-type]

    return asyncio.run(run())


def stages(ev: Evaluation) -> dict[str, float]:
    return {s["stage"]: s["seconds"] for s in ev.details["stages"]}


def test_default_concurrency_follows_the_actors_cpus() -> None:
    # GPU: one candidate per two CPUs of the actor (a supervisor and a worker each), at most 8.
    assert [default_concurrency("cuda", cpus) for cpus in (1, 2, 5, 16, 64)] == [1, 1, 2, 8, 8]
    assert default_concurrency("cpu", 64) == 1


def test_warm_evaluations_overlap_on_each_actor(pool: EvaluatorPool, axpy_task: Task) -> None:
    before = pool.health()["completed"]
    evs = gather(pool, axpy_task, [variant(axpy_task, f"warm {i}", SLOW) for i in range(6)])
    for ev in evs:
        assert ev.status is Status.CORRECT, ev.reason + ev.feedback
        seconds = stages(ev)
        assert list(seconds)[:3] == ["queue", "start", "static"]
        # Forked from a warm server, not a new interpreter (which takes seconds to import torch).
        assert ev.details["runner"] == "forkserver", ev.details
        assert ev.details["gpu_lock"]["exclusive_s"] > 0  # timing ran under the exclusive lock
        # ... in a quiet window the actor's keeper granted (evaluation/quiet.py)
        quiet = ev.details["gpu_lock"]["quiet"]
        assert quiet["windows"] >= 1 and "unavailable" not in quiet, quiet
    health = pool.health()
    assert health["completed"] == before + 6
    assert health["max_submitted"] == pool.capacity == 4  # two in flight on each of two actors
    assert set(health["stage_mean_s"]) == {"queue", "start", "build", "correctness", "timing"}


def test_identical_sources_are_evaluated_once(pool: EvaluatorPool, axpy_task: Task) -> None:
    before = pool.health()
    source = variant(axpy_task, "dedup")
    first, second = gather(pool, axpy_task, [source, source])
    third = gather(pool, axpy_task, [source])[0]
    after = pool.health()
    assert after["completed"] == before["completed"] + 1  # one sandbox run for three requests
    assert after["deduplicated"] == before["deduplicated"] + 2
    assert [bool(e.details.get("deduplicated")) for e in (first, second, third)] == [False, True, True]
    assert first.runtime_ms == second.runtime_ms == third.runtime_ms


def test_a_harness_fault_is_run_again_alone_and_counted_apart(pool: EvaluatorPool) -> None:
    """The reference itself runs out of memory (the harness's failure): each request is run again
    with nothing else in flight, its first failure kept, and the pool counts harness faults."""
    from evokernel.tasks import load_task
    from tests.core.corpus import FIXTURES

    task = load_task(FIXTURES / "tasks" / "reference_oom.py")
    seed = (FIXTURES / "tasks" / "axpy.seed.py").read_text()
    before = pool.health()["harness_faults"]
    results = gather(pool, task, [seed + f"\n# {i}\n" for i in range(3)])
    for ev in results:
        assert (ev.status.value, ev.stage) == ("crashed", "harness"), ev.reason
        assert "not the candidate's" in ev.details["harness_retry"]["first"]
    assert pool.health()["harness_faults"] == before + 3
    assert pool.queue.capacity == pool.capacity and pool.queue.in_flight == 0


@pytest.mark.slow
def test_killing_an_actor_loses_no_candidate(pool: EvaluatorPool, axpy_task: Task) -> None:
    sources = [variant(axpy_task, f"kill {i}", SLOW) for i in range(6)]
    replaced = pool.health()["replacements"]

    async def run() -> list[Evaluation]:
        jobs = [asyncio.ensure_future(pool.evaluate(axpy_task, s)) for s in sources]
        deadline = time.monotonic() + 60
        while pool.loads[0] < 2 and time.monotonic() < deadline:  # both its slots busy
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # mid-evaluation: past start-up, inside correctness
        victim = pool.actors[0]
        ray.kill(victim)
        return list(await asyncio.gather(*jobs))

    evs = asyncio.run(run())
    assert [e.status for e in evs] == [Status.CORRECT] * 6, [e.reason for e in evs]
    assert pool.health()["replacements"] == replaced + 1


@pytest.mark.slow
def test_a_dead_fork_server_is_replaced(pool: EvaluatorPool, axpy_task: Task) -> None:
    pids = ray.get(pool.actors[1].runner_pids.remote())

    async def run() -> list[Evaluation]:
        jobs = [
            asyncio.ensure_future(pool.evaluate(axpy_task, variant(axpy_task, f"fs {i}", SLOW)))
            for i in range(4)
        ]
        deadline = time.monotonic() + 60
        while pool.loads[1] < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        os.kill(pids["forkserver"], signal.SIGKILL)
        return list(await asyncio.gather(*jobs))

    evs = asyncio.run(run())
    assert [e.status for e in evs] == [Status.CORRECT] * 4, [e.reason for e in evs]
    new = ray.get(pool.actors[1].runner_pids.remote())
    assert new["actor"] == pids["actor"] and new["forkserver"] != pids["forkserver"]
    assert max(e.details.get("runner_restarts", 0) for e in evs) >= 1


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_a_hanging_candidate_is_killed_at_its_timeout_while_others_proceed(
    pool: EvaluatorPool, axpy_task: Task
) -> None:
    servers = [ray.get(a.runner_pids.remote())["forkserver"] for a in pool.actors]
    groups: set[int] = set()

    async def run() -> tuple[Evaluation, list[Evaluation], bool]:
        hang = asyncio.ensure_future(pool.evaluate(axpy_task, variant(axpy_task, "hang", HANG)))
        others = [variant(axpy_task, f"beside the hang {i}") for i in range(3)]  # the free slots
        done = await asyncio.gather(*(pool.evaluate(axpy_task, s) for s in others))
        hang_outlasted_them = not hang.done()
        while not hang.done():  # the hanging supervisor's group: a child of a fork-server
            groups.update(os.getpgid(p) for s in servers for p in _children(s) if _alive(p))
            await asyncio.sleep(0.2)
        return hang.result(), list(done), hang_outlasted_them

    hung, others, hang_outlasted_them = asyncio.run(run())
    assert [e.status for e in others] == [Status.CORRECT] * 3
    assert hang_outlasted_them  # the others were not queued behind the hang
    assert hung.status is Status.TIMEOUT and hung.stage == "correctness", hung.reason
    assert_supervised_verdict(hung)  # killed at its own timeout, not by the outer limit
    assert groups
    for group in groups:  # every process of every group it ran in is gone
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)


def _alive(pid: int) -> bool:
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False


@pytest.mark.slow
def test_the_queue_bound_holds_under_a_burst_of_500(pool: EvaluatorPool, axpy_task: Task) -> None:
    """Static-rule rejections go through the actors too (the rules run there), in milliseconds."""
    sources = [f"import subprocess  # burst {i}\n" for i in range(500)]
    evs = gather(pool, axpy_task, sources, tenant="burst")
    assert len(evs) == 500 and all(e.status is Status.REJECTED for e in evs)
    health = pool.health()
    assert health["max_submitted"] <= pool.capacity
    assert health["max_queued"] <= 8 and health["max_queued"] == 8  # the bound was reached and held
    assert health["in_flight"] == health["queued"] == health["submitted"] == 0


def test_a_flooding_tenant_does_not_starve_another() -> None:
    async def run() -> list[str]:
        queue = FairQueue(capacity=1, bound=1000)
        order: list[str] = []

        async def job(tenant: str, priority: int = 0, label: str = "") -> None:
            await queue.acquire(tenant, priority)
            order.append(label or tenant)
            await asyncio.sleep(0)
            queue.release()

        flood = [asyncio.ensure_future(job("flood")) for _ in range(50)]
        await asyncio.sleep(0)
        light = [asyncio.ensure_future(job("light")) for _ in range(5)]
        fix = asyncio.ensure_future(job("flood", priority=1, label="fix"))
        await asyncio.gather(*flood, *light, fix)
        return order

    order = asyncio.run(run())
    assert len(order) == 56
    # Round robin: each of the light tenant's requests waits for at most one of the flood's.
    light_at = [i for i, who in enumerate(order) if who == "light"]
    assert light_at[-1] <= 12, order[:14]
    # Within the flooding tenant, the fix attempt (priority 1) overtakes the 49 waiting before it.
    assert order.index("fix") <= 3


def test_fork_server_children_never_see_the_drivers_secrets(
    axpy_task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server = ForkServer("cpu", Path(tempfile.gettempdir()))
    try:
        server.wait_ready()
        try:  # what the server was started with (readable here when the tests run as root)
            started_with = Path(f"/proc/{server.process.pid}/environ").read_bytes()
        except PermissionError:
            started_with = b""
        assert SECRET.encode() not in started_with
        source = variant(axpy_task, "env probe", ENV_PROBE)
        request = build_request(axpy_task, source, device="cpu", scale="small", timing=FAST)
        ev = run_sandboxed(request, TIMEOUT_S, launcher=server.spawn)
        assert ev.status is Status.CORRECT, ev.reason + ev.feedback
        assert SECRET not in str(ev.to_dict())
        # The probe works: a candidate that is given the variable does fail visibly.
        leaky = run_sandboxed(request, TIMEOUT_S, launcher=_leaking(server))
        assert leaky.status is Status.RUNTIME_ERROR and SECRET in leaky.reason
    finally:
        server.close()


def _leaking(server: ForkServer) -> Launcher:
    """A launcher that (wrongly) adds the secret to the candidate's environment."""

    def launch(spec: Launch) -> Child:
        return server.spawn(replace(spec, env={**spec.env, "OPENAI_API_KEY": SECRET}))

    return launch


def test_timing_waits_for_running_trials_and_holds_back_new_ones(tmp_path: Path) -> None:
    """Writer preference across lock holders (each GpuLock opens its own files, as a supervisor does)."""
    trial, timing, late_trial = (GpuLock(tmp_path, max_wait_s=30) for _ in range(3))
    order: list[str] = []

    def hold(lock: GpuLock, op: str, label: str, seconds: float) -> None:
        with lock.hold(op):
            order.append(f"{label} in")
            time.sleep(seconds)
            order.append(f"{label} out")

    first = threading.Thread(target=hold, args=(trial, "trial", "trial", 0.5))
    first.start()
    time.sleep(0.1)
    writer = threading.Thread(target=hold, args=(timing, "time", "timing", 0.3))
    writer.start()
    time.sleep(0.1)
    late = threading.Thread(target=hold, args=(late_trial, "trial", "late trial", 0.0))
    late.start()
    for thread in (first, writer, late):
        thread.join()
    assert order == ["trial in", "trial out", "timing in", "timing out", "late trial in", "late trial out"]
    assert timing.waited_s > 0.25 and late_trial.waited_s > 0.5  # both waits are recorded
    assert timing.summary()["exclusive_s"] >= 0.3


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_warm_runners_on_a_gpu_keep_faults_to_their_candidate(local_ray: None, axpy_task: Task) -> None:
    """On the GPU machine: CUDA faults and a hung kernel beside correct Triton and load_inline
    candidates on one actor; the next candidates are fine; the fork-server never holds a context."""
    faults = FIXTURES / "faults"
    # 120 s: a cold load_inline build (nvcc on torch's headers) takes ~60-70 s on the GPU machine.
    config = EvaluationConfig(device="cuda", timeout_s=120, timing=FAST, workers=1, concurrency_per_worker=4)
    gpu_pool = EvaluatorPool(config, RayConfig())
    try:
        sources = [
            (faults / "illegal_memory_access.py").read_text(),
            (faults / "gpu_hang.py").read_text(),
            (FIXTURES / "legit" / "axpy_cuda_load_inline.py").read_text(),
            *(variant(axpy_task, f"gpu {i}") for i in range(3)),
        ]
        evs = gather(gpu_pool, axpy_task, sources)
        assert evs[0].status is Status.RUNTIME_ERROR and "illegal" in evs[0].reason, evs[0].reason
        assert evs[1].status is Status.TIMEOUT, evs[1].reason
        assert [e.status for e in evs[2:]] == [Status.CORRECT] * 4, [e.reason for e in evs[2:]]
        after = gather(gpu_pool, axpy_task, [variant(axpy_task, f"after the faults {i}") for i in range(4)])
        assert [e.status for e in after] == [Status.CORRECT] * 4, [e.reason for e in after]
        assert all(e.details["runner"] == "forkserver" for e in after)
        server = ray.get(gpu_pool.actors[0].runner_pids.remote())["forkserver"]
        if shutil.which("nvidia-smi"):
            query = ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"]
            apps = subprocess.run(query, capture_output=True, text=True, check=True).stdout.split()
            assert str(server) not in apps
    finally:
        gpu_pool.shutdown()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_load_inline_builds_on_a_gpu_take_the_fast_paths(local_ray: None, axpy_task: Task) -> None:
    """On the GPU machine: the actor builds the node's precompiled torch/extension.h in the
    background, lean-layout candidates' main.cpp compile against it, and a torch-free .cu goes
    without torch's header -- or, when it needed something that header brought, as written -- and
    a .cu that includes torch/extension.h and names only tensors is built with the tensor header
    (evaluation/tensor_header.py)."""
    config = EvaluationConfig(device="cuda", timeout_s=150, timing=FAST, workers=1, concurrency_per_worker=2)
    gpu_pool = EvaluatorPool(config, RayConfig())
    try:
        states = asyncio.run(gpu_pool.header_caches(wait_s=400))
        assert [s["state"] for s in states] == ["ready"], states
        legit = FIXTURES / "legit"
        sources = [
            (legit / f"{name}.py").read_text()
            for name in ("axpy_cuda_lean_layout", "axpy_cuda_implicit_header", "axpy_cuda_load_inline")
        ]
        evs = gather(gpu_pool, axpy_task, sources)
        assert [e.status for e in evs] == [Status.CORRECT] * 3, [e.reason for e in evs]
        notes = [next(s["reason"] for s in e.details["stages"] if s["stage"] == "build") for e in evs]
        # Each extension comes from the node's object cache: built now, or by an earlier test's
        # candidate with the same sources on this node.
        cached = re.compile(r"; extensions: 1 (built into it|from the node's object cache)")
        assert all(cached.search(note) for note in notes), notes
        notes = [cached.sub("", note) for note in notes]
        header = "load_inline builds: 1 with the precompiled torch header"
        assert notes == [
            f"{header}, 1 without torch's header in the .cu; evaluated class ModelNew",
            f"{header}, 1 rebuilt as written after failing without it; evaluated class ModelNew",
            f"{header}, 1 with the tensor header for torch's in the .cu; evaluated class ModelNew",
        ]
    finally:
        gpu_pool.shutdown()
