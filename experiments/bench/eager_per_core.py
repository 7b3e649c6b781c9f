"""Is a host-bound eager model's speed a property of the CPU core it runs on? (issue 35)

``eager_per_process.py`` showed level-3 eager references are host-bound on the H100 (ResNet101:
3.85 ms of GPU work in a CUDA graph, 6-11 ms eager, the same kernels in every process) and that
one fresh process in five runs 1.6-1.8x slower than the others on an idle machine. This probe
pins one process's thread to each CPU in turn (two rounds) and takes the median of 20 eager
calls there, in ``--processes`` fresh processes. Per-core figures that repeat across rounds and
processes while cores differ: the core (a busy SMT sibling, a slower core) sets the speed, and
timing both sides of a pair on one core cancels it. A process slow on every core: the process.
Beside each median, the host-speed spin (evaluation/host_speed.py) before and after the 20 calls
on that CPU (``spin_us``): whether the spin sees what slows the eager call, as the timing window's
host gate assumes.

    python3 experiments/bench/eager_per_core.py CORPUS/tasks/22_EfficientNetB0.py

Prints the CPU topology, a line per process, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fresh_process import run_fresh

PROBE = r"""
import json, os, statistics
from evokernel.evaluation.host_speed import settled_spin_us
cpus = sorted(os.sched_getaffinity(0))
rounds, spins = [], []
with torch.no_grad():
    for _ in range(2):
        row, spin = {}, {}
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            for _ in range(5):
                model(*inputs)
            torch.cuda.synchronize()
            before = settled_spin_us()
            ms = []
            for _ in range(20):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); model(*inputs); b.record(); torch.cuda.synchronize()
                ms.append(a.elapsed_time(b))
            row[cpu] = round(statistics.median(ms), 3)
            spin[cpu] = [round(before, 1), round(settled_spin_us(), 1)]
        rounds.append(row)
        spins.append(spin)
print(json.dumps({"task": path.rsplit("/", 1)[-1], "rounds": rounds, "spin_us": spins}))
"""


def topology() -> dict[str, str]:
    cpus = Path("/sys/devices/system/cpu")
    siblings = {
        p.parent.parent.name: p.read_text().strip()
        for p in sorted(cpus.glob("cpu[0-9]*/topology/thread_siblings_list"))
    }
    return siblings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args()
    siblings = topology()
    print({"thread_siblings": siblings}, flush=True)
    results = [run_fresh(PROBE, [task], {"task": task}) for task in args.tasks for _ in range(args.processes)]
    print(json.dumps({"bench": "eager_per_core", "thread_siblings": siblings, "results": results}))


if __name__ == "__main__":
    main()
