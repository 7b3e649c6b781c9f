"""Benchmark: evaluation throughput on real LLM-written level-3 kernels (issue 23), before and after.

    python3 experiments/bench/corpus_throughput.py --corpus CORPUS \\
        --phase before:8:off:18 --phase after:16:on:all --verdicts $OUT/verdicts.jsonl

Question: how many real kernels (``../shared/corpora/pike-level3/``: 30 level-3 tasks x three
published PIKE searches, every file distinct, so no cache can help) does one GPU's pool verify and
time per minute, where does each candidate's time go, and how busy is the GPU meanwhile? Goal:
>= 20 candidates/min/GPU on the CUDA sets (15 at the very least), >= 40 on Triton ones.

Method: one local Ray cluster, one SQLite baseline library shared by every phase; each phase is a
new ``EvaluatorPool`` (one actor) whose baselines are measured and precompiled header built before
its clock starts (``pool.prepare``, ``header_caches``), then its files are submitted at once and
timed to the last verdict. A phase is ``NAME:CONCURRENCY:LIGHT:COUNT[:OPTIONS]``: candidates in flight,
``evaluation.light_cuda_headers`` (``on``/``off``: torch/types.h for torch/extension.h in a
``.cu``; evaluation/inline_builds.py) and how many files (a stratified sample: every k-th of the
folders in order, or ``all``); OPTIONS, comma-separated: ``child`` (each file with a comment line
added: a search's child that keeps its parent's kernels, so its extensions come from the node's
object cache that an earlier phase filled) and ``nocache`` (``evaluation.object_cache`` off: every
build in the worker, as before session 13). The object cache is emptied at the start unless
``--keep-object-cache``. Phases run one after the other, in the order given, with the
same verdict profile (``--profile``, default kernelbench-v0, the field's). Per phase: candidates/min,
verdicts, mean seconds and core-seconds per stage (evaluation/cpu_usage.py), core-seconds per
candidate of the supervised stages and of the whole node, the load_inline build paths taken
(from each build stage's note),
the exclusive timing lock's share of the wall time, NVML's GPU utilization (the share of time a
kernel ran: the GPU-busy figure) and the host CPUs' busy share (/proc/stat). Phases after the
first also give their figures over the first phase's files, for a side-by-side per-stage
comparison. ``--verdicts`` streams every verdict as a
JSON line (the per-file table issue 18 asks for). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from eval_throughput import NvmlSampler, breakdown, statuses
from field_verdicts import pair_files, summarise, table

from evokernel.evaluation.cpu_usage import CLOCK_TICKS
from evokernel.evaluation.inline_builds import NOTES
from evokernel.evaluation.object_cache import default_root

CHILD_LINE = "\n# child: the Python around the kernels changed, the kernels did not\n"


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all host CPUs since boot (Linux /proc/stat); (0, 0) elsewhere."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def supervised_cpu_s(evaluations: list[Any]) -> float | None:
    """Mean over candidates of the core-seconds of every stage the supervisor recorded."""
    if not evaluations:
        return None
    per = [sum(float(e.get("cpu_s", 0.0)) for e in ev.details.get("stages", [])) for ev in evaluations]
    return round(statistics.fmean(per), 2)


def language(source: str) -> str:
    return "cuda" if "load_inline" in source else "triton" if "triton" in source else "torch"


def stratified(items: list[Any], count: str) -> list[Any]:
    if count == "all" or int(count) >= len(items):
        return items
    step = len(items) / int(count)
    return [items[int(i * step)] for i in range(int(count))]


def build_paths(evaluations: list[Any]) -> dict[str, int]:
    """How many load_inline builds took each path, read from the build stages' notes."""
    out: Counter[str] = Counter()
    for ev in evaluations:
        for stage in ev.details.get("stages", []):
            if stage.get("stage") != "build":
                continue
            for key, text in NOTES:
                match = re.search(rf"(\d+) {re.escape(text)}", str(stage.get("reason", "")))
                if match:
                    out[key] += int(match.group(1))
    return dict(out)


def row(phase: str, name: str, task: str, ev: Any, done_at: float) -> dict[str, Any]:
    return {
        "phase": phase,
        "solution": name,
        "task": task,
        "profile": ev.profile,
        "status": ev.status.value,
        "stage": ev.stage,
        "reason": ev.reason[:600],
        "speedup_eager": ev.speedup_eager,
        "runtime_ms": ev.runtime_ms,
        "max_abs_error": ev.max_abs_error,
        "stages": {s["stage"]: round(float(s.get("seconds", 0.0)), 2) for s in ev.details.get("stages", [])},
        "done_at_s": done_at,
    }


