"""Benchmark: the tune operator's search vs random sampling vs the exhaustive grid, at equal budgets.

    python experiments/bench/tune_search.py                     # GPU: softmax + matmul_fp16, ~3-5 min
    python experiments/bench/tune_search.py --device cpu --small --reps 3 --tasks softmax   # CPU check
    python experiments/bench/tune_search.py --tasks softmax rmsnorm matmul_fp16 --save-table t.json
    python experiments/bench/tune_search.py --table t.json     # replay a saved table: CPU, seconds
    python experiments/bench/tune_search.py --table experiments/bench/data/tune_tables_h100_heldout.json

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
3. The methods are replayed against that table, ``--reps`` times with different run seeds:
   * exhaustive: every grid setting; its best is the ground truth (best of grid and seed);
   * random: ``budget`` distinct grid settings drawn uniformly;
   * tune: a real evokernel run -- :func:`evokernel.run.runner.run_experiment` with the engine, the
     PIKE-B strategy (branches=4, top_k=2: the quickstart's), a SQLite library and the
     :class:`TuneMutator` with ``search=model`` -- whose evaluator answers from the table instead
     of the sandbox (:class:`TableEvaluator`). So the requests the mutator sees (parents, the
     ``history`` of earlier generations, ``avoid``, ``rng_seed``) are built by the engine exactly
     as in a run; a proposal with no untried setting costs no evaluation;
   * tune_random_step: the same run with ``search=random`` (the plain local-search move).
   ``budget`` = ceil(20 % of the grid); the seed's evaluation counts against both tune budgets.

``--save-table PATH`` writes the measured table (every setting's correctness and median time per
task, with the device and library versions) as JSON; ``--table PATH`` replays the searches against
such a file without measuring anything, so search methods can be compared on real GPU tables on
any machine.

Reported per task and method: the median over repetitions of best-found speed / true best speed,
the share of repetitions reaching >= 98 %, and the median evaluations to reach 98 %. The goal is
met when tune's median repetition reaches >= 98 % on every task of the run and the run has at
least two tasks (``goal_met`` and ``goal`` in the JSON). The last line of output is one JSON
object. On a CPU (``--device cpu``, Triton's interpreter) timings are interpreter timings: they
test the script, not GPU performance.
"""

from __future__ import annotations

import argparse
import os
import sys

# Triton reads TRITON_INTERPRET when it is imported, so the device must be known before any import.
if __name__ == "__main__" and "--device" in sys.argv and sys.argv[sys.argv.index("--device") + 1] == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

import functools
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

from evokernel.config.schema import ExperimentConfig, TuneConfig
from evokernel.conformance import InstantHardware, QuietReporter
from evokernel.db import SolutionLibrary
from evokernel.evaluation.clocks import gpu_clocks
from evokernel.evaluation.correctness import compare
from evokernel.evaluation.loading import (
    build_reference,
    copy_reference_weights,
    load_module,
    make_inputs,
)
from evokernel.evaluation.timing import TimingSettings, time_callable
from evokernel.mutators.tune import SEARCHES, apply_values, find_knobs, valid_setting
from evokernel.mutators.tune_model import Setting
from evokernel.mutators.tune_space import Knob
from evokernel.run.runner import run_experiment
from evokernel.tasks import load_task, task_globals_overrides
from evokernel.types import Evaluation, Status, Task

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
GPU_TIMING = TimingSettings(
    warmup_ms=10.0, min_reps=10, min_ms=0.0, max_reps=500, max_ms=200.0, target_rse=0.01
)
CPU_TIMING = TimingSettings(warmup_ms=0.0, min_reps=3, max_reps=5, max_ms=50.0, target_rse=0.05)


