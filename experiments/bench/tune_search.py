"""Benchmark: the tune operator's search vs random sampling vs the exhaustive grid, at equal budgets.

    python experiments/bench/tune_search.py                     # GPU: softmax + matmul_fp16, ~3-5 min
    python experiments/bench/tune_search.py --device cpu --small --reps 3 --tasks softmax   # CPU check

Question: does evokernel's tune operator, inside a PIKE-B-style search, find >= 98 % of the best
knob setting's speed within <= 20 % of the evaluations the exhaustive grid needs?

Method. One sandboxed evaluation costs ~9 s on the GPU (process start + Triton JIT), so a grid of
~100 configurations per task through the sandbox does not fit a 10-minute GPU call. Instead:

1. The knob space of each task's bundled Triton seed is what :func:`evokernel.mutators.tune.find_knobs`
   derives, narrowed by a per-task ``space`` (the ``mutators.tune.space`` override) to <= ~110
   settings, minus those :func:`~evokernel.mutators.tune.valid_setting` rejects. The grid is every
   remaining setting; the seed's own setting is timed too (the search starts from it).
2. Every setting is checked against the reference once (``compare`` with the task's tolerance; a
   wrong or failing setting costs an evaluation and scores infinity) and timed ONCE, in this
   process, with the verifier's own timing code (``evokernel.evaluation.timing.time_callable``:
   CUDA events, L2 flush, median until the relative standard error is small), and cached.
3. The three methods are replayed against that table, ``--reps`` times with different seeds:
   * exhaustive: every grid setting; its best is the ground truth (best of grid and seed);
   * random: ``budget`` distinct grid settings drawn uniformly;
   * tune: a faithful reproduction of PIKE-B's proposal loop with the tune operator (not the
     engine itself, whose per-evaluation cost is the sandbox's): phase 0 evaluates the seed; each
     later phase makes ``branches`` proposals, branch b mutating elite ``b * top_k // branches``
     of the ``top_k`` fastest correct settings so far, through the real :class:`TuneMutator`
     with the engine's per-proposal seed (sha256 of run seed, task and proposal number) and the
     engine's ``avoid`` set (settings already evaluated). A proposal with no untried setting
     costs no evaluation. Parameters default to the quickstart's (branches=4, top_k=2).
   ``budget`` = ceil(20 % of the grid); the seed's evaluation counts against tune's budget.

Reported per task and method: the median over repetitions of best-found speed / true best speed,
the share of repetitions reaching >= 98 %, and the median evaluations to reach 98 %. The last line
of output is one JSON object. On a CPU (``--device cpu``, Triton's interpreter) timings are
interpreter timings: they test the script, not GPU performance.
"""

from __future__ import annotations

import argparse
import os
import sys

# Triton reads TRITON_INTERPRET when it is imported, so the device must be known before any import.
if __name__ == "__main__" and "--device" in sys.argv and sys.argv[sys.argv.index("--device") + 1] == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

import asyncio
import hashlib
import itertools
import json
import math
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evokernel.evaluation.correctness import compare
from evokernel.evaluation.loading import (
    build_reference,
    copy_reference_weights,
    load_module,
    make_inputs,
)
from evokernel.evaluation.timing import TimingSettings, time_callable
from evokernel.mutators.base import MutationRequest
from evokernel.mutators.tune import TuneMutator, apply_values, find_knobs, valid_setting
from evokernel.tasks import load_task, task_globals_overrides
from evokernel.types import Candidate, Evaluation, Proposal, Scored, Status, Task, source_hash

ROOT = Path(__file__).resolve().parents[2]
TASK_DIR = ROOT / "experiments" / "tasks" / "level1"
GOAL_FRACTION = 0.98
BUDGET_SHARE = 0.20
# Knob spaces per task: (full-size GPU space, --small CPU space). Full: 102, 102 and 108 settings.
SPACES: dict[str, tuple[dict[str, list[int]], dict[str, list[int]]]] = {
    "softmax": (
        {"BLOCK_SIZE": [64, 128, 256, 512, 1024, 2048, 4096, 8192], "num_warps": [1, 2, 4, 8, 16],
         "num_stages": [1, 2, 3]},
        {"BLOCK_SIZE": [32, 64, 128, 256], "num_warps": [1, 2], "num_stages": [1, 2]},
    ),
    "rmsnorm": (
        {"BLOCK_SIZE": [64, 128, 256, 512, 1024, 2048, 4096, 8192], "num_warps": [1, 2, 4, 8, 16],
         "num_stages": [1, 2, 3]},
        {"BLOCK_SIZE": [32, 64, 128, 256], "num_warps": [1, 2], "num_stages": [1, 2]},
    ),
    "matmul_fp16": (
        {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64], "num_warps": [4, 8],
         "num_stages": [2, 3, 4]},
        {"BLOCK_M": [16, 32, 64], "BLOCK_N": [16, 32, 64], "BLOCK_K": [16, 32], "num_warps": [1],
         "num_stages": [1]},
    ),
}  # fmt: skip
# Short timing: a stable median of >= 20 µs kernels, so ~100 settings fit in a minute or two.
GPU_TIMING = TimingSettings(warmup_ms=10.0, min_reps=10, max_reps=500, max_ms=200.0, target_rse=0.01)
CPU_TIMING = TimingSettings(warmup_ms=0.0, min_reps=3, max_reps=5, max_ms=50.0, target_rse=0.05)

