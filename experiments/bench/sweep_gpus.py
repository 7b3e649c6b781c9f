"""Benchmark: a sweep's cells on several GPUs of one host: do they progress together, and does any
GPU idle while work is queued?

    python experiments/bench/sweep_gpus.py --gpus 2                         # GPU machine
    python experiments/bench/sweep_gpus.py --gpus 2 budget.evaluations=2     # a CPU smoke run

Question (issue 21, item 3): a sweep of 4 cells (``experiments/sweep.yaml``: pike_b and greedy x
two seeds, two tasks) on 2 GPUs: all cells progress together and no GPU idles while work is
queued (timing-lock share and NVML utilization per GPU over the run).

Method. One local Ray cluster; an ``EvaluatorPool`` with ``evaluation.workers=N`` built here and
passed to ``run_sweep`` (the sweep's cells share it, as ``evokernel sweep`` does), its baselines
measured before the clock starts. A thread samples every 0.2 s the pool's queue (requests
waiting) and each GPU's NVML utilization. Reported:

* per cell: evaluations, and its first and last evaluation in seconds from the sweep's first
  (cells that progress together start and end close to each other);
* per GPU (actor): evaluations and the share of the wall time it held the timing lock;
* per GPU: mean NVML utilization over the samples taken while requests were queued, and the
  share of those samples under 5 % (a GPU idling while work waits). None without NVML (a CPU).

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from scale_out import per_actor

CONFIG = Path(__file__).resolve().parents[1] / "sweep.yaml"
SAMPLE_S = 0.2


class QueueSampler:
    """(queued requests, [utilization of each GPU]) every ``SAMPLE_S`` while running."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.samples: list[tuple[int, list[float] | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import torch

        count = torch.cuda.device_count()
        nvml = count > 0
        while not self._stop.wait(SAMPLE_S):
            utilization: list[float] | None = None
            if nvml:
                try:
                    utilization = [float(torch.cuda.utilization(d)) for d in range(count)]
                except (ModuleNotFoundError, RuntimeError, ValueError) as exc:  # no pynvml / NVML
                    print(f"(no NVML utilization: {type(exc).__name__}: {exc})", file=sys.stderr)
                    nvml = False
            self.samples.append((int(self.pool.queue.waiting), utilization))

    def __enter__(self) -> QueueSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def idle_while_queued(self) -> dict[str, Any]:
        queued = [u for waiting, u in self.samples if waiting > 0 and u is not None]
        out: dict[str, Any] = {"samples": len(self.samples), "samples_queued": len(queued)}
        if queued:
            gpus = range(len(queued[0]))
            out["mean_utilization"] = [round(statistics.mean(u[g] for u in queued) / 100, 3) for g in gpus]
            out["share_under_5pct"] = [round(sum(u[g] < 5 for u in queued) / len(queued), 3) for g in gpus]
        return out


def cell_progress(db: Path, runs: dict[int, str]) -> dict[str, dict[str, Any]]:
    """Per cell: evaluations and the seconds of its first and last one from the sweep's first."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT c.run_id, e.created_at FROM evaluations e JOIN candidates c ON c.id = e.candidate_id"
        ).fetchall()
    times: dict[str, list[datetime]] = {}
    for run_id, created in rows:
        times.setdefault(run_id, []).append(datetime.fromisoformat(str(created)))
    start = min(t for ts in times.values() for t in ts)
    return {
        str(cell): {
            "evaluations": len(times.get(run_id, [])),
            "first_s": round((min(times[run_id]) - start).total_seconds(), 1) if run_id in times else None,
            "last_s": round((max(times[run_id]) - start).total_seconds(), 1) if run_id in times else None,
        }
        for cell, run_id in sorted(runs.items())
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gpus", type=int, default=2, help="evaluator actors (GPUs; CPU actors on a CPU)")
    parser.add_argument("items", nargs="*", help="overrides or sweep axes (key=value, key=v1,v2)")
    args = parser.parse_args()

    from evokernel.config import load_config
    from evokernel.db import SolutionLibrary
    from evokernel.pool import EvaluatorPool, init_ray
    from evokernel.run.progress import ProgressPrinter
    from evokernel.sweep.runner import run_sweep
    from evokernel.tasks import load_tasks

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sweep.db"
        items = [*args.items, f"library={db}", f"evaluation.workers={args.gpus}"]
        plain = [item for item in items if "," not in item.split("=", 1)[-1]]
        base = load_config(str(CONFIG), plain)
        init_ray(base.ray)
        library = SolutionLibrary(base.library)
        pool = EvaluatorPool(base.evaluation, base.ray, baselines=library)
        try:
            asyncio.run(pool.prepare(load_tasks(base.tasks)))  # actors up, baselines: not timed
            with QueueSampler(pool) as sampler:
                started = time.monotonic()
                summary = run_sweep(
                    str(CONFIG),
                    items,
                    pool=pool,
                    reporter_for=lambda index, run_id: ProgressPrinter(io.StringIO()),
                    announce=False,
                )
                wall = time.monotonic() - started
            evaluations = [
                sc.evaluation
                for run_id in summary.runs.values()
                for task in load_tasks(base.tasks)
                for sc in library.candidates(run_id, task.name)
                if sc.evaluation is not None
            ]
            results = {
                "gpus": pool.size,
                "concurrency_per_worker": pool.concurrency,
                "cells": len(summary.runs),
                "wall_s": round(wall, 2),
                "evaluations": len(evaluations),
                # Identical sources across cells (the seeds; same-seed proposals) are evaluated once.
                "deduplicated": sum(1 for ev in evaluations if ev.details.get("deduplicated")),
                "per_min": round(len(evaluations) / wall * 60, 2),
                "cell_progress": cell_progress(db, summary.runs),
                "per_gpu": per_actor(evaluations, wall),
                "while_queued": sampler.idle_while_queued(),
            }
        finally:
            pool.shutdown()
            library.close()
    print(
        f"{results['cells']} cells on {results['gpus']} GPU(s): {results['evaluations']} evaluations "
        f"({results['deduplicated']} deduplicated) in {wall:.1f} s"
    )
    print(f"  cells (first/last evaluation, s): {results['cell_progress']}")
    print(f"  per GPU: {results['per_gpu']}; while queued: {results['while_queued']}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