def stream_throughput(rows: list[dict[str, Any]], fill: int) -> dict[str, Any] | None:
    """Verdicts per minute of a ``field_verdicts.py --stream`` file, whose rows carry when each
    ended (``ended_at``) and how long since it was submitted (``duration_s``): the run's start is
    taken as its first submission and its end as its last verdict (a cut run's stream has no
    other), so pool start-up is left out; ``fill`` as in :func:`steady_per_min`."""
    timed = [r for r in rows if r.get("ended_at") is not None and r.get("duration_s") is not None]
    if not timed:
        return None
    start = min(r["ended_at"] - r["duration_s"] for r in timed)
    done = [r["ended_at"] - start for r in timed]
    wall = max(done)
    return {
        "verdicts": len(timed),
        "wall_s": round(wall, 1),
        "per_min": round(len(timed) / wall * 60, 2) if wall > 0 else None,
        "steady_per_min": steady_per_min(done, wall, fill),
    }


def steady_per_min(done_at_s: list[float], wall_s: float, fill: int) -> float | None:
    """Verdicts per minute once the pipeline is full: those after the first ``fill`` (the pool's
    active candidates in flight), over the time from the ``fill``-th verdict to the end. A cold run's
    first verdicts wait for the first builds (~60 s on a 16-core H200 node), which a budget of a
    few minutes counts at full weight in ``per_min_per_gpu``; None without a verdict after the fill."""
    ordered = sorted(done_at_s)
    fill = min(fill, len(ordered) // 2)
    if fill < 1 or len(ordered) <= fill or wall_s <= ordered[fill - 1]:
        return None
    return round((len(ordered) - fill) / (wall_s - ordered[fill - 1]) * 60, 2)


async def run_phase(
    pool: Any, phase: str, files: list[tuple[str, Any, str]], verdicts: Path | None, budget_s: float
) -> dict[str, Any]:
    """Every file through the pool at once; past ``budget_s`` the rest are cancelled and the
    figures are those of the verdicts in (``cut``: how many were not)."""
    rows: list[dict[str, Any]] = []
    with NvmlSampler() as nvml:
        start, cpu_start = time.monotonic(), cpu_times()

        async def one(name: str, task: Any, source: str) -> Any:
            ev = await pool.evaluate(task, source)
            rows.append(row(phase, name, task.name, ev, round(time.monotonic() - start, 2)))
            print(
                f"[{phase} {len(rows)}/{len(files)}] {name}: {ev.status.value} {ev.reason[:100]}", flush=True
            )
            if verdicts is not None:
                with verdicts.open("a") as f:
                    f.write(json.dumps(rows[-1]) + "\n")
            return ev

        jobs = {asyncio.ensure_future(one(n, t, s)): n for n, t, s in files}
        _, pending = await asyncio.wait(jobs, timeout=budget_s)
        wall = time.monotonic() - start
        cpu_end = cpu_times()
        for job in pending:
            job.cancel()
    done = {jobs[job]: job.result() for job in jobs if job not in pending}
    evaluations = list(done.values())
    active = pool.concurrency * max(1, pool.size)  # candidates active at once: the pipeline's fill
    exclusive = sum(float((ev.details.get("gpu_lock") or {}).get("exclusive_s", 0.0)) for ev in evaluations)
    assert not any(ev.details.get("deduplicated") for ev in evaluations), "a candidate was deduplicated"
    return {
        "figures": {
            "candidates": len(evaluations),
            "cut": len(pending),
            "wall_s": round(wall, 1),
            "per_min_per_gpu": round(len(evaluations) / wall * 60, 2),
            "steady_per_min": steady_per_min([r["done_at_s"] for r in rows], wall, active),
            "statuses": statuses(evaluations),
            "stage_mean_s": breakdown(evaluations),
            "stage_mean_cpu_s": breakdown(evaluations, "cpu_s"),
            # Every stage the supervisor recorded (profiling and feedback too), per candidate,
            # beside what the whole node spent per candidate: the difference is start-up, the
            # actor, Ray and whatever else ran.
            "supervisor_cpu_s_per_candidate": supervised_cpu_s(evaluations),
            "node_cpu_s_per_candidate": round((cpu_end[0] - cpu_start[0]) / CLOCK_TICKS / len(evaluations), 2)
            if evaluations
            else None,
            "build_paths": build_paths(evaluations),
            "timing_lock_busy": round(exclusive / wall, 3),
            "nvml_utilization": nvml.mean(),
            "host_cpu_busy": round((cpu_end[0] - cpu_start[0]) / max(1, cpu_end[1] - cpu_start[1]), 3),
        },
        "evaluations": done,
        "rows": rows,
    }


def object_cache_figures(evaluations: Any) -> dict[str, Any]:
    """What the node's object cache did (evaluation/object_cache.py), summed over the phase."""
    total: Counter[str] = Counter()
    build_s = 0.0
    for ev in evaluations:
        cache = ev.details.get("object_cache") or {}
        build_s += float(cache.get("build_s", 0.0))
        total.update({k: v for k, v in cache.items() if isinstance(v, int)})
    return {**dict(total), "build_s": round(build_s, 1)}


def stage_means_over(evaluations: dict[str, Any], names: list[str]) -> dict[str, float | None]:
    return breakdown([evaluations[n] for n in names if n in evaluations])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, required=True, help="a folder with tasks/ and solutions/*/")
    parser.add_argument(
        "--folders", default="orig,openevolve_pop_25_no_agents_300,openevolve_pop_10_no_agents_300"
    )
    parser.add_argument(
        "--phase", action="append", required=True, help="NAME:CONCURRENCY:LIGHT(on|off):COUNT|all"
    )
    parser.add_argument("--profile", default="kernelbench-v0")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument(
        "--budget-s", type=float, default=1e9, help="stop the run's phases after this many seconds in all"
    )
    parser.add_argument("--verdicts", type=Path, help="append every verdict here as it comes (JSON lines)")
    parser.add_argument(
        "--keep-object-cache", action="store_true", help="start from the node's object cache as it is"
    )
    args = parser.parse_args()

    import torch

    from evokernel.config.schema import EvaluationConfig, RayConfig
    from evokernel.db import SolutionLibrary
    from evokernel.pool import EvaluatorPool
    from evokernel.tasks import load_task

    folders = [args.corpus / "solutions" / f for f in args.folders.split(",")]
    pairs = pair_files(args.corpus / "tasks", folders)
    tasks = {t: load_task(t) for t, _ in pairs}
    every = [(f"{s.parent.name}/{s.name}", tasks[t], s.read_text()) for t, s in pairs]
    languages = Counter(language(source) for _, _, source in every)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results: dict[str, Any] = {
        "device": device,
        "profile": args.profile,
        "files": dict(languages),
        "phases": {},
    }
    print(f"{len(every)} files ({dict(languages)}) over {len(tasks)} tasks", flush=True)
    first: list[str] = []
    if not args.keep_object_cache:
        shutil.rmtree(default_root(), ignore_errors=True)  # every file distinct: measured cold
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        library = SolutionLibrary(Path(tmp) / "baselines.db")
        for spec in args.phase:
            name, concurrency, light, count, *rest = spec.split(":")
            options = rest[0].split(",") if rest else []
            files = stratified(every, count)
            if "child" in options:
                # A child that keeps its parent's kernels and changes the Python around them.
                files = [(n, t, s + CHILD_LINE) for n, t, s in files]
            config = EvaluationConfig(
                device=device,
                timeout_s=args.timeout,
                concurrency_per_worker=int(concurrency),
                compile_baseline="off",
                profile=args.profile,
                light_cuda_headers=light == "on",
                object_cache="nocache" not in options,
            )
            set_up = time.monotonic()
            pool = EvaluatorPool(config, RayConfig(), baselines=library)

            async def warm_up(pool: Any = pool, files: list[Any] = files) -> tuple[str, list[dict[str, Any]]]:
                hardware = await pool.hardware()
                await pool.prepare(list({id(t): t for _, t, _ in files}.values()))
                return hardware.describe(), await pool.header_caches(wait_s=900)

            results["hardware"], headers = asyncio.run(warm_up())
            print(
                f"{name}: {len(files)} files, {pool.concurrency} in flight, light {light}; set-up "
                f"{time.monotonic() - set_up:.1f} s; headers {headers}",
                flush=True,
            )
            left = args.budget_s - (time.monotonic() - began)
            done = asyncio.run(run_phase(pool, name, files, args.verdicts, max(1.0, left)))
            pool.shutdown()
            figures = {
                **done["figures"],
                "concurrency": pool.concurrency,
                "light_cuda_headers": light == "on",
                "options": options,
                "object_cache": object_cache_figures(done["evaluations"].values()),
            }
            names = [n for n, _, _ in files]
            if not first:
                first = names
            elif set(first) <= set(names):
                figures["stage_mean_s_first_files"] = stage_means_over(done["evaluations"], first)
            results["phases"][name] = figures
            print(f"{name}: {json.dumps(figures)}", flush=True)
            if len(files) == len(every) and not figures["cut"]:
                print(table(args.profile, done["rows"]), flush=True)
                results["verdicts"] = summarise(done["rows"])
            durations = [ev.duration_s for ev in done["evaluations"].values()]
            figures["duration_median_s"] = round(statistics.median(durations), 1) if durations else None
        library.close()
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