Setting = tuple[int, ...]


@dataclass
class Table:
    """Measured runtime (ms; inf for a wrong or failing setting) of every setting of one task."""

    task: Task
    space: dict[str, list[int]]
    names: list[str]
    seed: Setting
    grid: list[Setting]
    ms: dict[Setting, float]
    failures: dict[Setting, str]
    seconds: float

    @property
    def best_ms(self) -> float:
        return min(self.ms.values())


def _load_candidate(source: str, folder: Path, name: str, module: Any, device: torch.device) -> Any:
    path = folder / f"{name}.py"
    path.write_text(source)
    cand = load_module(path, name)
    torch.manual_seed(0)
    return cand.ModelNew(*module.get_init_inputs()).to(device).eval()


def measure(task: Task, space: dict[str, list[int]], device: torch.device, scale: str) -> Table:
    """Check and time the seed's setting and every valid setting of ``space`` once."""
    assert task.seed_source is not None
    seed_src = task.seed_source
    knobs = find_knobs(seed_src, space)
    names = [k.name for k in knobs]
    grid = [s for s in itertools.product(*(k.choices for k in knobs)) if valid_setting(knobs, s)]
    seed = tuple(k.value for k in knobs)
    overrides = task_globals_overrides(task, scale, 0)
    module = load_module(Path(task.path), f"bench_task_{task.name}", overrides)
    inputs = make_inputs(module, 0, device)
    reference = build_reference(module, device)
    with torch.no_grad():
        expected = reference(*inputs)
    settings = GPU_TIMING if device.type == "cuda" else CPU_TIMING
    ms: dict[Setting, float] = {}
    failures: dict[Setting, str] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i, setting in enumerate([seed, *[s for s in grid if s != seed]]):
            source = apply_values(seed_src, knobs, list(setting))
            try:
                model = _load_candidate(source, Path(tmp), f"bench_{task.name}_{i}", module, device)
                copy_reference_weights(reference, model)
                with torch.no_grad():
                    got = model(*inputs)
                    verdict = compare(got, expected, task.tolerance)
                    if not verdict.ok:
                        raise ValueError(verdict.message)
                    ms[setting] = time_callable(lambda m=model: m(*inputs), device, settings).median_ms
            except Exception as exc:  # noqa: BLE001 - any failure of a setting is its result
                ms[setting] = math.inf
                failures[setting] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[
                    :200
                ]
            finally:
                sys.modules.pop(f"bench_{task.name}_{i}", None)
    return Table(task, space, names, seed, grid, ms, failures, time.perf_counter() - start)


def replay_random(table: Table, budget: int, rng: random.Random) -> list[float]:
    """Best-so-far runtime after each evaluation."""
    return _best_so_far([table.ms[s] for s in rng.sample(table.grid, min(budget, len(table.grid)))])


