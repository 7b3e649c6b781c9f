"""Where a fresh process's first ``torch.profiler`` session spends its time (issue 26).

Prints seconds for: CUDA context, importing torch.profiler, the first CUDA-activity profile, a
second one, and one call's profile afterwards, each as wall time and as this process's CPU time
(``*_cpu_s``: user + system of all its threads), so a pool can tell whether CUPTI's start takes a
core or only waits; last line one JSON object. Run it in a fresh
process per setting, e.g. ``CUDA_MODULE_LOADING=EAGER python3 experiments/bench/cupti_start.py``;
the driver's JIT cache settings (``CUDA_CACHE_*``) are printed with the figures.
"""

from __future__ import annotations

import json
import os
import time

import torch

marks: dict[str, float] = {}


class Mark:
    """Wall and CPU seconds of the ``with`` body, stored as ``NAME_s`` and ``NAME_cpu_s``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), os.times()

    def __exit__(self, *exc: object) -> None:
        now = os.times()
        marks[f"{self.name}_s"] = time.perf_counter() - self.wall
        # system time apart: a driver's work (ioctls) shows there, a library's own work in user
        marks[f"{self.name}_cpu_s"] = now.user + now.system - self.cpu.user - self.cpu.system
        marks[f"{self.name}_sys_s"] = now.system - self.cpu.system


with Mark("cuda_context"):
    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
with Mark("import_profiler"):
    from torch.profiler import ProfilerActivity, profile
for n in ("first", "second", "third"):
    with Mark(f"{n}_profile"), profile(activities=[ProfilerActivity.CUDA]):
        x.add_(1)
        torch.cuda.synchronize()
with Mark("cpu_only_profile"), profile(activities=[ProfilerActivity.CPU]):
    x.add_(1)
marks = {k: round(v, 4) for k, v in marks.items()}
settings = ("CUDA_MODULE_LOADING", "CUDA_CACHE_PATH", "CUDA_CACHE_DISABLE", "CUDA_CACHE_MAXSIZE")
print(json.dumps({**{k: os.environ.get(k, "") for k in settings}, **marks}))
