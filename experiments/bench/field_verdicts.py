"""Verdicts on real LLM-written kernels under evokernel's profiles (issue 18).

Runs a folder of KernelBench-format tasks and folders of solution files (``task_N.py`` for the task
file ``N_Name.py``) through ``EvaluatorPool.evaluate`` under each verdict profile, and prints a table
per profile (accepted, refused by stage and rule, speedup vs eager) and, last, one JSON line.
Files that define their optimized class as ``Model`` (PIKE's format) are read as such by the worker
(loading.candidate_class), the same path ``evokernel verify`` takes for published solutions.

Usage (GPU machine)::

    python3 experiments/bench/field_verdicts.py --tasks CORPUS/tasks \
        --solutions CORPUS/solutions/orig CORPUS/solutions/openevolve_pop_25_no_agents_300 ... \
        --profiles kernelbench-v0,strict --details verdicts.json

The corpus is data: it is read and run, never copied into the project. ``torch.compile`` baselines
are off by default (``--compile-baseline``): 30 level-3 compiles would take most of the run, and
the issue asks for the speedup over eager.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

RULE = re.compile(r"rule ([\w-]+)")


def pair_files(tasks: Path, folders: list[Path]) -> list[tuple[Path, Path]]:
    """(task file, solution file) for every ``task_N.py`` whose task ``N_*.py`` exists."""
    by_number = {p.name.split("_", 1)[0]: p for p in tasks.glob("*.py") if p.name[0].isdigit()}
    pairs = []
    for folder in folders:
        for sol in sorted(folder.glob("task_*.py"), key=lambda p: int(p.stem.split("_")[1])):
            task = by_number.get(sol.stem.split("_")[1])
            if task is not None:
                pairs.append((task, sol))
    return pairs


def verdict_key(row: dict[str, Any]) -> str:
    """``correct``, or ``status/stage[/rule]`` for a refusal."""
    if row["status"] == "correct":
        return "correct"
    rule = RULE.search(row["reason"] or "")
    return "/".join([row["status"], row["stage"], *([rule.group(1)] if rule else [])])


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    speedups = [r["speedup_eager"] for r in rows if r["status"] == "correct" and r["speedup_eager"]]
    return {
        "kernels": len(rows),
        "accepted": sum(r["status"] == "correct" for r in rows),
        "verdicts": dict(Counter(verdict_key(r) for r in rows).most_common()),
        "geomean_speedup_accepted": round(math.exp(statistics.fmean(map(math.log, speedups))), 4)
        if speedups
        else None,
        "median_speedup_accepted": round(statistics.median(speedups), 4) if speedups else None,
    }


def table(profile: str, rows: list[dict[str, Any]]) -> str:
    s = summarise(rows)
    lines = [
        f"profile {profile}: {s['accepted']}/{s['kernels']} accepted",
        "| verdict | kernels |",
        "|---|---|",
    ]
    lines += [f"| {k} | {n} |" for k, n in s["verdicts"].items()]
    lines.append(f"geomean speedup vs eager (accepted): {s['geomean_speedup_accepted']}")
    return "\n".join(lines)


async def evaluate_all(
    pool: Any, tasks: dict[Path, Any], pairs: list[tuple[Path, Path]]
) -> list[dict[str, Any]]:
    async def one(task_path: Path, sol: Path) -> dict[str, Any]:
        ev = await pool.evaluate(tasks[task_path], sol.read_text())
        return {
            "solution": f"{sol.parent.name}/{sol.name}",
            "task": task_path.stem,
            "profile": ev.profile,
            "status": ev.status.value,
            "stage": ev.stage,
            "reason": ev.reason[:600],
            "speedup_eager": ev.speedup_eager,
            "runtime_ms": ev.runtime_ms,
            "eager_ms": ev.eager_ms,
            "max_abs_error": ev.max_abs_error,
            "weights": ev.details.get("weights"),
            "entry_class": ev.details.get("entry_class"),
            "checks": ev.details.get("checks", [])[-3:],
            "duration_s": round(ev.duration_s, 2),
        }

    return list(await asyncio.gather(*(one(t, s) for t, s in pairs)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=Path, required=True)
    parser.add_argument("--solutions", type=Path, nargs="+", required=True)
    parser.add_argument("--profiles", default="kernelbench-v0,strict")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--concurrency", type=int, default=0)
    parser.add_argument("--compile-baseline", default="off", choices=["auto", "on", "off"])
    parser.add_argument("--limit", type=int, default=0, help="first N kernels only (a smoke run)")
    parser.add_argument("--details", type=Path, help="write every verdict here (JSON)")
    args = parser.parse_args()

    import torch

    from evokernel.config_schema import EvaluationConfig, RayConfig
    from evokernel.db import SolutionLibrary
    from evokernel.pool import EvaluatorPool
    from evokernel.tasks import load_task

    pairs = pair_files(args.tasks, args.solutions)
    if args.limit:
        pairs = pairs[: args.limit]
    tasks = {t: load_task(t) for t, _ in pairs}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results: dict[str, Any] = {"device": device, "kernels": len(pairs), "profiles": {}}
    details: dict[str, Any] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        library = SolutionLibrary(Path(tmp) / "baselines.db")  # baselines measured once for all profiles
        for profile in args.profiles.split(","):
            config = EvaluationConfig(
                device=device,
                timeout_s=args.timeout,
                concurrency_per_worker=args.concurrency,
                compile_baseline=args.compile_baseline,
                profile=profile,
            )
            pool = EvaluatorPool(config, RayConfig(), baselines=library)
            if device == "cuda":
                results["hardware"] = asyncio.run(pool.hardware()).describe()
            t0 = time.monotonic()
            rows = asyncio.run(evaluate_all(pool, tasks, pairs))
            pool.shutdown()
            details[profile] = rows
            results["profiles"][profile] = {**summarise(rows), "wall_s": round(time.monotonic() - t0, 1)}
            print(table(profile, rows), flush=True)
            if args.details:
                args.details.write_text(json.dumps(details, indent=1))
    results["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
