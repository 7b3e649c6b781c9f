"""Benchmark: evaluation throughput of the Ray pool against one-candidate-at-a-time evaluation.

    python experiments/bench/eval_throughput.py                  # GPU machine: 35 Triton + 10 CUDA
    python experiments/bench/eval_throughput.py --gpus 2         # two actors (2-GPU machine)
    python experiments/bench/eval_throughput.py --quick          # a few candidates; runs on CPU too

Question (issue 4): how many candidates per minute per GPU does the pool verify and time, and how
does that compare with the sequential way of KernelBench and PIKE (a fresh process per candidate,
one candidate at a time)? Goals: >= 60 Triton and >= 15 CUDA candidates/min/GPU, >= 5x sequential.

Candidates (fixed, deterministic, all distinct sources so deduplication never inflates a figure;
the script checks that no evaluation was deduplicated):
* Triton (35): the bundled level-1/2 seeds with knob variations (block sizes, warps), 27 correct,
  2 slow (tiny blocks, one warp), 3 incorrect (output scaled by 1.001), 3 compile errors (a
  misspelt ``tl.load``).
* CUDA (10): ``load_inline`` elementwise kernels over the bundled gelu, leaky_relu and
  scale_bias_gelu tasks, each with its own threads-per-block / items-per-thread / extension name,
  so every one is a separate nvcc build. Skipped on a CPU (no nvcc or device). ``--cuda-layout``
  picks the source layout (throughput_candidates.py): ``kernelbench`` (torch headers in the
  ``.cu``, the issue's set, reported as ``cuda``), ``lean`` (the layout evokernel's CUDA prompt asks
  for, reported as ``cuda_lean``) or ``both``.

Method. The pool: ``EvaluatorPool`` on a local Ray cluster with ``--gpus`` actors, baselines cached
in a SQLite SolutionLibrary in a temp dir and measured before the clock starts (``pool.prepare``),
as in a run after its first candidates; then each set is submitted at once and timed to the last
result. The sequential baseline: the same requests (same cached baselines) through
``run_sandboxed`` with its default launcher, a new interpreter per candidate, one at a time, on a
stratified sample (``--baseline-sample`` Triton candidates, default 8, ``--baseline-cuda``,
default 3; ``all`` for every one: a cold CUDA candidate costs about a minute), giving its
candidates/min. GPU busy during timing = the time the GPUs' exclusive timing locks were held over
the wall time of the set; NVML utilization is sampled beside it when pynvml is installed. The
stage breakdown is the mean seconds per stage over the set's evaluations that reached the stage.

The last line printed is one JSON object with every figure. Real LLM-written level-3 kernels (the
pike-level3 corpus) are measured by ``corpus_throughput.py`` beside this script.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from throughput_candidates import TASKS, cuda_candidates, triton_candidates


# ---- measuring ----------------------------------------------------------------------------------------
class NvmlSampler:
    """Mean GPU utilization (NVML, all visible GPUs) while running; None without pynvml or a GPU."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import torch

        try:
            count = torch.cuda.device_count()
            if count == 0:
                return
            while not self._stop.wait(0.2):
                self.samples.append(statistics.mean(torch.cuda.utilization(d) for d in range(count)))
        except (ModuleNotFoundError, RuntimeError, ValueError) as exc:  # no pynvml / no NVML
            print(f"(no NVML utilization: {type(exc).__name__}: {exc})", file=sys.stderr)

    def __enter__(self) -> NvmlSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def mean(self) -> float | None:
        return round(statistics.mean(self.samples) / 100, 3) if self.samples else None


def breakdown(evaluations: list[Any], key: str = "seconds") -> dict[str, float | None]:
    """Mean wall seconds per stage, or (``key="cpu_s"``) mean core-seconds."""
    from evokernel.pool.health import BREAKDOWN, stage_seconds

    sums: dict[str, list[float]] = {s: [] for s in BREAKDOWN}
    for ev in evaluations:
        seconds = stage_seconds(ev, key)
        # sequential: run_sandboxed records the start there
        if key == "seconds" and "start" not in seconds and "start_s" in ev.details:
            seconds["start"] = float(ev.details["start_s"])
        for stage, value in seconds.items():
            sums[stage].append(value)
    return {s: round(statistics.mean(v), 3) if v else None for s, v in sums.items()}


