"""Is an eager model's speed a property of the process it runs in? (issue 35)

``cudnn_first_call.py`` found the same state giving different eager medians in two fresh
processes on an idle GPU (ResNet101 7.1 ms then 12.3 ms, EfficientNetB0 3.9 then 2.9 ms). This
probe runs N fresh processes per task and records, per process: the event-timed eager median of
100 calls, the median of 100 replays of the same call captured in a CUDA graph (the GPU's own
time, no host launch path), the host time to enqueue one call while the GPU is held busy, a
hash of the kernel names one call launches (a different cuDNN algorithm shows as a different
hash) and the CPU the process ran on. If eager moves while the graph holds, the difference is
in the host launch path; if the hash moves, in the algorithms chosen.

    python3 experiments/bench/eager_per_process.py --runs 5 CORPUS/tasks/10_ResNet101.py ...

Prints a line per process, then one JSON line.
"""

from __future__ import annotations

import argparse
import json

from fresh_process import run_fresh

PROBE = r"""
import hashlib, json, statistics, time
from evokernel.evaluation.cpu_pin import current_cpu

def event_median(fn, n=100):
    ms = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        ms.append(a.elapsed_time(b))
    return round(statistics.median(ms), 4)

with torch.no_grad():
    model(*inputs); torch.cuda.synchronize()
    eager = event_median(lambda: model(*inputs))
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(*inputs); torch.cuda.synchronize()
    names = sorted(e.name for e in prof.events() if e.device_type.name == "CUDA")
    kernels = hashlib.sha1("\n".join(names).encode()).hexdigest()[:10]
    # Host enqueue time: the GPU is kept busy by a long sleep kernel so no call waits on it.
    host = []
    for _ in range(20):
        torch.cuda._sleep(200_000_000)
        t = time.perf_counter(); model(*inputs); host.append((time.perf_counter() - t) * 1e3)
        torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(*inputs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(*inputs)
    graph_ms = event_median(graph.replay)
    eager_again = event_median(lambda: model(*inputs))
print(json.dumps({"task": path.rsplit("/", 1)[-1], "eager_ms": eager, "eager_again_ms": eager_again,
    "graph_ms": graph_ms, "host_enqueue_ms": round(statistics.median(host), 4),
    "kernels": kernels, "launches": len(names), "cpu": current_cpu()}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("tasks", nargs="+")
    args = parser.parse_args()
    results = [run_fresh(PROBE, [task], {"task": task}) for task in args.tasks for _ in range(args.runs)]
    print(json.dumps({"bench": "eager_per_process", "results": results}))


if __name__ == "__main__":
    main()
