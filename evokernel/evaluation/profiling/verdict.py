"""The bottleneck verdict and the speed-of-light share of one profiled call.

**Speed of light.** The least time the device allows for the task: its minimum DRAM traffic (every
input, parameter, buffer and output read or written once) at the device's nominal bandwidth, or
its FLOPs (``torch.utils.flop_counter`` over the reference: matmuls and convolutions, the work
that can be compute-bound) at the dense peak for its dtype, whichever is longer. The share is that
time over the call's timed runtime: 0.71 reads "at 71 % of the device's limit for this task".
A share above 1 is kept as measured and explained (``beyond``): the kernel did fewer FLOPs than
the reference's count or did them in a cheaper precision. Measured on the H200 over the level-3
corpus: 4 of 21 correct fp32 kernels at 111-317 % of the fp32 compute floor (ResNet blocks, whose
3x3 convolutions cuDNN may run as Winograd; an attention at 317 %, past what fp32 CUDA cores
allow, so on tensor cores in TF32 or FP16, within the field's 1e-2 tolerance).
Peaks come from :mod:`evokernel.evaluation.device_peaks` (datasheet figures: a sustained copy reaches
~85-90 % of nominal bandwidth, so a share near 0.9 is at the limit).

**Bottleneck.** In this order, each with the numbers that decided it:

1. ``latency-bound`` (latency/launch-bound): the GPU sat idle for at least half of the call's
   timed runtime (host gaps between launches, host work before the first one), or all of its GPU
   work took under 20 µs, where a launch's ~3-5 µs of latency is most of it;
2. with Nsight Compute counters for the kernels that take >= 5 % of the call, weighted by their
   time: ``memory-bound`` / ``compute-bound`` when DRAM / SM throughput reaches 60 % of peak
   (the line Nsight Compute's own speed-of-light rule draws) and is the higher one;
   ``occupancy-limited`` when neither does and achieved occupancy is under 25 %; else
   ``latency-bound`` (warps mostly stalled: the top stall reasons say on what);
3. with the timeline only: ``memory-bound`` / ``compute-bound`` when the kernels' busy time is
   within 2x of the memory / compute floor; else ``unknown`` (counters would say why).
"""

from __future__ import annotations

from typing import Any

from evokernel.evaluation.device_peaks import dense_tflops, nominal_bandwidth_gbps

CLASSES = ("memory-bound", "compute-bound", "latency-bound", "occupancy-limited", "unknown")
IDLE_SHARE_LAUNCH_BOUND = 0.5
TINY_CALL_MS = 0.020
THROUGHPUT_BOUND_PCT = 60.0
LOW_OCCUPANCY_PCT = 25.0
FLOOR_SHARE_BOUND = 0.5
BEYOND_LIMIT = (
    "faster than the {dtype} limit allows: fewer FLOPs than the reference's count (Winograd or FFT "
    "convolutions, folded or skipped operations) or a cheaper precision (TF32/FP16 tensor cores)"
)


