"""What puts a tiny host-bound eager reference in its slow mode? (issue 35)

VanillaRNN's reference (level 3, task 33) timed ~0.024 ms a call in some windows of one run and
~0.048 ms in others, while the window's dispatch probe and CPU spin stayed flat (benchmarks.md,
session 22). Phase 1 times the reference as the timing stage does (BlockTimer: an L2 flush and
CUDA events per call, the stage's two input sets in turn) in windows of blocks of ~10 ms of calls
with random idle gaps between them, records per block the median, the host's issue time per call,
the SM clock and the CPU, and splits blocks into fast and slow modes. Phase 2 times more windows
under torch.profiler and compares the modes' GPU kernel time (the clock), GPU idle gaps between a
call's kernels (the host), launch API time (the driver) and CPU ops (the dispatcher).

    python3 experiments/bench/reference_modes.py --task CORPUS/tasks/33_VanillaRNN.py \\
        [--windows 60] [--trace-windows 12] [--device cuda] [--save-traces --out DIR] [--call-start idle]

With ``--call-start idle`` (session 25) each call starts after its flush has finished: if the
modes are the flush hiding part of the host's issue time (timed_calls.py, "Where a call starts"),
they are gone there and the block medians sit near the host's issue time.

Prints the phase summaries and the profiled comparison, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import os
import random
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from evokernel.evaluation.block_timer import MAX_BLOCK_CALLS, BlockTimer
from evokernel.evaluation.cpu_pin import current_cpu
from evokernel.evaluation.host_clock import dispatch_us
from evokernel.evaluation.loading import build_reference, clone, load_module, make_inputs
from evokernel.evaluation.timing import TimingSettings
from evokernel.evaluation.timing_stage import TIMING_SEEDS
from evokernel.evaluation.worker_timing import copy_values

GAP_S = (0.2, 1.5)  # in a pool a window comes after other work or idle, for a varying time
BLOCKS = 4
BIMODAL_RATIO = 1.3  # p90 / p10 of block medians above this: two modes worth splitting
MARK = "reference_call"  # the record_function range around each profiled call
LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
# The profiled comparison's rows, per call: event-timed ms, host us inside the call, device ops and
# their us, idle device us between a call's ops, launch-to-start us, launch APIs, all runtime API us.
_GPU = ("gpu_ops", "gpu_us", "gap_us", "latency_us")
METRICS = ("ms", "host_us", *_GPU, "launches", "launch_us", "runtime_us", "sm_mhz")
WINDOW_KEYS = ("ms", "issue_ms", "sm_mhz", "cpu")
# A mode's figures (phase 1), each the median over its blocks: name -> the block row's key.
SUMMARY = {"median_ms": "ms", "issue_ms": "issue_ms", "sm_mhz": "sm_mhz", "idle_before_s": "idle_s"}
SUMMARY |= {"dispatch_us": "dispatch_us", "cpu_share": "cpu_share", "wait_share": "wait_share"}


def med(values: list[Any]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(statistics.median(kept), 4) if kept else None


def split(values: list[float]) -> float | None:
    """The geometric midpoint of p10 and p90, or None when they are within BIMODAL_RATIO."""
    if len(values) < 2:
        return None
    cuts = statistics.quantiles(values, n=10, method="inclusive")
    p10, p90 = cuts[0], cuts[-1]
    return math.sqrt(p10 * p90) if p10 > 0 and p90 / p10 > BIMODAL_RATIO else None


def mode_of(ms: float, threshold: float | None) -> str:
    return "all" if threshold is None else ("slow" if ms > threshold else "fast")


def run_window(timer: BlockTimer, calls: int, window: int, idle_s: float) -> list[dict[str, Any]]:
    """BLOCKS blocks of ``calls``; the host and clock figures are BlockTimer's own for each block
    (its issue time is a call's own, from its first event to its last; its SM clock was read
    while the block ran)."""
    rows = []
    for b in range(BLOCKS):
        seen = len(timer._sm_mhz)
        samples = timer.block(calls)
        wall, cpu, wait = timer._host[-1]
        rows.append(
            {
                "window": window,
                "block": b,
                "idle_s": round(idle_s, 3),
                "ms": statistics.median(samples),
                "issue_ms": timer.call_issue_ms[-1],
                "cpu_share": cpu / max(wall, 1),  # of the issuing, on a CPU (the rest: off it)
                "wait_share": wait / max(wall, 1),  # runnable on a run queue
                "sm_mhz": timer._sm_mhz[-1] if len(timer._sm_mhz) > seen else None,
                "cpu": current_cpu(),
            }
        )
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    figures = {name: med([r[key] for r in rows]) for name, key in SUMMARY.items()}
    return {"blocks": len(rows), **figures, "cpus": sorted({r["cpu"] for r in rows})}


def trace_figures(prof: profile, calls: int) -> dict[str, Any]:
    """Per call figures of the reference's own work: CPU events inside a MARK range, and the
    device events launched from there (matched by CUPTI correlation id to the launching runtime
    call, or by the launching op's id): the flush and input refills outside MARK are left out."""
    events = list(prof.events() or [])
    cpu = [e for e in events if e.device_type == DeviceType.CPU and not e.is_async]
    marks = sorted((e.time_range.start, e.time_range.end) for e in cpu if e.name == MARK)
    starts = [m[0] for m in marks]

    def call_of(t: float) -> int | None:
        i = bisect.bisect_right(starts, t) - 1
        return i if i >= 0 and t <= marks[i][1] else None

    inside: list[tuple[Any, int]] = []  # (CPU event, the call it ran in)
    for e in cpu:
        i = call_of(e.time_range.start)
        if i is not None and e.name != MARK:
            inside.append((e, i))
    runtime = {e.id: (e, i) for e, i in inside if e.name.startswith("cu")}
    ops = {e.id: i for e, i in inside if not e.name.startswith("cu")}
    device: list[tuple[Any, int, Any]] = []  # (device event, call, its launching runtime event)
    for e in events:
        if e.device_type != DeviceType.CUDA or getattr(e, "is_user_annotation", False):
            continue
        if e.id in runtime:
            device.append((e, runtime[e.id][1], runtime[e.id][0]))
        elif getattr(e, "linked_correlation_id", 0) in ops:
            device.append((e, ops[e.linked_correlation_id], None))
    n = max(1, len(marks) or calls)
    by_call: dict[int, list[Any]] = defaultdict(list)
    for e, i, _ in device:
        by_call[i].append(e)
    gaps = []  # idle device time between one call's consecutive kernels: the GPU waiting on the host
    for kernels in by_call.values():
        kernels.sort(key=lambda k: k.time_range.start)
        gaps += [max(0.0, b.time_range.start - a.time_range.end) for a, b in itertools.pairwise(kernels)]
    latency = [e.time_range.start - r.time_range.start for e, _, r in device if r is not None]
    launches = [e for e, _ in runtime.values() if e.name in LAUNCH_APIS]
    per_name: dict[str, list[float]] = defaultdict(list)
    for e in launches:
        per_name[e.name].append(e.time_range.elapsed_us())
    self_us: dict[str, float] = defaultdict(float)
    for e, _ in inside:
        if not e.name.startswith("cu"):  # the runtime calls are counted above, on their own
            self_us[e.name] += e.self_cpu_time_total / n
    top = sorted(self_us.items(), key=lambda kv: -kv[1])[:5]
    times = [us for v in per_name.values() for us in v]
    gpu = bool(device)  # no device events: a CPU run, or CUPTI missing
    return {
        "calls": len(marks),
        "host_us": med([(m[1] - m[0]) for m in marks]),
        "gpu_ops": round(len(device) / n, 2) if gpu else None,
        "gpu_us": round(sum(e.time_range.elapsed_us() for e, _, _ in device) / n, 3) if gpu else None,
        "gap_us": round(statistics.fmean(gaps), 3) if gaps else None,
        "latency_us": round(statistics.fmean(latency), 3) if latency else None,
        "launches": round(len(launches) / n, 2) if launches else None,
        "launch_us": round(statistics.fmean(times), 3) if times else None,
        # per launch API: [calls per reference call, mean us]
        "launch_apis": {
            k: [round(len(v) / n, 2), round(statistics.fmean(v), 3)] for k, v in per_name.items()
        },
        "runtime_us": round(sum(e.time_range.elapsed_us() for e, _ in runtime.values()) / n, 3)
        if runtime
        else None,
        "top_ops": [[name, round(us, 3)] for name, us in top],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", type=Path, required=True, help="a KernelBench-format task file")
    parser.add_argument("--windows", type=int, default=60)
    parser.add_argument("--trace-windows", type=int, default=12)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=0, help="of the idle gaps' RNG")
    parser.add_argument(
        "--call-start",
        default="queued",
        choices=["queued", "idle"],
        help="timing.call_start: queued behind each flush, or after it (timed_calls.py)",
    )
    parser.add_argument("--save-traces", action="store_true", help="one fast and one slow window's trace")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "reference_modes")
    args = parser.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    # As the field builds and feeds it: built after the init seed on the CPU and moved, eval mode,
    # the stage's input sets copied into one set of buffers before each call (timing_stage.py).
    task = load_module(args.task, f"reference_{args.task.stem}")
    reference = build_reference(task, device)
    sets = [make_inputs(task, seed, device) for seed in TIMING_SEEDS]
    buffers, turn = clone(sets[0]), [0]

    def refill() -> None:
        turn[0] += 1
        copy_values(buffers, sets[turn[0] % len(sets)])

    def call() -> Any:
        return reference(*buffers)

    def traced() -> Any:
        with record_function(MARK):
            return reference(*buffers)

    settings = TimingSettings(call_start=args.call_start)
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    with torch.no_grad():
        timer = BlockTimer(call, device, settings, refill)
        call_ms = timer.settle()
        calls = max(1, min(MAX_BLOCK_CALLS, round(settings.paired_block_ms / max(call_ms, 1e-6))))
        for w in range(args.windows):
            idle = rng.uniform(*GAP_S)
            time.sleep(idle)
            window = run_window(timer, calls, w, idle)
            probe = dispatch_us(device)  # after the blocks: a probe before would warm them up
            rows += [{**r, "dispatch_us": probe} for r in window]
        threshold = split([r["ms"] for r in rows])
        for r in rows:
            r["mode"] = mode_of(r["ms"], threshold)
        modes = {m: summarise([r for r in rows if r["mode"] == m]) for m in ("fast", "slow", "all")}
        modes = {m: s for m, s in modes.items() if s["blocks"]}
        first = [r["mode"] == "slow" for r in rows if r["block"] == 0]
        later = [r["mode"] == "slow" for r in rows if r["block"] > 0]
        per_window: dict[int, set[str]] = defaultdict(set)
        for r in rows:
            per_window[r["window"]].add(r["mode"])
        modal = threshold is not None  # one mode: no block is slow, and no share says anything
        warmup = {
            "first_blocks_slow": round(statistics.fmean(first), 3) if first and modal else None,
            "later_blocks_slow": round(statistics.fmean(later), 3) if later and modal else None,
            "windows_mixed": sum(len(s) > 1 for s in per_window.values()),
            "windows_all_slow": sum(s == {"slow"} for s in per_window.values()),
        }
        print(f"call {call_ms:.4f} ms after settle; {calls} calls a block, threshold {threshold} ms")
        for m, s in modes.items():
            print(f"  {m}: {json.dumps(s)}")
        print(f"  per window: {json.dumps(warmup)}")

        # Phase 2: the same windows under the profiler (the first session's CUPTI start kept out).
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities, record_shapes=False):
            call()
        timer.fn = traced
        traced_rows: list[dict[str, Any]] = []
        profs: list[profile] = []  # kept only to save one fast and one slow trace at the end
        for w in range(args.trace_windows):
            idle = rng.uniform(*GAP_S)
            time.sleep(idle)
            with profile(activities=activities, record_shapes=False) as prof:
                window = run_window(timer, calls, w, idle)
            figures = trace_figures(prof, calls * BLOCKS)
            ms = statistics.median(r["ms"] for r in window)
            sm = med([r["sm_mhz"] for r in window])
            traced_rows.append({"window": w, "ms": round(ms, 5), "sm_mhz": sm, **figures})
            profs += [prof] if args.save_traces else []
    # Profiling slows the host; where phase 1's threshold puts every traced window on one side,
    # the traced windows' own split (if they have two modes) is the one that can compare them.
    traced_threshold, source = threshold, "phase1"
    if len({mode_of(r["ms"], threshold) for r in traced_rows}) < 2:
        own = split([r["ms"] for r in traced_rows])
        if own is not None:
            traced_threshold, source = own, "traced windows"
    by_mode: dict[str, dict[str, Any]] = {}
    saved: dict[str, str] = {}
    for r in traced_rows:
        r["mode"] = mode = mode_of(r["ms"], traced_threshold)
        if args.save_traces and mode not in saved:
            args.out.mkdir(parents=True, exist_ok=True)
            # gzipped: a GPU window's trace (thousands of calls) runs to tens of MB as JSON
            saved[mode] = str(args.out / f"window_{r['window']}_{mode}.json.gz")
            profs[r["window"]].export_chrome_trace(saved[mode])
    for m in sorted({r["mode"] for r in traced_rows}):
        mine = [r for r in traced_rows if r["mode"] == m]
        ops: dict[str, float] = defaultdict(float)
        for r in mine:
            for name, us in r["top_ops"]:
                ops[name] += us / len(mine)
        by_mode[m] = {"windows": len(mine), **{k: med([r[k] for r in mine]) for k in METRICS}}
        by_mode[m]["top_ops"] = [[n, round(u, 3)] for n, u in sorted(ops.items(), key=lambda kv: -kv[1])[:5]]
    print(f"profiled: threshold {traced_threshold} ms ({source}); per call, median over windows")
    names = list(by_mode)
    print(
        f"  {'metric':<12}" + "".join(f"{m:>12}" for m in names) + ("   slow/fast" if len(names) == 2 else "")
    )
    for k in METRICS:
        values = [by_mode[m][k] for m in names]
        ratio = f"{values[1] / values[0]:>12.2f}" if len(values) == 2 and values[0] and values[1] else ""
        print(f"  {k:<12}" + "".join(f"{v!s:>12}" for v in values) + ratio)
    for m in names:
        print(f"  {m} top CPU ops (self us/call): {by_mode[m]['top_ops']}")
    windows = []  # per window, its blocks' figures in order: what the modes were made of
    for w in range(args.windows):
        mine = [r for r in rows if r["window"] == w]
        record = {k: [round(r[k], 5) if isinstance(r[k], float) else r[k] for r in mine] for k in WINDOW_KEYS}
        windows.append({"idle_s": mine[0]["idle_s"], "dispatch_us": mine[0]["dispatch_us"], **record})
    print(
        json.dumps(
            {
                "bench": "reference_modes",
                "task": args.task.name,
                "device": torch.cuda.get_device_name(device) if cuda else "cpu",
                "torch": torch.__version__,
                "call_start": args.call_start,
                "call_ms": round(call_ms, 5),
                "calls_per_block": calls,
                "blocks_per_window": BLOCKS,
                "modes": modes,
                "bimodal": threshold is not None,
                "threshold_ms": None if threshold is None else round(threshold, 5),
                "per_window": warmup,
                "windows": windows,
                "profiled": {
                    "threshold_ms": None if traced_threshold is None else round(traced_threshold, 5),
                    "threshold_source": source,
                    "modes": by_mode,
                    "windows": traced_rows,
                    "traces": saved,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
