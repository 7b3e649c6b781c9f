"""Where a fresh process's first ``torch.profiler`` session spends its time (issue 26).

Prints seconds for: CUDA context, importing torch.profiler, the first CUDA-activity profile, a
second one, and one call's profile afterwards; last line one JSON object. Run it in a fresh
process per setting, e.g. ``CUDA_MODULE_LOADING=EAGER python3 experiments/bench/cupti_start.py``.
"""

from __future__ import annotations

import json
import os
import time

import torch

marks: dict[str, float] = {}
t = time.perf_counter()
x = torch.ones(1 << 20, device="cuda")
torch.cuda.synchronize()
marks["cuda_context_s"] = time.perf_counter() - t
t = time.perf_counter()
from torch.profiler import ProfilerActivity, profile  # noqa: E402

marks["import_profiler_s"] = time.perf_counter() - t
for n in ("first", "second", "third"):
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]):
        x.add_(1)
        torch.cuda.synchronize()
    marks[f"{n}_profile_s"] = time.perf_counter() - t
t = time.perf_counter()
with profile(activities=[ProfilerActivity.CPU]):
    x.add_(1)
marks["cpu_only_profile_s"] = time.perf_counter() - t
marks = {k: round(v, 4) for k, v in marks.items()}
print(json.dumps({"CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING", ""), **marks}))
