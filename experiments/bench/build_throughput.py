"""Benchmark: distinct CUDA candidates per minute with builds local vs on the Ray build pool (issue 37).

    python3 experiments/bench/build_throughput.py --corpus ../shared/corpora/pike-level3 --builds local,pool
    python3 experiments/bench/build_throughput.py --corpus ../shared/corpora/pike-level3 --split --pin

Question: how many distinct level-3 CUDA kernels (every file of the corpus differs, so no object
can be reused) does one GPU verify and time per minute when its node compiles them itself
(``evaluation.builds=local``) against when the Ray build pool does (``pool``), and how many
core-seconds does one build cost? Goal: >= 20/min on one 16-core node; core-seconds per build
down by a third.

Method: per mode, a cold node object cache (the precompiled header is kept: built once per node,
~50 s), a new ``EvaluatorPool`` whose baselines and header are ready before the clock starts,
then every file at once, 16 in flight (as the issue's 13.6-16.35/min were measured; the pool's own
default is 8 a GPU), timed to the last verdict (corpus_throughput.run_phase). ``--split``
first starts a local Ray cluster of ``ray start`` processes on this machine: one GPU node with
``--node-cpus`` CPUs and ``--build-nodes`` CPU-only nodes with as many each (``--pin``: each
node's processes, and so its builds, on cores of their own with taskset); the GPU node keeps all
its cores (``gpu_node_cores_kept``) so pooled builds land on the CPU nodes only. Per mode:
candidates/min, verdicts, builds made here and on the pool per node (the dispatcher's counts),
core-seconds per build (wait4 of each confined build, wherever it ran), and with ``--pin`` the
busy share of the GPU node's own cores. ``--smoke`` replaces the corpus with three tiny CPU
extensions on the axpy fixture task (a check that the script runs on a machine without a GPU).
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_throughput import language, run_phase, stratified
from field_verdicts import pair_files
from split_cluster import add_split_arguments, busy_share, cluster_from, cpu_lines
from verdict_rows import verdict_row

from evokernel.evaluation.object_cache import default_root

REPO = Path(__file__).resolve().parents[2]
SMOKE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_ext = load_inline("evk_smoke_{n}", cpp_sources=["""
#include <pybind11/pybind11.h>
namespace torch {{ template <class F> F wrap_pybind_function(F f) {{ return f; }} }}
int twice_{n}(int x) {{ return 2 * x + {n} - {n}; }}
"""], functions=["twice_{n}"], no_implicit_headers=True)


class ModelNew(nn.Module):
    def forward(self, x, b):
        assert _ext.twice_{n}(2) == 4
        return 3.0 * x + b
'''


def build_figures(evaluations: list[Any]) -> dict[str, Any]:
    """Builds made by the supervisors (here) and by the pool (per node), and core-seconds each."""
    here = pooled = failed = hits = cached_failures = 0
    cpu_s = held_s = 0.0
    per_node: Counter[str] = Counter()
    for ev in evaluations:
        cache = ev.details.get("object_cache") or {}
        nodes = cache.get("pool") or {}
        per_node.update(nodes)
        pooled += sum(nodes.values())
        here += int(cache.get("built", 0)) - sum(nodes.values())
        failed += int(cache.get("failed", 0))
        hits += int(cache.get("hits", 0))
        cached_failures += int(cache.get("failed_cached", 0))
        cpu_s += float(cache.get("build_cpu_s", 0.0))
        held_s += float(cache.get("build_held_s", 0.0))
    builds = here + pooled + failed - cached_failures
    return {
        "built_here": here,
        "built_on_pool": pooled,
        "pool_per_node": dict(per_node),
        "failed": failed,
        "failed_from_cache": cached_failures,
        "hits": hits,
        "core_s_per_build": round(cpu_s / builds, 2) if builds else None,
        # Seconds the node held the builds made here back (evaluation/build_clock.py).
        "held_s_per_build": round(held_s / builds, 2) if builds else None,
    }


def corpus_files(args: argparse.Namespace) -> list[tuple[str, Any, str]]:
    from evokernel.tasks import load_task

    if args.smoke:
        task = load_task(REPO / "tests" / "fixtures" / "tasks" / "axpy.py")
        return [(f"smoke_{n}", task, SMOKE.format(n=n)) for n in range(1, 4)]
    folders = [args.corpus / "solutions" / f for f in args.folders.split(",")]
    pairs = pair_files(args.corpus / "tasks", folders)
    tasks = {t: load_task(t) for t, _ in pairs}
    every = [(f"{s.parent.name}/{s.name}", tasks[t], s.read_text()) for t, s in pairs]
    cuda = [f for f in every if language(f[2]) == "cuda"]
    return stratified(cuda, args.count)


@contextlib.contextmanager
def gpu_memory_peak() -> Iterator[dict[str, int]]:
    """The GPU's peak memory.used (MiB, nvidia-smi each second) over the body; {} without one."""
    out: dict[str, int] = {}
    if shutil.which("nvidia-smi") is None:
        yield out
        return
    query = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "1000"]
    proc = subprocess.Popen(query, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        yield out
    finally:
        proc.terminate()
        text, _ = proc.communicate(timeout=10)
        used = [int(x) for x in text.split() if x.isdigit()]
        if used:
            out["peak_mib"] = max(used)


def quiet_figures(evaluations: list[Any]) -> dict[str, Any]:
    """What the timing windows cost the node's builds: windows that stopped it and those granted
    over the keeper's duty limit (evaluation/quiet.py); ``timing_lock_busy`` beside it is the
    share of the wall a timing held the GPU exclusively (the builds stopped, unless over duty)."""
    records = [(ev.details.get("gpu_lock") or {}).get("quiet") or {} for ev in evaluations]
    return {
        "windows": sum(int(r.get("windows", 0)) for r in records),
        "over_duty": sum(int(r.get("over_duty", 0)) for r in records),
    }


def parse_mode(spec: str, default_ahead: int) -> tuple[str, int, dict[str, Any]]:
    """``MODE[:AHEAD][/KEY=VALUE[+KEY=VALUE...]]``: the build mode, evaluation.builds_ahead and
    evaluation.timing settings (JSON values), e.g. ``local:-1/quiet_builds=false``."""
    head, _, timing = spec.partition("/")
    mode, _, ahead = head.partition(":")
    settings = {k: json.loads(v) for k, v in (item.split("=", 1) for item in timing.split("+") if item)}
    return mode, int(ahead) if ahead else default_ahead, settings


def run_mode(
    args: argparse.Namespace,
    spec: str,
    mode: str,
    ahead: int,
    timing: dict[str, Any],
    files: list[Any],
    address: str | None,
    pinned: list[int],
) -> Any:
    import torch

    from evokernel.config.schema import EvaluationConfig, RayConfig
    from evokernel.config.timing_config import TimingConfig
    from evokernel.db import SolutionLibrary
    from evokernel.pool import EvaluatorPool

    device = "cuda" if torch.cuda.is_available() else "cpu"
    shutil.rmtree(default_root(), ignore_errors=True)  # cold: every build is a miss
    config = EvaluationConfig(
        device=device,
        timeout_s=args.timeout,
        concurrency_per_worker=args.concurrency,
        compile_baseline="off",
        profile=args.profile,
        builds=mode,
        gpu_node_cores_kept=args.kept,
        builds_ahead=ahead,
        workers=1 if device == "cuda" else 0,
        timing=TimingConfig(**timing),
    )
    with tempfile.TemporaryDirectory() as tmp:
        library = SolutionLibrary(Path(tmp) / "baselines.db")
        ray_config = RayConfig(address=address, num_cpus=None if address else args.ray_cpus)
        pool = EvaluatorPool(config, ray_config, baselines=library)

        async def warm_up() -> tuple[str, list[dict[str, Any]]]:
            hardware = await pool.hardware()
            await pool.prepare(list({id(t): t for _, t, _ in files}.values()))
            return hardware.describe(), await pool.header_caches(wait_s=900)

        hardware, headers = asyncio.run(warm_up())
        print(f"{mode}: {len(files)} files, {pool.concurrency} in flight; headers {headers}", flush=True)
        before = cpu_lines()
        with gpu_memory_peak() as memory:
            done = asyncio.run(run_phase(pool, mode, files, None, args.budget_s))
        after = cpu_lines()
        stats = asyncio.run(pool.build_stats())
        pool.shutdown()
        library.close()
    evaluations = list(done["evaluations"].values())
    if args.stream is not None:  # each verdict's window, lock and build records, for where time went
        tasks = {name: task.name for name, task, _ in files}
        when = {r["solution"]: r["done_at_s"] for r in done["rows"]}
        with args.stream.open("a") as f:
            for name, ev in done["evaluations"].items():
                row = {"mode": spec, **verdict_row(ev, name, tasks[name]), "done_at_s": when.get(name)}
                f.write(json.dumps(row) + "\n")
    figures = {
        **{
            k: done["figures"][k]
            for k in (
                "candidates",
                "cut",
                "wall_s",
                "per_min_per_gpu",
                "steady_per_min",
                "statuses",
                "timing_lock_busy",
            )
        },
        "stage_mean_s": done["figures"]["stage_mean_s"],
        "stage_mean_cpu_s": done["figures"]["stage_mean_cpu_s"],
        "host_cpu_busy": done["figures"]["host_cpu_busy"],
        # How the load_inline calls were built (tensor_cu, light_cu, as written, ...).
        "build_paths": done["figures"]["build_paths"],
        "node_cpu_s_per_candidate": done["figures"]["node_cpu_s_per_candidate"],
        "concurrency": pool.concurrency,
        "builds": build_figures(evaluations),
        "pool": {
            "per_node": {
                node[:12]: {k: s[k] for k in ("gpu", "slots", "built", "failed", "lost", "cpu_s")}
                for node, s in stats.get("nodes", {}).items()
            },
            "retried": stats.get("retried"),
            "unavailable": stats.get("unavailable"),
        }
        if stats.get("nodes") is not None
        else None,
        # Per actor: active and waiting on builds at most (both modes when builds_ahead > 0).
        "gates": stats.get("gates"),
        "gpu_node_cores_busy": busy_share(before, after, pinned) if pinned else None,
        # Builds ahead keep more candidates' processes alive at once: the GPU memory they hold.
        "gpu_memory_peak_mib": memory.get("peak_mib"),
        "timing_settings": timing,
        "quiet": quiet_figures(evaluations),
        # Seconds from the clock's start to each verdict: the rate's course, fill and after.
        "done_at_s": sorted(round(r["done_at_s"]) for r in done["rows"]),
    }
    return hardware, figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, help="a folder with tasks/ and solutions/*/")
    parser.add_argument(
        "--folders", default="orig,openevolve_pop_25_no_agents_300,openevolve_pop_10_no_agents_300"
    )
    parser.add_argument("--count", default="all", help="how many CUDA files (a stratified sample) or all")
    parser.add_argument(
        "--builds",
        default="local,pool",
        help="modes in order, each local or pool, optionally :AHEAD (local:0,local: without and with "
        "builds ahead, side by side) and /KEY=VALUE[+KEY=VALUE] timing settings "
        "(local:-1,local:-1/quiet_builds=false: with and without quiet windows' stopped builds)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=16, help="candidates in flight (0: the pool's default, 8 a GPU)"
    )
    parser.add_argument("--kept", type=int, default=-1, help="evaluation.gpu_node_cores_kept (-1: 4 per GPU)")
    parser.add_argument(
        "--ahead", type=int, default=-1, help="evaluation.builds_ahead (-1: as many as --concurrency)"
    )
    parser.add_argument("--profile", default="kernelbench-v0")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--budget-s", type=float, default=3600.0, help="per mode; later verdicts are cut")
    add_split_arguments(parser)
    parser.add_argument(
        "--ray-cpus", type=int, help="without --split: the local cluster's CPUs (default: the machine's)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="three tiny CPU extensions instead of the corpus"
    )
    parser.add_argument(
        "--stream", type=Path, help="a JSON line per verdict (field_verdicts.py's rows, mode, done_at_s)"
    )
    args = parser.parse_args()
    if not args.smoke and args.corpus is None:
        parser.error("--corpus is required (or --smoke)")
    if args.smoke and args.ray_cpus is None:
        args.ray_cpus = 6  # two CPU actors and room for two pooled builds beside them
    modes = {m.strip(): parse_mode(m.strip(), args.ahead) for m in args.builds.split(",") if m.strip()}
    if not modes or any(mode not in ("local", "pool") for mode, _, _ in modes.values()):
        parser.error("--builds takes local, pool or local,pool, each optionally with :AHEAD and /TIMING")
    files = corpus_files(args)
    results: dict[str, Any] = {"files": len(files), "split": args.split, "pinned": args.pin, "modes": {}}
    print(f"{len(files)} distinct files", flush=True)
    with cluster_from(args) as split:
        address, pinned = split if split else (None, [])
        try:
            for spec, (mode, ahead, timing) in modes.items():
                hardware, figures = run_mode(args, spec, mode, ahead, timing, files, address, pinned)
                results["hardware"] = hardware
                results["modes"][spec] = figures
                print(f"{spec}: {json.dumps(figures)}", flush=True)
                if address is None:
                    import ray

                    ray.shutdown()  # each mode on a fresh local cluster
        except KeyboardInterrupt:
            # Cut by the caller's time limit (timeout -s INT): the modes done stand, this one has
            # no figure; the JSON line below still comes last.
            results["interrupted"] = spec
            print(f"{spec}: interrupted", flush=True)
    if "local" in results["modes"] and "pool" in results["modes"]:
        local, pool = results["modes"]["local"], results["modes"]["pool"]
        results["speedup_per_min"] = round(pool["per_min_per_gpu"] / max(local["per_min_per_gpu"], 1e-9), 2)
    done = [spec for spec in modes if spec in results["modes"]]
    if len(done) > 1:  # each mode's rate over the first's, measured side by side in this run
        first = results["modes"][done[0]]["per_min_per_gpu"]
        results["per_min_vs_first"] = {
            spec: round(results["modes"][spec]["per_min_per_gpu"] / max(first, 1e-9), 2) for spec in done[1:]
        }
        first_steady = results["modes"][done[0]]["steady_per_min"]
        if first_steady:
            results["steady_vs_first"] = {
                spec: round((results["modes"][spec]["steady_per_min"] or 0.0) / first_steady, 2)
                for spec in done[1:]
            }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
