"""What the per-process probes of issue 35 share (``cudnn_first_call.py``, ``eager_per_process.py``,
``eager_per_core.py``): a task's ``Model`` built and put on the GPU in a fresh interpreter, the
probe's own code run after it, and its last printed line read back as one JSON row."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

# The task file is the child's last argument; the probe's code follows with ``model``, ``inputs``,
# ``path`` and ``torch`` defined (seeded as the field builds it: on the CPU, then moved).
LOAD_MODEL = r"""
import importlib.util, sys, torch
path = sys.argv[-1]
spec = importlib.util.spec_from_file_location("task", path)
task = importlib.util.module_from_spec(spec)
spec.loader.exec_module(task)
torch.manual_seed(0)
model = task.Model(*task.get_init_inputs()).cuda().eval()
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
"""


def run_fresh(probe: str, args: list[str], label: dict[str, Any]) -> dict[str, Any]:
    """Run ``probe`` after :data:`LOAD_MODEL` in a new interpreter with ``args`` (the task file
    last); print and return its last line as JSON, or ``label`` with the error's tail."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD_MODEL + probe, *args], capture_output=True, text=True, timeout=300
    )
    lines = done.stdout.strip().splitlines()
    row = json.loads(lines[-1]) if lines else {**label, "error": done.stderr[-400:]}
    print(row, flush=True)
    return row