TABLE_FORMAT = "evokernel.tune_table/1"


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

    def to_json(self) -> dict[str, Any]:
        rows = [
            {
                "values": list(s),
                "ms": self.ms[s] if math.isfinite(self.ms[s]) else None,
                **({"error": self.failures[s]} if s in self.failures else {}),
            }
            for s in [self.seed, *[g for g in self.grid if g != self.seed]]
        ]
        return {
            "knobs": self.names,
            "space": self.space,
            "seed": list(self.seed),
            "grid_size": len(self.grid),
            "measure_s": round(self.seconds, 1),
            "settings": rows,
        }

    @classmethod
    def from_json(cls, task: Task, data: dict[str, Any]) -> Table:
        """Rebuild a saved table; the grid is re-derived from the task's seed and checked against it."""
        assert task.seed_source is not None
        space = {k: [int(v) for v in vs] for k, vs in data["space"].items()}
        knobs = find_knobs(task.seed_source, space)
        names = [k.name for k in knobs]
        seed = tuple(k.value for k in knobs)
        if names != data["knobs"] or list(seed) != data["seed"]:
            raise SystemExit(
                f"{task.name}: the saved table's knobs {data['knobs']} = {data['seed']} do not match the "
                f"seed's {names} = {list(seed)}: the seed changed since it was measured; measure it again"
            )
        ms = {tuple(r["values"]): (math.inf if r["ms"] is None else float(r["ms"])) for r in data["settings"]}
        failures = {tuple(r["values"]): r["error"] for r in data["settings"] if "error" in r}
        grid = _grid(knobs)
        missing = [s for s in [seed, *grid] if s not in ms]
        if missing:
            raise SystemExit(f"{task.name}: the saved table lacks {len(missing)} settings, e.g. {missing[0]}")
        return cls(task, space, names, seed, grid, ms, failures, float(data.get("measure_s", 0.0)))


def _grid(knobs: list[Knob]) -> list[Setting]:
    return [s for s in itertools.product(*(k.choices for k in knobs)) if valid_setting(knobs, s)]


def environment(device: torch.device) -> dict[str, Any]:
    """Where a table was measured: device name and the library versions its timings depend on."""
    import platform

    import triton

    env: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if device.type == "cuda":
        env["clocks"] = gpu_clocks(device)
    return env


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
    grid = _grid(knobs)
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
                    ms[setting] = time_callable(functools.partial(model, *inputs), device, settings).median_ms
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


class TableEvaluator:
    """The engine's evaluator, answered from a measured table: a setting's runtime, or a failure
    for a setting that failed when measured. A source the table lacks is a bug of the benchmark."""

    size = 4

    def __init__(self, table: Table, device: str) -> None:
        self.table = table
        self.device = device

    async def hardware(self) -> InstantHardware:
        return InstantHardware(self.device)

    def health(self) -> dict[str, Any]:
        return {}

    async def evaluate(self, task: Task, source: str, *, tenant: str = "", priority: int = 0) -> Evaluation:
        setting = tuple(k.value for k in find_knobs(source, self.table.space))
        runtime = self.table.ms.get(setting)
        if runtime is None:
            raise RuntimeError(f"{task.name}: the search proposed {setting}, which was not measured")
        if not math.isfinite(runtime):
            return Evaluation(Status.RUNTIME_ERROR, reason=self.table.failures.get(setting, "failed"))
        eager = self.table.ms[self.table.seed]  # speedups relative to the seed: only their order matters
        return Evaluation(
            Status.CORRECT,
            runtime_ms=runtime,
            eager_ms=eager,
            speedup_eager=eager / runtime,
            device=self.device,
        )


