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
import contextlib
import json
import math
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from split_cluster import add_split_arguments, busy_share, cluster_from, cpu_lines
from verdict_rows import verdict_row

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
    pool: Any,
    tasks: dict[Path, Any],
    pairs: list[tuple[Path, Path]],
    stream: Path | None,
    budget_s: float = math.inf,
) -> tuple[list[dict[str, Any]], int]:
    """The verdicts in by ``budget_s`` and how many were cut: a run cut by its budget still reports
    its builds per node and the GPU node's load (an interrupt would lose both)."""
    done: list[dict[str, Any]] = []

    async def one(task_path: Path, sol: Path) -> dict[str, Any]:
        ev = await pool.evaluate(tasks[task_path], sol.read_text())
        row = verdict_row(ev, f"{sol.parent.name}/{sol.name}", task_path.stem)
        done.append(row)
        where = f"[{len(done)}/{len(pairs)}] {row['profile']} {row['solution']}"
        print(f"{where}: {verdict_key(row)} ({row['duration_s']} s)", flush=True)
        if stream is not None:
            with stream.open("a") as f:  # every verdict kept as it comes, for a run cut short
                f.write(json.dumps(row) + "\n")
        return row

    jobs = [asyncio.ensure_future(one(t, s)) for t, s in pairs]
    _, pending = await asyncio.wait(jobs, timeout=None if math.isinf(budget_s) else max(1.0, budget_s))
    for job in pending:
        job.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return done, len(pending)


def merge(files: list[Path]) -> None:
    """The tables and the JSON line from verdict streams (one per profile, or runs cut short)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}  # a later file's verdict wins (a re-run)
    for path in files:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            latest[row["profile"], row["solution"]] = row
    by_profile: dict[str, list[dict[str, Any]]] = {}
    for (profile, _), row in latest.items():
        by_profile.setdefault(profile, []).append(row)
    for profile, rows in by_profile.items():
        print(table(profile, rows))
    print(json.dumps({"profiles": {p: summarise(rows) for p, rows in by_profile.items()}}))


def streamed(stream: Path) -> set[tuple[str, str]]:
    """The (profile, solution) pairs a stream already holds: a run cut by a call's limit goes on."""
    if not stream.exists():
        return set()
    done = set()
    for line in stream.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line cut by the interrupt: run it again
            row = json.loads(line)
            done.add((row["profile"], row["solution"]))
    return done


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
    parser.add_argument("--only", type=Path, help="a file listing the kernels to run, as folder/task_N.py")
    parser.add_argument("--details", type=Path, help="write every verdict here (JSON)")
    parser.add_argument(
        "--budget-s", type=float, default=math.inf, help="cancel the verdicts not in by then (all profiles)"
    )
    parser.add_argument("--stream", type=Path, help="append each verdict here as it comes (JSON lines)")
    parser.add_argument(
        "--resume", action="store_true", help="skip the (profile, kernel) pairs --stream already holds"
    )
    parser.add_argument("--baselines", type=Path, help="baselines library file (default: temporary)")
    parser.add_argument(
        "--timing", nargs="*", default=[], help="evaluation.timing settings as KEY=VALUE (JSON values)"
    )
    parser.add_argument("--merge", type=Path, nargs="+", help="no run: tables and JSON from --stream files")
    # Issue 37: the same verdicts with builds elsewhere (evaluation.builds), on this machine split
    # into a GPU node and CPU-only build nodes (split_cluster.py), for the speedup dispersion
    # against a one-node run whose quiet windows pause its builds.
    parser.add_argument("--builds", default="local", choices=["local", "pool"])
    parser.add_argument("--kept", type=int, default=-1, help="evaluation.gpu_node_cores_kept")
    add_split_arguments(parser)
    args = parser.parse_args()
    if args.merge:
        merge(args.merge)
        return
    # The cluster first: it turns on Ray's token authentication, which Ray reads when imported.
    with cluster_from(args) as split:
        run(args, split)


def run(args: argparse.Namespace, split: tuple[str, list[int]] | None) -> None:
    """The verdicts of every kernel under each profile, on the local cluster or ``split``'s."""
    import torch

    from evokernel.config.schema import EvaluationConfig, RayConfig, TimingConfig
    from evokernel.db import SolutionLibrary
    from evokernel.pool import EvaluatorPool
    from evokernel.tasks import load_task

    timing = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.timing)}
    pairs = pair_files(args.tasks, args.solutions)
    if args.only:
        wanted = set(args.only.read_text().split())
        pairs = [(t, s) for t, s in pairs if f"{s.parent.name}/{s.name}" in wanted]
    if args.limit:
        pairs = pairs[: args.limit]
    tasks = {t: load_task(t) for t, _ in pairs}
    print(f"{len(pairs)} kernels over {len(tasks)} tasks", flush=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results: dict[str, Any] = {"device": device, "kernels": len(pairs), "profiles": {}}
    details: dict[str, Any] = {}
    started = time.monotonic()
    results["builds"], results["split"] = args.builds, args.split
    address, pinned = split if split else (None, [])
    done = streamed(args.stream) if args.resume and args.stream else set()
    with tempfile.TemporaryDirectory() as tmp:
        # baselines measured once for all profiles (and, with --baselines, for a resumed run)
        library = SolutionLibrary(args.baselines or Path(tmp) / "baselines.db")
        for profile in args.profiles.split(","):
            todo = [(t, s) for t, s in pairs if (profile, f"{s.parent.name}/{s.name}") not in done]
            print(f"{profile}: {len(todo)} of {len(pairs)} kernels to run", flush=True)
            if not todo:
                continue
            config = EvaluationConfig(
                device=device,
                timeout_s=args.timeout,
                concurrency_per_worker=args.concurrency,
                compile_baseline=args.compile_baseline,
                profile=profile,
                timing=TimingConfig(**timing),
                builds=args.builds,
                gpu_node_cores_kept=args.kept,
            )
            pool = EvaluatorPool(config, RayConfig(address=address), baselines=library)
            if device == "cuda":
                results["hardware"] = asyncio.run(pool.hardware()).describe()
            t0 = time.monotonic()
            before = cpu_lines()
            left = args.budget_s - (time.monotonic() - started)
            rows, cut = asyncio.run(evaluate_all(pool, tasks, todo, args.stream, left))
            after = cpu_lines()
            stats = asyncio.run(pool.build_stats())
            pool.shutdown()
            if pinned:  # the GPU node's own cores over the profile's run
                results.setdefault("gpu_node_cores_busy", {})[profile] = busy_share(before, after, pinned)
            if stats.get("nodes"):
                results.setdefault("builds_per_node", {})[profile] = {
                    node[:12]: {k: v.get(k) for k in ("gpu", "built", "failed", "lost")}
                    for node, v in stats["nodes"].items()
                }
            details[profile] = rows
            results["profiles"][profile] = {
                **summarise(rows),
                "cut": cut,
                "wall_s": round(time.monotonic() - t0, 1),
            }
            print(table(profile, rows), flush=True)
            if args.details:
                args.details.write_text(json.dumps(details, indent=1))
    results["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
