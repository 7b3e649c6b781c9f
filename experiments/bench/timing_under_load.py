"""How much concurrent candidate builds move a timed call, and which host-side remedy gives it back.

The pool evaluates many candidates per node; while one is timed (exclusive on the GPU through the
timing lock) the others compile (``load_inline``: nvcc/cicc/g++). Level-3 networks are chains of
small kernels whose timed calls are host-bound, so they feel the host's load. Here the references
of real level-3 tasks are timed with the pool's own timing code (``time_callable``, the eager
baseline's path) in these conditions, interleaved round by round so that drift hits all alike:

* ``quiet``: nothing else running;
* ``load``: N real compiles at the timed process's priority (g++ on ``torch/extension.h``, the
  header a level-3 candidate's build parses; N = the host's cores by default);
* ``load_nice``: the same compiles ``--niceness`` steps nicer (a remedy for CPU time-sharing);
* ``load_pinned``: the timed thread on one core (and its SMT siblings) that no compile may use
  (a remedy for time-sharing and a shared physical core);
* ``load_paused``: the compiles stopped (SIGSTOP) for each timed measurement and resumed after
  (what remains is the cost of having been loaded: caches, clocks).

Prints a table (median ms per task and condition, ratio to quiet) and, last, one JSON line.

    python3 experiments/bench/timing_under_load.py --tasks ../shared/corpora/pike-level3/tasks \\
        --only 1 10 23 27 30 31
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.loading import build_reference, load_module, make_inputs
from evokernel.evaluation.timing import time_callable

CONDITIONS = ("quiet", "load", "load_nice", "load_pinned", "load_paused")


def compile_loop(niceness: int) -> list[str]:
    """A shell loop of real compiles of torch's umbrella header (syntax only: the front end is
    where a level-3 build spends its CPU), or a busy loop where no C++ compiler is installed."""
    from torch.utils.cpp_extension import include_paths

    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        body = "while :; do :; done"
    else:
        includes = " ".join(f"-I{p}" for p in include_paths())
        body = (
            f"while :; do echo '#include <torch/extension.h>' | {compiler} -std=c++17 -x c++ "
            f"-fsyntax-only {includes} -I{sysconfig.get_paths()['include']} - "
            ">/dev/null 2>&1; done"
        )
    return ["nice", "-n", str(niceness), "sh", "-c", body]


def start_load(n: int, niceness: int, cpus: set[int] | None = None) -> list[subprocess.Popen[bytes]]:
    pin = ["taskset", "-c", ",".join(map(str, sorted(cpus)))] if cpus else []
    return [subprocess.Popen(pin + compile_loop(niceness), start_new_session=True) for _ in range(n)]


def signal_load(procs: list[subprocess.Popen[bytes]], sig: signal.Signals) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)


def timed_core() -> set[int]:
    """CPU 0 and its SMT siblings: where the pinned condition runs the timed thread."""
    siblings = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    text = siblings.read_text().strip() if siblings.exists() else "0"
    cores: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cores.update(range(int(lo), int(hi or lo) + 1))
    return cores


def stop_load(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    for proc in procs:
        proc.wait()


def task_number(path: Path) -> int:
    digits = "".join(c for c in path.stem.removeprefix("task_").split("_")[0] if c.isdigit())
    return int(digits) if digits else -1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=Path, required=True, help="a folder of KernelBench-format task files")
    parser.add_argument("--only", nargs="+", default=[], help="task file stems to time (default: all)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="concurrent compiles")
    parser.add_argument("--niceness", type=int, default=19)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ramp-s", type=float, default=4.0, help="wait after starting the load")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("timing_under_load needs a CUDA GPU: what it measures is a GPU call's host side")
    device = torch.device("cuda")
    # KernelBench's names (N_Name.py) or task_N.py; --only takes either the stem or N.
    paths = sorted(args.tasks.glob("*.py"), key=lambda p: (task_number(p), p.name))
    paths = [p for p in paths if not args.only or {p.stem, str(task_number(p))} & set(args.only)]
    if not paths:
        sys.exit(f"no task file in {args.tasks} matches --only {' '.join(args.only)}")
    calls = {}
    for path in paths:
        task = load_module(path, f"timed_{path.stem}")
        model, inputs = build_reference(task, device), make_inputs(task, 0, device)
        calls[path.stem] = lambda m=model, i=inputs: m(*i)
    settings = TimingConfig()
    times: dict[str, dict[str, list[float]]] = {name: {c: [] for c in CONDITIONS} for name in calls}
    with torch.no_grad():
        for fn in calls.values():  # first calls (cuDNN autotune, allocator) outside every window
            fn()
        torch.cuda.synchronize()
        everywhere = os.sched_getaffinity(0)
        mine = timed_core()
        if not everywhere - mine:
            sys.exit(f"load_pinned needs a core outside {sorted(mine)} for the compiles")
        for r in range(args.rounds):
            for condition in CONDITIONS:
                niceness = args.niceness if condition == "load_nice" else 0
                others = everywhere - mine if condition == "load_pinned" else None
                procs = [] if condition == "quiet" else start_load(args.load, niceness, others)
                if condition == "load_pinned":
                    os.sched_setaffinity(0, mine)  # this (the launching) thread only
                try:
                    time.sleep(args.ramp_s if procs else 0.5)
                    for name, fn in calls.items():
                        if condition == "load_paused":
                            signal_load(procs, signal.SIGSTOP)
                            time.sleep(0.05)
                        result = time_callable(fn, device, settings)
                        if condition == "load_paused":
                            signal_load(procs, signal.SIGCONT)
                        times[name][condition].append(result.median_ms)
                finally:
                    os.sched_setaffinity(0, everywhere)
                    stop_load(procs)
                print(f"round {r + 1}/{args.rounds} {condition}: done", flush=True)
    rows: dict[str, Any] = {}
    loaded = CONDITIONS[1:]
    print("\n| task | quiet ms | " + " | ".join(f"{c} ms (x quiet)" for c in loaded) + " |")
    print("|---" * (len(CONDITIONS) + 1) + "|")
    for name, by in times.items():
        med = {c: statistics.median(v) for c, v in by.items()}
        rows[name] = {c: round(m, 4) for c, m in med.items()}
        for c in loaded:
            rows[name][f"{c}_ratio"] = round(med[c] / med["quiet"], 3)
        cells = " | ".join(f"{med[c]:.3f} ({rows[name][f'{c}_ratio']}x)" for c in loaded)
        print(f"| {name} | {med['quiet']:.3f} | {cells} |")
    summary = {
        "device": torch.cuda.get_device_name(),
        "cores": os.cpu_count(),
        "load": args.load,
        "niceness": args.niceness,
        "rounds": args.rounds,
        "timed_core": sorted(mine),
        **{
            f"median_{c}_ratio": round(statistics.median(r[f"{c}_ratio"] for r in rows.values()), 3)
            for c in loaded
        },
        "tasks": rows,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