def task_work(reference: Any, inputs: list[Any]) -> dict[str, Any]:
    """Minimum bytes, FLOPs and the dominant dtype of one call of the ``reference`` model."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        out = reference(*inputs)
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    tensors += list(reference.parameters()) + list(reference.buffers())
    outputs = out if isinstance(out, (list, tuple)) else [out]
    tensors += [t for t in outputs if isinstance(t, torch.Tensor)]
    seen: dict[tuple[int, int], int] = {}
    for t in tensors:
        seen[(t.untyped_storage().data_ptr(), t.device.index or 0)] = t.numel() * t.element_size()
    floats = [t for t in tensors if t.is_floating_point()]
    dtype = max(floats, key=lambda t: t.numel()).dtype if floats else torch.float32
    return {
        "bytes": int(sum(seen.values())),
        "flops": int(counter.get_total_flops()),
        "dtype": str(dtype).removeprefix("torch."),
    }


def speed_of_light(work: dict[str, Any], device_name: str, runtime_ms: float | None) -> dict[str, Any]:
    """The floor times of ``work`` on ``device_name`` and the share ``runtime_ms`` reaches."""
    bandwidth = nominal_bandwidth_gbps(device_name)
    peak = dense_tflops(device_name, str(work.get("dtype")))
    out: dict[str, Any] = {**work, "bandwidth_gbps": bandwidth, "peak_tflops": peak}
    memory_ms = work["bytes"] / (bandwidth * 1e9) * 1e3 if bandwidth else None
    compute_ms = work["flops"] / (peak * 1e12) * 1e3 if peak and work["flops"] else None
    out["memory_ms"] = None if memory_ms is None else _sig(memory_ms)
    out["compute_ms"] = None if compute_ms is None else _sig(compute_ms)
    floors = {k: v for k, v in (("memory", memory_ms), ("compute", compute_ms)) if v}
    if not floors:
        return {**out, "min_ms": None, "share": None, "limit": None}
    limit = max(floors, key=lambda k: floors[k])
    out.update(min_ms=_sig(floors[limit]), limit=limit)
    out["share"] = round(floors[limit] / runtime_ms, 4) if runtime_ms and runtime_ms > 0 else None
    if out["share"] is not None and out["share"] > 1:
        out["beyond"] = BEYOND_LIMIT.format(dtype=work.get("dtype"))
    return out


def _sig(value: float) -> float:
    return float(f"{value:.6g}")  # floors run from nanoseconds (a tiny task) to seconds


def _weighted(rows: list[dict[str, Any]], key: str) -> float | None:
    pairs = [(float(r[key]), float(r.get("ms") or 0.0)) for r in rows if r.get(key) is not None]
    weight = sum(w for _, w in pairs)
    if not pairs:
        return None
    if weight <= 0:
        return sum(v for v, _ in pairs) / len(pairs)
    return sum(v * w for v, w in pairs) / weight


def classify(
    timeline: dict[str, Any] | None,
    counters: list[dict[str, Any]] | None,
    sol: dict[str, Any] | None,
    runtime_ms: float | None = None,
) -> dict[str, Any]:
    """``{"class": one of CLASSES, "why": the numbers that decided it}``. ``runtime_ms``: the
    call's timed runtime (events around the call, no profiler): the GPU's idle share is measured
    against it, since a profiler lengthens the host's side of the profiled call (2.6 ms before the
    first launch of an H200 copy that takes 0.25 ms), not the kernels."""
    if not timeline or not timeline.get("launches"):
        return {"class": "unknown", "why": "no kernel recorded in the profiled call"}
    busy, idle = float(timeline.get("busy_ms") or 0.0), float(timeline.get("idle_ms") or 0.0)
    if runtime_ms and runtime_ms > 0:
        idle_share = max(0.0, 1.0 - busy / runtime_ms)
    else:
        idle_share = idle / (busy + idle) if busy + idle > 0 else 0.0
    launches = int(timeline["launches"])
    mean_us = 1000 * busy / launches
    if idle_share >= IDLE_SHARE_LAUNCH_BOUND:
        why = (
            f"GPU idle {idle_share:.0%} of the call between {launches} launches "
            f"(mean kernel {mean_us:.3g} µs): launch overhead and host work dominate"
        )
        return {"class": "latency-bound", "why": why, "idle_share": round(idle_share, 4)}
    if busy < TINY_CALL_MS:
        why = f"all GPU work takes {1000 * busy:.3g} µs in {launches} launch(es): launch latency dominates"
        return {"class": "latency-bound", "why": why, "idle_share": round(idle_share, 4)}
    if counters:
        return _from_counters(counters, idle_share)
    return _from_floors(busy, sol, idle_share)


def _from_counters(rows: list[dict[str, Any]], idle_share: float) -> dict[str, Any]:
    dram, sm = _weighted(rows, "dram_pct"), _weighted(rows, "sm_pct")
    occupancy = _weighted(rows, "occupancy_pct")
    base = {"idle_share": round(idle_share, 4), "dram_pct": dram, "sm_pct": sm, "occupancy_pct": occupancy}
    if dram is None or sm is None:
        return {**base, "class": "unknown", "why": "Nsight Compute gave no throughput figures"}
    figures = f"DRAM {dram:.0f} % and SM {sm:.0f} % of peak"
    if max(dram, sm) >= THROUGHPUT_BOUND_PCT:
        kind = "memory-bound" if dram >= sm else "compute-bound"
        return {**base, "class": kind, "why": f"{figures} (time-weighted over the main kernels)"}
    if occupancy is not None and occupancy < LOW_OCCUPANCY_PCT:
        why = f"{figures}, achieved occupancy {occupancy:.0f} %: too few warps to hide latency"
        return {**base, "class": "occupancy-limited", "why": why}
    stalls = _top_stalls(rows)
    on = f"; warps stalled mostly on {', '.join(stalls)}" if stalls else ""
    return {**base, "class": "latency-bound", "why": f"{figures}{on}"}


def _top_stalls(rows: list[dict[str, Any]], n: int = 2) -> list[str]:
    total: dict[str, float] = {}
    for r in rows:
        for reason, value in r.get("stalls") or []:
            total[reason] = total.get(reason, 0.0) + float(value) * float(r.get("ms") or 1.0)
    return [k for k, _ in sorted(total.items(), key=lambda kv: -kv[1])[:n]]


def _from_floors(busy_ms: float, sol: dict[str, Any] | None, idle_share: float) -> dict[str, Any]:
    base = {"idle_share": round(idle_share, 4)}
    if not sol:
        return {
            **base,
            "class": "unknown",
            "why": "timeline only and no device peaks: counters would say why",
        }
    shares = {
        kind: float(sol[f"{kind}_ms"]) / busy_ms
        for kind in ("memory", "compute")
        if sol.get(f"{kind}_ms") and busy_ms > 0
    }
    figures = ", ".join(f"{v:.0%} of the {k} floor" for k, v in shares.items()) or "no floor known"
    if shares:
        kind = max(shares, key=lambda k: shares[k])
        if shares[kind] >= FLOOR_SHARE_BOUND:
            return {**base, "class": f"{kind}-bound", "why": f"kernels run at {figures}"}
    why = f"kernels run at {figures}: not near a limit (counters would say why)"
    return {**base, "class": "unknown", "why": why}
