"""Benchmark: does a second GPU pay in a real run? The same run on 1 and on N GPUs of one host.

    python experiments/bench/scale_out.py --gpus 1 2          # GPU machine: 6 tasks x 60 evaluations
    python experiments/bench/scale_out.py --gpus 1 2 --quick  # 2 evaluations per task; runs on CPU too

Question (issue 21): a run of ``experiments/scale_out.yaml`` (the quickstart's three tasks plus
three level-2 tasks, ``tune`` operator, PIKE-B, 60 evaluations per task) on 1 and on 2 GPUs:
wall time and evaluations/min. Goal: >= 1.8x evaluations/min on 2 GPUs.

Method. One local Ray cluster for every size. For each N of ``--gpus``, side by side in one
process: an ``EvaluatorPool`` with ``evaluation.workers=N`` (N actors, one GPU each; CPU actors on
a CPU), its actors started and every task's baselines measured or looked up *before* the clock
starts (the baselines are cached in one SolutionLibrary shared by the sizes, so no size pays for
them), then ``run_experiment`` of the config with that pool, a new run each. Timed: the run's
wall time. Reported per size: evaluations, wall_s, evaluations/min; per actor (GPU) its
evaluations and the share of the wall time it held the timing lock; the statuses. ``speedup``
is the evaluations/min of each size over the first size's.

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIG = Path(__file__).resolve().parents[1] / "scale_out.yaml"


def per_actor(evaluations: list[Any], wall: float) -> dict[str, dict[str, float]]:
    """Evaluations and timing-lock share of the wall time per actor (``gpu<id>@<node>``); copies
    of a deduplicated evaluation (same source, evaluated once) are not counted."""
    out: dict[str, dict[str, float]] = {}
    for ev in evaluations:
        if ev.details.get("deduplicated"):
            continue
        entry = out.setdefault(str(ev.details.get("actor", "?")), {"evaluations": 0, "lock_s": 0.0})
        entry["evaluations"] += 1
        entry["lock_s"] += float((ev.details.get("gpu_lock") or {}).get("exclusive_s", 0.0))
    return {
        label: {"evaluations": e["evaluations"], "timing_lock_busy": round(e["lock_s"] / wall, 3)}
        for label, e in sorted(out.items())
    }


def one_size(workers: int, base: list[str], library_path: Path) -> dict[str, Any]:
    from evokernel.config import load_config
    from evokernel.db import SolutionLibrary
    from evokernel.pool import EvaluatorPool
    from evokernel.run.progress import ProgressPrinter
    from evokernel.run.runner import run_experiment
    from evokernel.tasks import load_tasks

    config = load_config(str(CONFIG), [*base, f"library={library_path}", f"evaluation.workers={workers}"])
    tasks = load_tasks(config.tasks)
    library = SolutionLibrary(config.library)
    pool = EvaluatorPool(config.evaluation, config.ray, baselines=library)
    try:
        started = time.monotonic()
        asyncio.run(pool.prepare(tasks))  # actors up, baselines measured or looked up: not timed
        setup_s = time.monotonic() - started
        started = time.monotonic()
        summary = run_experiment(config, pool=pool, tasks=tasks, reporter=ProgressPrinter(io.StringIO()))
        wall = time.monotonic() - started
        evaluations = [
            sc.evaluation
            for task in tasks
            for sc in library.candidates(summary.run_id, task.name)
            if sc.evaluation is not None
        ]
        statuses: dict[str, int] = {}
        for ev in evaluations:
            statuses[ev.status.value] = statuses.get(ev.status.value, 0) + 1
        return {
            "workers": pool.size,
            "concurrency_per_worker": pool.concurrency,
            "setup_s": round(setup_s, 1),
            "evaluations": len(evaluations),
            "wall_s": round(wall, 2),
            "per_min": round(len(evaluations) / wall * 60, 2),
            "per_gpu": per_actor(evaluations, wall),
            "statuses": statuses,
            "stopped": sorted(set(summary.stopped.values())),
        }
    finally:
        pool.shutdown()
        library.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 2], help="pool sizes, in order")
    parser.add_argument("--quick", action="store_true", help="2 evaluations per task (a CPU smoke run)")
    parser.add_argument("--budget", type=int, help="evaluations per task (default: the config's 60)")
    parser.add_argument("overrides", nargs="*", help="further config key=value overrides")
    args = parser.parse_args()

    from evokernel.config import load_config
    from evokernel.pool import init_ray

    base = list(args.overrides)
    budget = args.budget or (2 if args.quick else None)
    if budget:
        base.append(f"budget.evaluations={budget}")
    init_ray(load_config(str(CONFIG), base).ray)
    results: dict[str, Any] = {"config": CONFIG.name, "overrides": base, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        library = Path(tmp) / "scale_out.db"
        for workers in args.gpus:
            figures = one_size(workers, base, library)
            results["sizes"][str(workers)] = figures
            print(
                f"{workers} GPU(s): {figures['evaluations']} evaluations in {figures['wall_s']} s = "
                f"{figures['per_min']}/min; per GPU {figures['per_gpu']}; {figures['statuses']}"
            )
    first = results["sizes"][str(args.gpus[0])]["per_min"]
    results["speedup"] = {n: round(s["per_min"] / first, 2) for n, s in results["sizes"].items()}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
