"""A cheap speed-of-light estimate for a task, without profiling: what no kernel can beat.

The reference runs once on PyTorch's ``meta`` device (shapes and dtypes only: no memory, no
arithmetic, no GPU) under ``torch.utils.flop_counter.FlopCounterMode``. Bytes are the inputs',
parameters' and outputs' sizes (each read or written at least once); FLOPs are the counter's
(matmuls, convolutions, attention: element-wise work counts 0, so an element-wise task is bounded by
memory alone). With the device table's peaks (:mod:`evokernel.evaluation.device_peaks`) the floor
is max(bytes / bandwidth, FLOPs / peak FLOP/s). On a CPU (Triton's interpreter) there are no peaks,
so the prompt gives the bytes and FLOPs and no floor. Profiling, when on, measures the real share.

The reference is the user's trusted task file, executed in the driver with the sizes the pool runs
(``small`` on a CPU). A reference that cannot run on ``meta`` (data-dependent shapes, ``.item()``)
gets no estimate.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from evokernel.evaluation.device_peaks import dense_tflops, nominal_bandwidth_gbps
from evokernel.tasks import task_globals_overrides
from evokernel.types import Task

# What a reference may raise on the meta device (``.item()`` and data-dependent shapes raise
# RuntimeError, ``.cuda()`` without a GPU too; asserts on values fail, lookups of globals miss). The
# estimate is an extra section of a prompt: none of these may stop a run.
_META_ERRORS = (
    RuntimeError,
    TypeError,
    ValueError,
    NotImplementedError,
    AttributeError,
    LookupError,
    ArithmeticError,
    AssertionError,
    ImportError,
    OSError,
)


@dataclass(frozen=True)
class Limits:
    bytes: int
    flops: int
    dtypes: tuple[str, ...]  # floating dtypes of the inputs, most bytes first

    def floor_ms(self, hardware: str) -> tuple[float, str] | None:
        """(floor in ms, "memory" or "compute") on ``hardware``, None without its peaks."""
        bandwidth = nominal_bandwidth_gbps(hardware)
        if bandwidth is None:
            return None
        memory_ms = self.bytes / (bandwidth * 1e9) * 1e3
        peak = dense_tflops(hardware, self.dtypes[0]) if self.dtypes else None
        compute_ms = self.flops / (peak * 1e12) * 1e3 if peak and self.flops else 0.0
        return (memory_ms, "memory") if memory_ms >= compute_ms else (compute_ms, "compute")


def estimate(task: Task, small: bool) -> Limits | None:
    """The task's limits at its full (GPU) or small (CPU) sizes; None when the reference cannot run
    on the meta device."""
    overrides = task_globals_overrides(task, "small" if small else "full", 0)
    return _estimate(task.source, json.dumps(overrides, sort_keys=True, default=str))


@functools.cache
def _estimate(source: str, overrides_json: str) -> Limits | None:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    namespace: dict[str, Any] = {"__name__": "evokernel_reference"}
    try:
        exec(compile(source, "reference.py", "exec"), namespace)
        namespace.update(json.loads(overrides_json))
        with torch.device("meta"):
            model = namespace["Model"](*namespace["get_init_inputs"]())
            inputs = list(namespace["get_inputs"]())
            counter = FlopCounterMode(display=False)
            with counter, torch.no_grad():
                out = model(*inputs)
    except _META_ERRORS:
        return None
    outputs = out if isinstance(out, list | tuple) else [out]
    tensors = [
        t for t in (*inputs, *model.parameters(), *model.buffers(), *outputs) if isinstance(t, torch.Tensor)
    ]
    sizes: dict[str, int] = {}
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            name = str(t.dtype).removeprefix("torch.")
            sizes[name] = sizes.get(name, 0) + t.numel() * t.element_size()
    dtypes = tuple(sorted(sizes, key=lambda d: -sizes[d]))
    return Limits(sum(t.numel() * t.element_size() for t in tensors), int(counter.get_total_flops()), dtypes)


def _amount(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def on_cpu(hardware: str) -> bool:
    """Whether the pool runs on CPUs (Triton's interpreter, the tasks' small sizes)."""
    text = hardware.lower()
    return text.startswith("cpu") or "interpreter" in text


def peaks_line(hardware: str, dtypes: tuple[str, ...]) -> str:
    """``3350 GB/s; dense float16 989 TFLOP/s, float32 67 TFLOP/s`` from the device table ("" if unknown)."""
    bandwidth = nominal_bandwidth_gbps(hardware)
    if bandwidth is None:
        return ""
    wanted = (*dtypes, *(d for d in ("float32", "float16", "bfloat16") if d not in dtypes))
    flops = [f"{d} {dense_tflops(hardware, d):g} TFLOP/s" for d in wanted if dense_tflops(hardware, d)]
    return f"{bandwidth:g} GB/s memory bandwidth" + (f"; dense {', '.join(flops)}" if flops else "")


def limits_line(limits: Limits | None, hardware: str, runtime_ms: float | None) -> str:
    """The speed-of-light section of a prompt, with the current implementation's share of it."""
    if limits is None:
        return ""
    work = f"at least {_amount(limits.bytes, 'B')} moved"
    work += f" and {_amount(limits.flops, 'FLOP')}" if limits.flops else " (no matmul-class FLOPs)"
    floor = limits.floor_ms(hardware)
    if floor is None:
        text = f"{work}; no peak figures for this device, so no time floor."
    else:
        ms, kind = floor
        text = f"{work}: a floor of {ms * 1e3:.3g} µs on this device ({kind}-bound at datasheet peak)."
        if runtime_ms:
            share = 100 * ms / runtime_ms
            shown = f"{share:.0f}" if share >= 10 else f"{share:.2g}"
            text += f" The current implementation takes {runtime_ms * 1e3:.3g} µs: {shown} % of it."
    return f"\n## Speed of light (estimated from the reference's sizes, no profiling)\n{text}\n"
