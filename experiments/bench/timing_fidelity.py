"""Timing fidelity on a GPU: do evokernel's medians and speedups reproduce across fresh processes?

    python3 experiments/bench/timing_fidelity.py [--details PATH]   # on the GPU machine, ~2 min
    python3 experiments/bench/timing_fidelity.py --kernels softmax,rmsnorm   # a subset, by name

For 11 kernels (the 8 bundled Triton seeds at full size, all >= 50 us of eager work, and three
tiny launch-bound ones: axpy at n = 65536 with two block sizes and leaky ReLU at 16 x 256), it
starts RUNS fresh processes. Each one builds every (reference, candidate) pair and times both on
the same inputs, in this order:

* **ours**: evokernel's method exactly as the verifier runs it (``time_callable`` with the
  default ``TimingConfig``: clock-settling warmup, L2 flush before every call, repetitions until
  the median's relative standard error is under 0.2 % over at least 100 ms), the candidate first,
  then the eager reference the way baselines are timed (the same loop over at least 1 s,
  ``TimingSettings.for_baseline``); runtime and speedup are the figures the verifier reports
  (``comparable``: CUDA-graph per-call figures when both sides are launch-bound, flushed event
  medians otherwise).
* **win**: the same candidate figure, with the eager reference timed exactly like a candidate
  (the 100 ms window, method settled-3): what the longer baseline window buys, side by side.
* **paired**: candidate and eager timed in alternating batches of 10 flushed calls in one loop
  (ABAB), which cancels slow clock/thermal drift between the two sides (diagnostic for the
  speedup-spread hypothesis; the verifier cannot pair, see docs/benchmarks.md).
* **kb**: a KernelBench-style comparator implemented here: 3 warmup calls, 100 timed calls each
  bracketed by CUDA events after an L2 flush, the mean.

Spread = (max - min) / median over the RUNS processes, per kernel, for the runtime and for the
speedup (eager / candidate). Diagnostics per kernel and run (p10/p50/p90, warmup length and
whether the clock settled, SM clock from NVML) are printed and, with ``--details``, written in
full. The last printed line is one JSON object with the figures and ``goal_met``: runtime spread
<= 1 % and speedup spread <= 2 % for the >= 50 us kernels, each better than the comparator.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RUNS = 5
TASKS = ROOT / "experiments" / "tasks"
TINY = [
    ("axpy_block64", ROOT / "tests/fixtures/tasks/axpy.py", ROOT / "tests/fixtures/tasks/axpy.seed.py", {}),
    (
        "axpy_block1024",
        ROOT / "tests/fixtures/tasks/axpy.py",
        ROOT / "tests/fixtures/legit/axpy_block1024.py",
        {},
    ),
    (
        "leaky_relu_small",
        TASKS / "level1/leaky_relu.py",
        ROOT / "tests/fixtures/legit/leaky_relu_flat.py",
        {"batch_size": 16, "dim": 256},
    ),
]
KB_WARMUP, KB_CALLS = 3, 100
PAIRED_MIN_BATCHES, PAIRED_MAX_MS = 5, 400.0
METHODS = ("ours", "win", "paired", "kb")


def kernels(only: list[str] | None = None) -> list[tuple[str, Path, Path, dict[str, Any]]]:
    from evokernel.tasks import load_tasks

    seeded: list[tuple[str, Path, Path, dict[str, Any]]] = [
        (t.name, Path(t.path), Path(t.seed_path), {}) for t in load_tasks(TASKS) if t.seed_path
    ]
    every = seeded + TINY
    if only is None:
        return every
    unknown = sorted(set(only) - {k[0] for k in every})
    if unknown:
        raise SystemExit(f"unknown kernels {unknown}; known: {', '.join(k[0] for k in every)}")
    return [k for k in every if k[0] in only]


def _only() -> list[str] | None:
    return sys.argv[sys.argv.index("--kernels") + 1].split(",") if "--kernels" in sys.argv else None


def kernelbench_mean_ms(fn: Callable[[], Any], device: Any) -> float:
    import torch

    from evokernel.evaluation.timed_calls import L2_FLUSH_BYTES

    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
    for _ in range(KB_WARMUP):
        fn()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(KB_CALLS):
        flush.zero_()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
        times.append(begin.elapsed_time(end))
    return statistics.fmean(times)


def paired_medians(fns: dict[str, Callable[[], Any]], device: Any, target_rse: float) -> dict[str, float]:
    """Alternating batches of flushed, event-timed calls of each callable (already warm)."""
    import torch

    from evokernel.evaluation.timed_calls import L2_FLUSH_BYTES, collect_batch, enqueue_batch
    from evokernel.evaluation.timing import median_rse

    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device)
    samples: dict[str, list[float]] = {k: [] for k in fns}
    start = time.perf_counter()
    for batch in range(1, 10_000):
        for k, fn in fns.items():
            samples[k] += collect_batch(enqueue_batch(fn, flush), device)
        stable = all(median_rse(s) < target_rse for s in samples.values())
        if batch >= PAIRED_MIN_BATCHES and (stable or (time.perf_counter() - start) * 1e3 > PAIRED_MAX_MS):
            break
    return {k: statistics.median(s) for k, s in samples.items()}


def once() -> dict[str, Any]:
    """One fresh process: every kernel timed by every method."""
    import torch

    from evokernel.config.schema import TimingConfig
    from evokernel.evaluation.clocks import clock_state, gpu_clocks
    from evokernel.evaluation.loading import build_reference, copy_reference_weights, load_module, make_inputs
    from evokernel.evaluation.timing import TimingSettings, comparable, time_callable

    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ours = TimingSettings(**asdict(TimingConfig()))
    baseline = ours.for_baseline()
    out: dict[str, Any] = {
        "clocks": gpu_clocks(device),
        "nvml_at_start": clock_state(device),
        "loadavg_at_start": os.getloadavg(),
        "kernels": {},
    }
    for name, task_path, cand_path, overrides in kernels(_only()):
        task = load_module(task_path, f"task_{name}", overrides)
        cand = load_module(cand_path, f"cand_{name}")
        reference = build_reference(task, device)
        torch.manual_seed(0)
        candidate = cand.ModelNew(*task.get_init_inputs()).to(device).eval()
        copy_reference_weights(reference, candidate)
        inputs = make_inputs(task, 0, device)
        calls: dict[str, Callable[[], Any]] = {
            "cand": functools.partial(candidate, *inputs),
            "eager": functools.partial(reference, *inputs),
        }
        row: dict[str, Any] = {}
        with torch.no_grad():
            # The verifier's order: the candidate, then its baseline.
            row["ours_cand"] = time_callable(calls["cand"], device, ours).to_dict()
            row["ours_eager"] = time_callable(calls["eager"], device, baseline).to_dict()
            cand_ms, eager_ms, method = comparable(row["ours_cand"], row["ours_eager"])
            row.update(ours_cand_ms=cand_ms, ours_eager_ms=eager_ms, ours_method=method)
            row["win_eager"] = time_callable(calls["eager"], device, ours).to_dict()
            _, win_eager_ms, _ = comparable(row["ours_cand"], row["win_eager"])
            row.update(win_cand_ms=cand_ms, win_eager_ms=win_eager_ms)
            paired = paired_medians(calls, device, ours.target_rse)
            row.update(paired_cand_ms=paired["cand"], paired_eager_ms=paired["eager"])
            for label, call in calls.items():
                row[f"kb_{label}_ms"] = kernelbench_mean_ms(call, device)
        out["kernels"][name] = row
    out["loadavg_at_end"] = os.getloadavg()
    return out


def spread(values: list[float]) -> float:
    return 100 * (max(values) - min(values)) / statistics.median(values)


def spreads(k: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-kernel spreads (%) over the runs, for every method."""
    row: dict[str, Any] = {
        "eager_us": round(1000 * statistics.median(x["ours_eager"]["median_ms"] for x in k), 2),
        "cand_us": round(1000 * statistics.median(x["ours_cand"]["median_ms"] for x in k), 2),
        "method": k[0]["ours_method"],
    }
    for m in METHODS:
        cand = [x[f"{m}_cand_ms"] for x in k]
        eager = [x[f"{m}_eager_ms"] for x in k]
        row[f"{m}_rt"] = round(spread(cand), 3)
        row[f"{m}_eager_rt"] = round(spread(eager), 3)
        row[f"{m}_sp"] = round(spread([e / c for e, c in zip(eager, cand, strict=True)]), 3)
    row["ours_event_rt"] = round(spread([x["ours_cand"]["median_ms"] for x in k]), 3)
    graph = [x["ours_cand"]["graph_median_ms"] for x in k]
    row["ours_graph_rt"] = round(spread(graph), 3) if all(graph) else None
    row["ours_cand_reps"] = statistics.median(x["ours_cand"]["reps"] for x in k)
    row["ours_cand_s"] = round(statistics.median(x["ours_cand"]["seconds"] for x in k), 3)
    row["ours_eager_s"] = round(statistics.median(x["ours_eager"]["seconds"] for x in k), 3)
    return row