def replay_engine(
    table: Table, budget: int, rep: int, search: str, args: argparse.Namespace, library: Path, device: str
) -> list[float]:
    """Best-so-far runtime after each evaluation of a real evokernel run (engine, PIKE-B, tune)."""
    config = ExperimentConfig(
        name=f"tune_search_{search}", seed=rep, tasks=[table.task.path], library=str(library)
    )
    config.strategy.name = "pike_b"
    config.strategy.params = {"branches": args.branches, "top_k": args.top_k}
    config.budget.evaluations = budget
    config.mutators.tune = TuneConfig(search=search, max_changes=args.max_changes, space=table.space)
    # No LLM configured: the run builds the tune mutator from config.mutators.tune, as a user's would.
    summary = run_experiment(
        config, reporter=QuietReporter(), pool=TableEvaluator(table, device), tasks=[table.task]
    )
    lib = SolutionLibrary(library)
    try:
        scored = lib.candidates(summary.run_id, table.task.name)
    finally:
        lib.close()
    runtimes = [
        sc.evaluation.runtime_ms
        if sc.evaluation is not None and sc.evaluation.ok and sc.evaluation.runtime_ms is not None
        else math.inf
        for sc in scored
    ]
    return _best_so_far(runtimes)


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
    parser.add_argument("--tasks", nargs="+", choices=sorted(SPACES), help="default: softmax matmul_fp16")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--branches", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--max-changes", type=int, default=2)
    parser.add_argument("--save-table", type=Path, help="write the measured tables to this JSON file")
    parser.add_argument(
        "--table", type=Path, help="replay the tables saved in this JSON file; measure nothing"
    )
    args = parser.parse_args(argv)
    saved: dict[str, Any] | None = None
    if args.table is not None:
        if args.save_table is not None:
            parser.error("--table replays a saved table; --save-table needs a measurement")
        try:
            saved = json.loads(args.table.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            parser.error(f"cannot read the table {args.table}: {exc}")
        if saved.get("format") != TABLE_FORMAT:
            parser.error(f"{args.table} is not a tune_search table (format {saved.get('format')!r})")
        tasks = args.tasks or list(saved["tasks"])
        absent = [t for t in tasks if t not in saved["tasks"]]
        if absent:
            parser.error(f"{args.table} has no table for {absent}; it has {sorted(saved['tasks'])}")
        name, scale = saved["environment"]["device"], saved["scale"]
    else:
        if args.device == "cuda" and not torch.cuda.is_available():
            parser.error("no CUDA GPU here: use --device cpu --small to check the script on a CPU")
        if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            parser.error("--device cpu needs TRITON_INTERPRET=1 set before Triton is imported")
        tasks = args.tasks or ["softmax", "matmul_fp16"]
        device = torch.device(args.device)
        scale = "small" if args.small else "full"
        name = torch.cuda.get_device_name(0) if device.type == "cuda" else "CPU (Triton interpreter)"
        to_save: dict[str, Any] = {
            "format": TABLE_FORMAT,
            "environment": environment(device),
            "scale": scale,
            "tasks": {},
        }
    source = f"table {args.table}" if args.table is not None else "measured"
    print(f"tune_search on {name} ({source}), scale={scale}, reps={args.reps}", flush=True)
    out: dict[str, Any] = {}
    tmp = tempfile.mkdtemp(prefix="tune_search_")  # one SQLite library for every replayed run
    tables: dict[str, Table] = {}
    for task_name in tasks:  # every table first: a search that fails cannot cost a measurement
        task = load_task(TASK_DIR / f"{task_name}.py")
        if saved is not None:
            tables[task_name] = Table.from_json(task, saved["tasks"][task_name])
        else:
            tables[task_name] = measure(task, SPACES[task_name][1 if scale == "small" else 0], device, scale)
            if args.save_table is not None:  # after every task: a cut-off run keeps what it measured
                to_save["tasks"][task_name] = tables[task_name].to_json()
                args.save_table.write_text(json.dumps(to_save, indent=1) + "\n")
    for task_name, table in tables.items():
        truth = table.best_ms
        if not math.isfinite(truth):
            raise SystemExit(f"{task_name}: every setting failed, e.g. {next(iter(table.failures.values()))}")
        budget = math.ceil(BUDGET_SHARE * len(table.grid))
        best = min(table.ms, key=lambda s: table.ms[s])
        random_curves = [replay_random(table, budget, random.Random(rep)) for rep in range(args.reps)]
        curves = {
            search: [
                replay_engine(table, budget, rep, search, args, Path(tmp) / "runs.db", name)
                for rep in range(args.reps)
            ]
            for search in SEARCHES
        }
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
            "tune": _summarise(curves["model"], truth),
            "tune_random_step": _summarise(curves["random"], truth),
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
        for method in ("tune", "tune_random_step", "random"):
            r = row[method]
            print(
                f"  {method:16s} median {r['median_fraction_of_best']:.1%} of best "
                f"(min {r['min_fraction_of_best']:.1%}), "
                f"{r['share_reaching_98pct']:.0%} of reps reach 98 %, median evals to 98 %: "
                f"{r['median_evals_to_98pct']}",
                flush=True,
            )
    goal = len(out) >= 2 and all(
        row["tune"]["median_fraction_of_best"] >= GOAL_FRACTION for row in out.values()
    )
    summary = {
        "bench": "tune_search",
        "device": name,
        "source": source,
        "scale": scale,
        "reps": args.reps,
        "goal_met": goal,
        "goal": f"tune's median repetition reaches >= {GOAL_FRACTION:.0%} of the exhaustive best within "
        f"ceil({BUDGET_SHARE:.0%} of the grid) evaluations on every task, with >= 2 tasks",
    }
    print(json.dumps({**summary, "tasks": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
