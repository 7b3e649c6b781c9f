"""Does a convolution model's eager speed depend on the process's state at its first call?
(issue 35: the eager reference of ResNet tasks ran 1.84 ms in four runs and 4.38 ms in a fifth,
each with a tight paired interval, while its candidate held still.)

Each state runs in a fresh process: the task's ``Model`` is built, the state is set up, the first
call is made (where PyTorch picks a cuDNN algorithm for each convolution and keeps it), then the
median of 100 event-timed calls is taken. States: ``fresh``; ``small_cache`` (a 64 MiB block freed
into the caching allocator just before: the largest cached block PyTorch sizes the workspace
by); ``full`` (the GPU nearly full, as with 16 candidates in flight: 1 GiB left, nothing cached).
Run with ``CUDNN_LOGINFO_DBG=1 CUDNN_LOGDEST_DBG=stderr`` to see the algorithms chosen.

Usage (GPU machine)::

    python3 experiments/bench/cudnn_first_call.py \
        CORPUS/tasks/8_ResNetBasicBlock.py CORPUS/tasks/9_ResNet18.py

Prints a line per (task, state), then one JSON line.

Result (H200, session 16, ``data/cudnn_first_call_h200.json``): no state changes the time
systematically; the same state in two fresh processes does (ResNet101 7.1 then 12.3 ms). The
cause is the host's speed, not cuDNN: ``eager_per_process.py`` and ``eager_per_core.py``.
"""

from __future__ import annotations

import json
import sys

from fresh_process import run_fresh

PROBE = r"""
import json, statistics
state = sys.argv[1]
hold = None
if state == "full":
    free, _ = torch.cuda.mem_get_info()
    hold = torch.empty(free - (1 << 30), dtype=torch.uint8, device="cuda")
elif state == "small_cache":
    block = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    del block
with torch.no_grad():
    model(*inputs)
    torch.cuda.synchronize()
    ms = []
    for _ in range(100):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); model(*inputs); b.record(); torch.cuda.synchronize()
        ms.append(a.elapsed_time(b))
median = round(statistics.median(ms), 4)
print(json.dumps({"task": path.rsplit("/", 1)[-1], "state": state, "median_ms": median}))
"""
STATES = ("fresh", "small_cache", "full", "fresh")


def main() -> None:
    results = [
        run_fresh(PROBE, [state, task], {"task": task, "state": state})
        for task in sys.argv[1:]
        for state in STATES
    ]
    print(json.dumps({"bench": "cudnn_first_call", "results": results}))


if __name__ == "__main__":
    main()
