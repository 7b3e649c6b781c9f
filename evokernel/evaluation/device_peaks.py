"""The device table: datasheet peaks by device name (DRAM bandwidth, dense FLOP/s per dtype).

Read by the prompts' hardware line (:mod:`evokernel.pool.hardware`) and by the profiling stage's
speed of light (:mod:`evokernel.evaluation.profiling.verdict`). Names match as case-insensitive
substrings of torch's device name, and the longest matching pattern wins, so "GH200" is never read
as the "H200" it contains nor "H100 PCIe" as "H100", whatever the order of the rows.
"""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T")

# Datasheet peak DRAM bandwidth in GB/s, matched as substrings of torch's device name; the longest
# matching pattern wins (_lookup), so "GH200" is never read as "H200" nor "H100 PCIe" as "H100",
# whatever the order here. Sources: NVIDIA product datasheets.
NOMINAL_BANDWIDTH_GBPS: tuple[tuple[str, float], ...] = (
    ("GB200", 8000.0),
    ("B200", 8000.0),
    ("GH200", 4000.0),  # the HBM3 part; the HBM3e one has 4900
    ("H200", 4800.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIe", 2000.0),
    ("H100", 3350.0),  # H100 SXM5 80GB HBM3
    ("H800", 3350.0),
    ("A100 80GB PCIe", 1935.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100", 1555.0),  # the 40 GB parts, SXM4 and PCIe
    ("L40S", 864.0),
    ("L40", 864.0),
    ("L4", 300.0),
    ("A10G", 600.0),
    ("A10", 600.0),
    ("RTX 4090", 1008.0),
    ("RTX 3090", 936.0),
    ("V100", 900.0),
    ("T4", 320.0),
)
# Datasheet dense (no sparsity) peak TFLOP/s per dtype, by the same name patterns. float32 is the
# CUDA-core figure: the evaluator turns TF32 off (worker.py), so an fp32 matmul cannot use tensor
# cores; float16/bfloat16 are tensor-core figures with fp32 accumulation.
DENSE_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("B200", {"float64": 40.0, "float32": 80.0, "float16": 2250.0, "bfloat16": 2250.0}),
    ("GH200", {"float64": 67.0, "float32": 67.0, "float16": 989.0, "bfloat16": 989.0}),
    ("H200", {"float64": 67.0, "float32": 67.0, "float16": 989.0, "bfloat16": 989.0}),
    ("H100 NVL", {"float64": 60.0, "float32": 60.0, "float16": 835.0, "bfloat16": 835.0}),
    ("H100 PCIe", {"float64": 51.0, "float32": 51.0, "float16": 756.0, "bfloat16": 756.0}),
    ("H100", {"float64": 67.0, "float32": 67.0, "float16": 989.0, "bfloat16": 989.0}),
    ("H800", {"float64": 67.0, "float32": 67.0, "float16": 989.0, "bfloat16": 989.0}),
    ("A100", {"float64": 19.5, "float32": 19.5, "float16": 312.0, "bfloat16": 312.0}),
    ("L40S", {"float32": 91.6, "float16": 362.0, "bfloat16": 362.0}),
    ("L4", {"float32": 30.3, "float16": 121.0, "bfloat16": 121.0}),
    ("RTX 4090", {"float32": 82.6, "float16": 165.0, "bfloat16": 165.0}),
    ("V100", {"float64": 7.8, "float32": 15.7, "float16": 125.0}),
    ("T4", {"float32": 8.1, "float16": 65.0}),
)


def _lookup(table: tuple[tuple[str, _T], ...], device_name: str) -> _T | None:
    """The entry of the longest pattern found in ``device_name`` (case-insensitive), or None."""
    name = device_name.lower()
    found = [(len(pattern), value) for pattern, value in table if pattern.lower() in name]
    return max(found, key=lambda hit: hit[0])[1] if found else None


def nominal_bandwidth_gbps(device_name: str) -> float | None:
    """Datasheet peak memory bandwidth of ``device_name`` (torch's name for it), or None if unknown."""
    return _lookup(NOMINAL_BANDWIDTH_GBPS, device_name)


def dense_tflops(device_name: str, dtype: str) -> float | None:
    """Datasheet dense peak TFLOP/s of ``device_name`` for ``dtype`` ("float16", ...), or None."""
    peaks = _lookup(DENSE_TFLOPS, device_name)
    return None if peaks is None else peaks.get(dtype)