def replay_tune(
    table: Table, budget: int, rep: int, branches: int, top_k: int, max_changes: int
) -> list[float]:
    """PIKE-B's proposal loop with the tune operator (see the module docstring)."""
    task, seed_src = table.task, table.task.seed_source
    assert seed_src is not None
    space = table.space
    tuner = TuneMutator(max_changes=max_changes, space=space)
    knobs = find_knobs(seed_src, space)
    evaluated: dict[str, tuple[Scored, float]] = {}
    order: list[float] = []
    seq = 0

    def evaluate(source: str) -> None:
        setting = tuple(k.value for k in find_knobs(source, space))
        runtime = table.ms.get(setting)
        if runtime is None:
            raise RuntimeError(f"tune proposed {setting}, which was not measured")
        status = Status.CORRECT if math.isfinite(runtime) else Status.RUNTIME_ERROR
        ev = Evaluation(status, runtime_ms=runtime if math.isfinite(runtime) else None)
        cand = Candidate(len(evaluated) + 1, "bench", task.name, seq, 0, 0, "tune", (), source)
        evaluated[source_hash(source)] = (Scored(cand, ev), runtime)
        order.append(runtime)

    evaluate(apply_values(seed_src, knobs, list(table.seed)))
    stalled = 0
    while len(order) < budget and stalled < 3:
        elites = sorted((v for v in evaluated.values() if math.isfinite(v[1])), key=lambda v: v[1])[:top_k]
        if not elites:
            break
        made = 0
        for b in range(branches):
            if len(order) >= budget:
                break
            seq += 1
            parent = elites[b * len(elites) // branches][0]
            digest = hashlib.sha256(f"{rep}|{task.name}|{seq}".encode()).digest()
            request = MutationRequest(
                proposal=Proposal(task=task.name, operator="tune", parents=(parent.candidate.id,), seq=seq),
                task=task,
                parents=(parent,),
                rng_seed=int.from_bytes(digest[:8], "big"),
                avoid=frozenset(evaluated),
            )
            result = asyncio.run(tuner.mutate(request))
            if result.source is not None and source_hash(result.source) not in evaluated:
                evaluate(result.source)
                made += 1
        stalled = 0 if made else stalled + 1
    return _best_so_far(order)


def _best_so_far(runtimes: list[float]) -> list[float]:
    return list(itertools.accumulate(runtimes, min))


def _summarise(curves: list[list[float]], truth: float) -> dict[str, Any]:
    fractions = [truth / c[-1] if c and math.isfinite(c[-1]) else 0.0 for c in curves]
    to_goal = [next((i + 1 for i, v in enumerate(c) if truth / v >= GOAL_FRACTION), math.inf) for c in curves]
    reached = [n for n in to_goal if math.isfinite(n)]
    return {
        "median_fraction_of_best": round(statistics.median(fractions), 4),
        "min_fraction_of_best": round(min(fractions), 4),
        "share_reaching_98pct": round(len(reached) / len(curves), 3),
        "median_evals_to_98pct": statistics.median(to_goal) if len(reached) * 2 > len(curves) else None,
        "evaluations": statistics.median(len(c) for c in curves),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--small", action="store_true", help="small task sizes and tiny grids (CPU check)")
    parser.add_argument("--tasks", nargs="+", default=["softmax", "matmul_fp16"], choices=sorted(SPACES))
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--branches", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--max-changes", type=int, default=2)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA GPU here: use --device cpu --small to check the script on a CPU")
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        parser.error("--device cpu needs TRITON_INTERPRET=1 set before Triton is imported")
    device = torch.device(args.device)
    scale = "small" if args.small else "full"
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "CPU (Triton interpreter)"
    print(f"tune_search on {name}, scale={scale}, reps={args.reps}", flush=True)
    out: dict[str, Any] = {}
    for task_name in args.tasks:
        task = load_task(TASK_DIR / f"{task_name}.py")
        table = measure(task, SPACES[task_name][1 if args.small else 0], device, scale)
        truth = table.best_ms
        if not math.isfinite(truth):
            raise SystemExit(f"{task_name}: every setting failed, e.g. {next(iter(table.failures.values()))}")
        budget = math.ceil(BUDGET_SHARE * len(table.grid))
        best = min(table.ms, key=lambda s: table.ms[s])
        random_curves = [replay_random(table, budget, random.Random(rep)) for rep in range(args.reps)]
        tune_curves = [
            replay_tune(table, budget, rep, args.branches, args.top_k, args.max_changes)
            for rep in range(args.reps)
        ]
        exhaustive = _best_so_far([table.ms[s] for s in table.grid])
        out[task_name] = {
            "knobs": table.names,
            "grid": len(table.grid),
            "failed_settings": len(table.failures),
            "budget": budget,
            "best_ms": round(truth, 5),
            "best_setting": dict(zip(table.names, best, strict=True)),
            "seed_ms": round(table.ms[table.seed], 5),
            "measure_s": round(table.seconds, 1),
            "tune": _summarise(tune_curves, truth),
            "random": _summarise(random_curves, truth),
            "exhaustive": _summarise([exhaustive], truth),
        }
        row = out[task_name]
        print(
            f"{task_name}: grid {row['grid']} ({row['failed_settings']} failed), budget {budget}; "
            f"best {truth:.4g} ms at {row['best_setting']}, seed {row['seed_ms']:.4g} ms; measured in "
            f"{table.seconds:.0f} s",
            flush=True,
        )
        for method in ("tune", "random"):
            r = row[method]
            print(
                f"  {method:6s} median {r['median_fraction_of_best']:.1%} of best "
                f"(min {r['min_fraction_of_best']:.1%}), "
                f"{r['share_reaching_98pct']:.0%} of reps reach 98 %, median evals to 98 %: "
                f"{r['median_evals_to_98pct']}",
                flush=True,
            )
    goal = all(row["tune"]["median_fraction_of_best"] >= GOAL_FRACTION for row in out.values())
    summary = {"bench": "tune_search", "device": name, "scale": scale, "reps": args.reps, "goal_met": goal}
    print(json.dumps({**summary, "tasks": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
