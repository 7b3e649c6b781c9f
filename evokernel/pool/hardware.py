"""The GPU facts prompts carry: collected from torch's device properties, formatted as one line.

torch reports name, compute capability, SM count, memory size, shared memory and L2 size, but not
memory bandwidth (it exposes neither the memory clock nor the bus width), so bandwidth comes from
a table of datasheet peaks by device name and is labelled *nominal*: sustained copies reach ~80-90 %
of it. The tables (bandwidth, dense FLOP/s per dtype) live in
:mod:`evokernel.evaluation.device_peaks`, where the profiling stage reads them too. Nothing here
imports torch; the pool passes its device properties in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evokernel.evaluation.device_peaks import (
    DENSE_TFLOPS,
    NOMINAL_BANDWIDTH_GBPS,
    dense_tflops,
    nominal_bandwidth_gbps,
)

__all__ = [
    "DENSE_TFLOPS",
    "NOMINAL_BANDWIDTH_GBPS",
    "dense_tflops",
    "device_facts",
    "format_hardware",
    "nominal_bandwidth_gbps",
]

# Order and wording of the known facts; other keys follow as "key: value".
_KNOWN = (
    "compute_capability",
    "sm_count",
    "memory_gib",
    "memory_bandwidth_gbps",
    "shared_memory_per_block_kib",
    "l2_cache_mib",
)


def device_facts(props: Any) -> dict[str, Any]:
    """Facts from ``torch.cuda.get_device_properties(i)`` (any object with its attributes)."""
    facts: dict[str, Any] = {
        "name": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30),
    }
    # The opt-in limit is what a kernel can ask for (227 KiB on H100), not the 48 KiB default.
    smem = getattr(props, "shared_memory_per_block_optin", 0) or getattr(props, "shared_memory_per_block", 0)
    if smem:
        facts["shared_memory_per_block_kib"] = smem // 1024
    l2 = getattr(props, "L2_cache_size", 0)
    if l2:
        facts["l2_cache_mib"] = round(l2 / 2**20)
    bandwidth = nominal_bandwidth_gbps(props.name)
    if bandwidth is not None:
        facts["memory_bandwidth_gbps"] = bandwidth
    return facts


def format_hardware(facts: Mapping[str, Any]) -> str:
    """One line for prompts, e.g. ``NVIDIA H100 80GB HBM3: compute capability 9.0 (sm_90), 132 SMs,
    80 GiB memory, 3350 GB/s memory bandwidth (nominal), 227 KiB shared memory per block``.
    Missing facts are left out; unknown keys are appended as ``key: value``."""
    parts: list[str] = []
    cc = facts.get("compute_capability")
    if cc:
        sm = "sm_" + str(cc).replace(".", "")
        parts.append(f"compute capability {cc} ({sm})")
    if facts.get("sm_count"):
        parts.append(f"{facts['sm_count']} SMs")
    if facts.get("memory_gib"):
        parts.append(f"{facts['memory_gib']} GiB memory")
    if facts.get("memory_bandwidth_gbps"):
        parts.append(f"{facts['memory_bandwidth_gbps']:.0f} GB/s memory bandwidth (nominal)")
    if facts.get("shared_memory_per_block_kib"):
        parts.append(f"{facts['shared_memory_per_block_kib']} KiB shared memory per block")
    if facts.get("l2_cache_mib"):
        parts.append(f"{facts['l2_cache_mib']} MiB L2 cache")
    parts += [
        f"{k}: {v}" for k, v in facts.items() if k != "name" and k not in _KNOWN and v not in ("", None)
    ]
    name = str(facts.get("name") or "unknown device")
    return f"{name}: {', '.join(parts)}" if parts else name