def diagnostic(x: dict[str, Any]) -> str:
    """One run of one side: median us [p90-p10 as % of p50, warmup ms + s(ettled)/u(nsettled), SM MHz
    at the start of timing / lowest while timing, reasons the clock was held back]."""
    c = x.get("clock") or {}
    width = 100 * (x["p90_ms"] - x["p10_ms"]) / x["median_ms"]
    why = ",".join(c.get("reasons") or []) or "-"
    return (
        f"{1000 * x['median_ms']:.2f}[{width:.1f}% w{x['warmup_ms']:.0f}{'s' if x['settled'] else 'u'} "
        f"{c.get('start_sm_mhz')}/{c.get('min_sm_mhz')} {why}]"
    )


def main() -> int:
    if "--once" in sys.argv:
        print(json.dumps(once()))
        return 0
    details_path = Path(sys.argv[sys.argv.index("--details") + 1]) if "--details" in sys.argv else None
    start = time.perf_counter()
    runs = []
    for i in range(RUNS):
        proc = subprocess.run(
            [sys.executable, __file__, "--once", *sys.argv[1:]],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return 1
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"run {i + 1}/{RUNS} done ({time.perf_counter() - start:.0f} s)", flush=True)
        if details_path:  # after every run: a run cut off by a time limit keeps what it measured
            details_path.write_text(json.dumps(runs, indent=1))
    summary = report(runs)
    summary["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(summary))
    return 0


def report(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Print the diagnostics and the spread table; return the summary for the JSON line."""
    names = list(runs[0]["kernels"])
    per_kernel = {n: spreads([r["kernels"][n] for r in runs]) for n in names}
    print("diagnostics per run: median us [p90-p10 %, warmup ms s/u, SM MHz start/min, clock reasons]")
    for n in names:
        for side in ("cand", "eager"):
            cells = " ".join(diagnostic(r["kernels"][n][f"ours_{side}"]) for r in runs)
            print(f"  {n[:22]:<22} {side:<5} {cells}")
            graph = [r["kernels"][n][f"ours_{side}"]["graph_median_ms"] for r in runs]
            if any(graph):
                cells = " ".join("-" if g is None else f"{1000 * g:.3f}" for g in graph)
                print(f"  {n[:22]:<22} {side:<5} CUDA-graph per-call us: {cells}")
    print("spread % over runs (rt = runtime, sp = speedup):")
    cols = ["ours_rt", "ours_eager_rt", "ours_sp", "win_eager_rt", "win_sp", "paired_sp", "kb_rt", "kb_sp"]
    print(f"{'kernel':<24}{'eager us':>9}{'cand us':>9}" + "".join(f"{c:>14}" for c in cols) + "  method")
    for n, row in per_kernel.items():
        print(
            f"{n[:23]:<24}{row['eager_us']:>9.1f}{row['cand_us']:>9.1f}"
            + "".join(f"{row[c]:>14.2f}" for c in cols)
            + f"  {row['method']}, {row['ours_cand_reps']:.0f} reps in {row['ours_cand_s']} s"
        )
    long = [r for r in per_kernel.values() if r["cand_us"] >= 50]
    tiny = [r for r in per_kernel.values() if r["cand_us"] < 50]

    def worst(rows: list[dict[str, Any]], key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return round(max(values), 3) if values else None

    summary: dict[str, Any] = {"runs": len(runs), "kernels": len(per_kernel), "kernels_ge_50us": len(long)}
    for m in METHODS:
        for key in ("rt", "sp"):
            summary[f"{m}_max_{key}_spread_pct_ge_50us"] = worst(long, f"{m}_{key}")
            summary[f"{m}_max_{key}_spread_pct_tiny"] = worst(tiny, f"{m}_{key}")
    summary["ours_max_event_rt_spread_pct_tiny"] = worst(tiny, "ours_event_rt")
    rt, sp = summary["ours_max_rt_spread_pct_ge_50us"], summary["ours_max_sp_spread_pct_ge_50us"]
    summary["goal_met"] = bool(
        long
        and rt <= 1.0
        and sp <= 2.0
        and rt < summary["kb_max_rt_spread_pct_ge_50us"]
        and sp < summary["kb_max_sp_spread_pct_ge_50us"]
    )
    cost = [x["ours_cand"]["seconds"] for r in runs for x in r["kernels"].values()]
    summary["timing_seconds_per_candidate"] = {
        "median": round(statistics.median(cost), 3),
        "max": round(max(cost), 3),
    }
    summary["nvml_first_run"] = runs[0]["nvml_at_start"]
    # 1-minute load averages at the start and end of each process: was the host busy?
    summary["loadavg_1min"] = [[r["loadavg_at_start"][0], r["loadavg_at_end"][0]] for r in runs]
    summary["per_kernel"] = {
        n: {
            k: row[k]
            for k in (
                "eager_us",
                "cand_us",
                "method",
                "ours_rt",
                "ours_sp",
                "win_sp",
                "kb_rt",
                "kb_sp",
            )
        }
        for n, row in per_kernel.items()
    }
    return summary


if __name__ == "__main__":
    sys.exit(main())
