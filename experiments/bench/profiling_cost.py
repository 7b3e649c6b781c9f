"""What profiling costs and what it finds (issue 26).

Two parts, each optional, the JSON line last:

* ``--corpus``: the accepted kernels of ``../shared/corpora/pike-level3/`` through
  ``EvaluatorPool.evaluate`` at ``evaluation.profiling: counters`` (which includes the timeline;
  ``--level timeline`` for the timeline alone, which Nsight Compute's serialised replays of every
  reference and kernel do not hold up):
  per correct candidate the added seconds of the timeline (the profiled call, plus loading CUPTI
  in the worker) and of the counters (Nsight Compute over a fresh process), median and p90; the
  share of candidates given a class other than ``unknown`` (with counters, and from the timeline
  alone, reclassified from the same profile); and per task the best kernel's speed-of-light share
  and bottleneck.
* ``--throughput``: the 35 Triton candidates of eval_throughput.py (27 correct) through a fresh
  pool per set, by default in the order none, timeline, none, timeline (so drift over time hits
  both; ``--sets``): the pool's candidates per minute with profiling off and at ``timeline``, their
  ratio, and the median change of a candidate's timed runtime between sets.

Usage (GPU machine)::

    python3 experiments/bench/profiling_cost.py --corpus CORPUS --folders orig --throughput

The corpus is data: read and run, never copied into the project. ``torch.compile`` baselines are
off (speedups are vs eager).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
DEVICE = "auto"  # cuda on the GPU machine; a CPU smoke run (--limit) uses Triton's interpreter


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def spread(values: list[float]) -> dict[str, Any]:
    return {"n": len(values), "median": percentile(values, 0.5), "p90": percentile(values, 0.9)}


def corpus_rows(evaluations: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    from evokernel.evaluation.profiling.verdict import classify

    rows = []
    for task, solution, ev in evaluations:
        profile = ev.details.get("profiling") or {}
        timeline = profile.get("timeline") or {}
        counters = profile.get("counters") or {}
        sol = profile.get("sol") or {}
        rows.append(
            {
                "task": task,
                "solution": solution,
                "status": ev.status.value,
                "speedup_eager": ev.speedup_eager,
                "runtime_ms": ev.runtime_ms,
                "profile_status": profile.get("status"),
                "timeline_s": (timeline.get("seconds") or 0.0) + (timeline.get("prepare_s") or 0.0)
                if timeline
                else None,
                "counters_s": counters.get("seconds"),
                "counters_status": counters.get("status"),
                "launches": timeline.get("launches"),
                "bottleneck": profile.get("bottleneck"),
                "why": profile.get("why"),
                "bottleneck_timeline": classify(timeline, None, sol)["class"] if timeline else None,
                "sol_share": sol.get("share"),
                "sol_limit": sol.get("limit"),
                # Core-seconds per stage (evaluation/cpu_usage.py); CUPTI's start is in the build's.
                "stage_cpu_s": {e["stage"]: e["cpu_s"] for e in ev.details.get("stages", []) if "cpu_s" in e},
                "stage_s": {e["stage"]: e["seconds"] for e in ev.details.get("stages", [])},
            }
        )
    return rows


async def run_corpus(args: argparse.Namespace, library: Any) -> dict[str, Any]:
    from field_verdicts import pair_files

    from evokernel.config.schema import EvaluationConfig, RayConfig
    from evokernel.pool import EvaluatorPool
    from evokernel.tasks import load_task

    root = Path(args.corpus)
    pairs = pair_files(root / "tasks", [root / "solutions" / f for f in args.folders.split(",")])
    if args.limit:
        pairs = pairs[: args.limit]
    tasks = {t: load_task(t) for t, _ in pairs}
    config = EvaluationConfig(
        device="cuda",
        timeout_s=args.timeout,
        compile_baseline="off",
        profile="kernelbench-v0",
        profiling=args.level,
    )
    pool = EvaluatorPool(config, RayConfig(), baselines=library)
    started = time.monotonic()

    async def one(task: Path, sol: Path) -> tuple[str, str, Any]:
        ev = await pool.evaluate(tasks[task], sol.read_text())
        found = (ev.details.get("profiling") or {}).get("bottleneck")
        print(f"{sol.parent.name}/{sol.name}: {ev.status.value} {found}", flush=True)
        if args.details:  # each row as it comes, so a run cut short keeps what it measured
            row = corpus_rows([(task.stem, f"{sol.parent.name}/{sol.name}", ev)])[0]
            with args.details.with_suffix(".jsonl").open("a") as stream:
                stream.write(json.dumps(row) + "\n")
        return task.stem, f"{sol.parent.name}/{sol.name}", ev

    evaluations = await asyncio.gather(*(one(t, s) for t, s in pairs))
    pool.shutdown()
    rows = corpus_rows(list(evaluations))
    correct = [r for r in rows if r["status"] == "correct" and r["profile_status"] == "ok"]
    best: dict[str, dict[str, Any]] = {}
    for r in correct:
        if r["task"] not in best or (r["speedup_eager"] or 0) > (best[r["task"]]["speedup_eager"] or 0):
            best[r["task"]] = r
    classes: dict[str, int] = {}
    for r in correct:
        classes[r["bottleneck"]] = classes.get(r["bottleneck"], 0) + 1
    return {
        "kernels": len(rows),
        "correct_profiled": len(correct),
        "correct": sum(r["status"] == "correct" for r in rows),
        "timeline_s": spread([r["timeline_s"] for r in correct if r["timeline_s"] is not None]),
        "counters_s": spread([r["counters_s"] for r in correct if r["counters_s"] is not None]),
        "counters_ok": sum(r["counters_status"] == "ok" for r in correct),
        "classified_share": round(sum(r["bottleneck"] != "unknown" for r in correct) / len(correct), 3)
        if correct
        else None,
        "classified_share_timeline": round(
            sum(r["bottleneck_timeline"] != "unknown" for r in correct) / len(correct), 3
        )
        if correct
        else None,
        "classes": classes,
        # Core-seconds per stage over the correct and profiled kernels (median, p90), and in all.
        "stage_cpu_s": {
            stage: spread([r["stage_cpu_s"][stage] for r in correct if stage in r["stage_cpu_s"]])
            for stage in ("build", "correctness", "integrity", "timing", "profiling", "feedback")
        },
        "cpu_s_per_kernel": spread([sum(r["stage_cpu_s"].values()) for r in correct]),
        "best_per_task": {
            t: {k: r[k] for k in ("solution", "speedup_eager", "sol_share", "sol_limit", "bottleneck", "why")}
            for t, r in sorted(best.items())
        },
        "wall_s": round(time.monotonic() - started, 1),
        "rows": rows,
    }


async def one_set(level: str, items: list[tuple[Any, str]], library: Any, timeout: float) -> dict[str, Any]:
    from evokernel.config.schema import EvaluationConfig, RayConfig
    from evokernel.pool import EvaluatorPool

    pool = EvaluatorPool(
        EvaluationConfig(device=DEVICE, timeout_s=timeout, profiling=level), RayConfig(), baselines=library
    )
    await pool.prepare(sorted({id(t): t for t, _ in items}.values(), key=lambda t: t.name))
    start = time.monotonic()
    evaluations = await asyncio.gather(*(pool.evaluate(t, s) for t, s in items))
    wall = time.monotonic() - start
    pool.shutdown()
    correct = [ev for ev in evaluations if ev.ok]
    profiled = [ev for ev in correct if (ev.details.get("profiling") or {}).get("status") == "ok"]
    failed = sorted(
        {str((ev.details.get("profiling") or {}).get("status"))[:200] for ev in correct if ev not in profiled}
    )
    return {
        "profile_failures": failed if level != "none" else [],
        "level": level,
        "wall_s": round(wall, 2),
        "per_min": round(60 * len(items) / wall, 2),
        "correct": len(correct),
        "profiled": len(profiled),
        "prepare_s": spread(
            [
                float((ev.details["profiling"].get("timeline") or {}).get("prepare_s") or 0.0)
                for ev in profiled
            ]
        ),
        "profiling_stage_s": spread(
            [s["seconds"] for ev in profiled for s in ev.details["stages"] if s["stage"] == "profiling"]
        ),
        # What the baselines job stored of each task's reference profile.
        "reference_profiles": {
            t.name: ((library.task_profile(t.source_hash) or {}).get("bottleneck"))
            for t in {id(t): t for t, _ in items}.values()
        },
        # Candidate -> timed runtime: do other candidates' profiles move a candidate's timing?
        "runtimes": [ev.runtime_ms if ev.ok else None for ev in evaluations],
    }


async def run_throughput(args: argparse.Namespace, library: Any) -> dict[str, Any]:
    from throughput_candidates import TASKS, triton_candidates

    from evokernel.tasks import load_task

    loaded: dict[str, Any] = {}
    items = []
    for _kind, task, source in triton_candidates():
        loaded.setdefault(task, load_task(TASKS / f"{task}.py"))
        items.append((loaded[task], source))
    if args.limit:
        items = items[: args.limit]
    sets = []
    for level in args.sets.split(","):
        sets.append(await one_set(level, items, library, args.timeout))
        print(json.dumps({k: v for k, v in sets[-1].items() if k != "runtimes"}), flush=True)
    off = statistics.fmean([s["per_min"] for s in sets if s["level"] == "none"] or [math.nan])
    on = statistics.fmean([s["per_min"] for s in sets if s["level"] == "timeline"] or [math.nan])
    # Per candidate, its runtime in a profiled set over the same in the unprofiled set before it,
    # beside the same ratio between the two unprofiled sets (the noise floor).
    drift: dict[str, float | None] = {}
    for i, a in enumerate(sets):
        for b in sets[i + 1 :]:
            ratios = [y / x for x, y in zip(a["runtimes"], b["runtimes"], strict=True) if x and y]
            key = f"{a['level']}_to_{b['level']}"
            drift.setdefault(key, round(statistics.median(abs(r - 1) for r in ratios), 4) if ratios else None)
    for one in sets:
        one.pop("runtimes")
    return {
        "sets": sets,
        "off_per_min": round(off, 2),
        "timeline_per_min": round(on, 2),
        "ratio": round(on / off, 3),
        "runtime_drift_median": drift,
    }


def table(corpus: dict[str, Any]) -> str:
    tl, ct = corpus["timeline_s"], corpus["counters_s"]
    lines = [
        f"correct and profiled: {corpus['correct_profiled']} of {corpus['kernels']} kernels",
        f"timeline seconds per candidate: median {tl['median']}, p90 {tl['p90']}",
        f"counters seconds per candidate: median {ct['median']}, p90 {ct['p90']}"
        f" ({corpus['counters_ok']} ok)",
        f"classified: {corpus['classified_share']} with counters, "
        f"{corpus['classified_share_timeline']} from the timeline alone",
        "| task | best kernel | speedup vs eager | SOL share | limit | bottleneck |",
        "|---|---|---|---|---|---|",
    ]
    for task, r in corpus["best_per_task"].items():
        share = f"{r['sol_share']:.1%}" if r["sol_share"] is not None else "-"
        speed = f"{r['speedup_eager']:.2f}x" if r["speedup_eager"] else "-"
        lines.append(
            f"| {task} | {r['solution']} | {speed} | {share} | {r['sol_limit']} | {r['bottleneck']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, help="the pike-level3 folder (tasks/, solutions/)")
    parser.add_argument("--folders", default="orig", help="solution folders, comma-separated")
    parser.add_argument(
        "--limit", type=int, default=0, help="first N kernels (a smoke run; also --throughput)"
    )
    parser.add_argument(
        "--level",
        choices=("timeline", "counters"),
        default="counters",
        help="--corpus's profiling level (counters: Nsight Compute over every reference and correct "
        "kernel, serialised on the GPU; timeline: the CUPTI timeline alone)",
    )
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--sets", default="none,timeline,none,timeline", help="--throughput's sets, in order")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--details", type=Path, help="write every row here (JSON)")
    args = parser.parse_args()

    import torch

    from evokernel.db import SolutionLibrary

    out: dict[str, Any] = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}
    with tempfile.TemporaryDirectory() as tmp:
        library = SolutionLibrary(Path(tmp) / "baselines.db")
        if args.throughput:
            out["throughput"] = asyncio.run(run_throughput(args, library))
        if args.corpus:
            corpus = asyncio.run(run_corpus(args, library))
            print(table(corpus), flush=True)
            if args.details:
                args.details.write_text(json.dumps(corpus["rows"], indent=1))
            out["corpus"] = {k: v for k, v in corpus.items() if k != "rows"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