def statuses(evaluations: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for ev in evaluations:
        out[ev.status.value] = out.get(ev.status.value, 0) + 1
    return out


async def through_pool(pool: Any, items: list[tuple[Any, str]], gpus: int) -> dict[str, Any]:
    with NvmlSampler() as nvml:
        start = time.monotonic()
        done_at: list[float] = [0.0] * len(items)

        async def one(i: int, task: Any, source: str) -> Any:
            ev = await pool.evaluate(task, source)
            done_at[i] = round(time.monotonic() - start, 3)
            return ev

        evaluations = await asyncio.gather(*(one(i, t, s) for i, (t, s) in enumerate(items)))
        wall = time.monotonic() - start
    exclusive = sum(float((ev.details.get("gpu_lock") or {}).get("exclusive_s", 0.0)) for ev in evaluations)
    per_gpu = per_actor(evaluations, wall)
    early = sum(int((ev.details.get("gpu_lock") or {}).get("released_early", 0)) for ev in evaluations)
    assert not any(ev.details.get("deduplicated") for ev in evaluations), "a candidate was deduplicated"
    return {
        "candidates": len(items),
        "wall_s": round(wall, 2),
        "per_min": round(len(items) / wall * 60, 2),
        "per_min_per_gpu": round(len(items) / wall * 60 / gpus, 2),
        "statuses": statuses(evaluations),
        "stage_mean_s": breakdown(evaluations),
        "timing_lock_busy": round(exclusive / (wall * gpus), 3),
        # Per actor (one per GPU; labelled gpu<id>@<node>): candidates and timing-lock share of the wall.
        "per_gpu": per_gpu,
        "lock_released_early": early,
        "nvml_utilization": nvml.mean(),
        "_evaluations": evaluations,
        "_done_at": done_at,
    }


def per_actor(evaluations: list[Any], wall: float) -> dict[str, dict[str, float]]:
    """Candidates, candidates/min and timing-lock share of the wall time per actor (GPU)."""
    out: dict[str, dict[str, float]] = {}
    for ev in evaluations:
        entry = out.setdefault(str(ev.details.get("actor", "?")), {"candidates": 0, "lock_s": 0.0})
        entry["candidates"] += 1
        entry["lock_s"] += float((ev.details.get("gpu_lock") or {}).get("exclusive_s", 0.0))
    return {
        label: {
            "candidates": e["candidates"],
            "per_min": round(e["candidates"] / wall * 60, 2),
            "timing_lock_busy": round(e["lock_s"] / wall, 3),
        }
        for label, e in sorted(out.items())
    }


def per_evaluation(evaluations: list[Any], done_at: list[float] | None) -> list[dict[str, Any]]:
    """What ``--details`` writes per evaluation: verdict, stages, trials, lock use, finish time."""
    rows = []
    for n, ev in enumerate(evaluations):
        rows.append(
            {
                "status": ev.status.value,
                "reason": ev.reason[:200],
                "done_at_s": done_at[n] if done_at else None,
                "stages": ev.details.get("stages"),
                "checks": ev.details.get("checks"),
                "gpu_lock": ev.details.get("gpu_lock"),
                "start_s": ev.details.get("start_s"),
            }
        )
    return rows


def sequential(pool: Any, items: list[tuple[Any, str]], timeout_s: float) -> dict[str, Any]:
    """KernelBench/PIKE style: a new interpreter per candidate, one at a time (no Ray)."""
    from evokernel.evaluation.sandbox import run_sandboxed

    evaluations = []
    start = time.monotonic()
    for task, source in items:
        request = pool.request(task, source, pool.known_baselines(task))
        evaluations.append(run_sandboxed(request.to_json(), timeout_s))
    wall = time.monotonic() - start
    return {
        "candidates": len(items),
        "wall_s": round(wall, 2),
        "per_min": round(len(items) / wall * 60, 2),
        "statuses": statuses(evaluations),
        "stage_mean_s": breakdown(evaluations),
        "_evaluations": evaluations,
    }


def sample(items: list[Any], n: int | None) -> list[Any]:
    """Every k-th item (a stratified sample: the lists are grouped by task and kind)."""
    if n is None or n >= len(items):
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="6 Triton (+3 CUDA on a GPU) candidates")
    parser.add_argument("--gpus", type=int, default=1, help="evaluator actors (GPUs; CPU actors on a CPU)")
    parser.add_argument(
        "--concurrency", type=int, default=0, help="candidates per actor (0: the pool default)"
    )
    parser.add_argument("--baseline-sample", default="8", help="sequential Triton candidates, or 'all'")
    parser.add_argument("--baseline-cuda", default="3", help="sequential CUDA candidates, or 'all'")
    parser.add_argument(
        "--only", choices=("triton", "cuda"), help="one set only (e.g. to stay under a time limit)"
    )
    parser.add_argument(
        "--cuda-layout",
        default="kernelbench",
        choices=("kernelbench", "lean", "both"),
        help="CUDA source layout (throughput_candidates.py): torch headers in the .cu or not",
    )
    parser.add_argument("--compile-baseline", default="auto", choices=("auto", "on", "off"))
    parser.add_argument(
        "--precompiled-header",
        default="on",
        choices=("on", "off"),
        help="a precompiled torch/extension.h for load_inline builds (evaluation/pch.py); 'on' waits "
        "for it before timing, so the figures are the steady state",
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--details", type=Path, help="write every evaluation's stages and trials here (JSON)")
    args = parser.parse_args()

    import torch

    from evokernel.config.schema import EvaluationConfig, RayConfig
    from evokernel.db import SolutionLibrary
    from evokernel.pool.evaluator_pool import EvaluatorPool
    from evokernel.tasks import load_task

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    triton_set = triton_candidates()
    layouts = ("kernelbench", "lean") if args.cuda_layout == "both" else (args.cuda_layout,)
    sets: dict[str, list[tuple[str, str, str]]] = {"triton": triton_set}
    for layout in layouts if device == "cuda" else ():
        sets["cuda" if layout == "kernelbench" else "cuda_lean"] = cuda_candidates(layout)
    if args.quick:
        sets = {label: sample(items, 6 if label == "triton" else 3) for label, items in sets.items()}
    if args.only:
        sets = {label: items for label, items in sets.items() if label.startswith(args.only)}
    tasks = {name: load_task(TASKS / f"{name}.py") for items in sets.values() for _, name, _ in items}
    samples = {
        label: None if value == "all" else (min(int(value), 3) if args.quick else int(value))
        for label in sets
        for value in [args.baseline_sample if label == "triton" else args.baseline_cuda]
    }

    config = EvaluationConfig(
        device=device,
        timeout_s=args.timeout,
        workers=args.gpus,
        concurrency_per_worker=args.concurrency,
        compile_baseline=args.compile_baseline,
        precompiled_header=args.precompiled_header == "on",
    )
    results: dict[str, Any] = {"device": device, "gpus": args.gpus, "quick": args.quick}
    details: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        library = SolutionLibrary(Path(tmp) / "baselines.db")
        started = time.monotonic()
        pool = EvaluatorPool(config, RayConfig(), baselines=library)

        async def warm_up() -> tuple[str, list[dict[str, Any]]]:
            hardware = await pool.hardware()
            await pool.prepare(list(tasks.values()))
            # Built once per node and kept: the first run on a node pays ~40-80 s of two cores.
            return hardware.describe(), await pool.header_caches(wait_s=900)

        results["hardware"], results["header_caches"] = asyncio.run(warm_up())
        results["concurrency_per_worker"] = pool.concurrency
        results["setup_s"] = round(time.monotonic() - started, 1)
        print(
            f"{results['hardware']}: {args.gpus} actor(s) x {pool.concurrency}, "
            f"Ray + runners + baselines of {len(tasks)} tasks in {results['setup_s']} s; "
            f"precompiled header: {results['header_caches']}"
        )
        for label, items in sets.items():
            if not items:
                continue
            pairs = [(tasks[t], s) for _, t, s in items]
            pooled = asyncio.run(through_pool(pool, pairs, args.gpus))
            kinds = [k for k, _, _ in items]
            wrong = [
                (k, ev.status.value, ev.reason[:120])
                for k, ev in zip(kinds, pooled["_evaluations"], strict=True)
                if (k in ("correct", "slow")) != (ev.status.value == "correct")
            ]
            pooled["unexpected"] = wrong
            seq = sequential(pool, sample(pairs, samples[label]), args.timeout)
            pooled["vs_sequential"] = round(pooled["per_min_per_gpu"] * args.gpus / seq["per_min"], 2)
            details[label] = {
                "pool": per_evaluation(pooled.pop("_evaluations"), pooled.pop("_done_at")),
                "sequential": per_evaluation(seq.pop("_evaluations"), None),
            }
            results[label] = {"pool": pooled, "sequential": seq}
            print(
                f"{label}: pool {pooled['per_min_per_gpu']} candidates/min/GPU ({pooled['candidates']} in "
                f"{pooled['wall_s']} s, {pooled['statuses']}); sequential {seq['per_min']}/min "
                f"({seq['candidates']} in {seq['wall_s']} s); ratio {pooled['vs_sequential']}x"
            )
            print(f"  pool stage means (s): {pooled['stage_mean_s']}")
            print(f"  sequential stage means (s): {seq['stage_mean_s']}")
            print(f"  per GPU: {pooled['per_gpu']}")
            print(
                f"  timing lock held {pooled['timing_lock_busy']:.0%} of the wall time (NVML utilization "
                f"{pooled['nvml_utilization']}); early lock releases {pooled['lock_released_early']}"
            )
            if wrong:
                print(f"  unexpected verdicts: {wrong}")
        if args.details:
            args.details.write_text(json.dumps(details, indent=1))
        results["health"] = pool.health()
        pool.shutdown()
        library.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
