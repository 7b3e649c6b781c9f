"""What this machine can profile, said once in the run header (and degraded to, never failed on).

``timeline`` needs a CUDA device and torch's Kineto/CUPTI build; ``counters`` needs that and Nsight
Compute (``ncu``). Whether the GPU's performance counters are open to this user
(``ERR_NVGPUCTRPERM``) shows only when they are read: such a profile then says so in its
``counters.status`` and keeps its timeline.
"""

from __future__ import annotations

from evokernel.evaluation.profiling.counters import find_ncu, ncu_version


def describe(level: str, device: str) -> str:
    """One header line, e.g. ``profiling: counters (torch.profiler/CUPTI; Nsight Compute 2025.3.1)``."""
    if level == "none":
        return "profiling: none"
    if device != "cuda":
        return f"profiling: {level} requested; skipped: no GPU"
    import torch

    if not torch.autograd.kineto_available():
        return f"profiling: {level} requested, but this torch has no Kineto/CUPTI: skipped"
    if level != "counters":
        return "profiling: timeline (torch.profiler/CUPTI)"
    ncu = find_ncu()
    version = ncu_version(ncu) if ncu else None
    if version is None:
        return "profiling: counters requested, but Nsight Compute (ncu) is not on this node: timeline only"
    return f"profiling: counters (torch.profiler/CUPTI; Nsight Compute {version.removeprefix('Version ')})"
