"""``timeline``: the kernels one call launched, from ``torch.profiler`` (CUPTI).

One call, after timing, in the process that ran it (the worker for a candidate, the supervisor for
the reference): which kernels ran (name, launches, device time, share of the GPU's busy time), how
long the GPU sat idle between them (host gaps: launch overhead, host work, syncs) and the launch
count. CUPTI's first use in a process costs 4-6 s on an H200 (torch 2.11, CUDA 13; whatever
the module loading mode: experiments/bench/cupti_start.py), the next ones ~4 ms, so the worker
starts it (:func:`prepare`) before it is confined, outside any GPU lock, then profiles one call.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# Kernels listed by name; the rest are summed as "other". Eight covers the kernels that take
# >= 5 % of any call seen in the level-3 corpus.
TOP_KERNELS = 8
CALL_RANGE = "evokernel::profiled_call"


@dataclass(frozen=True)
class DeviceActivity:
    """One GPU activity of the profiled call: a kernel, a memcpy or a memset (times in µs)."""

    name: str
    start_us: float
    end_us: float

    @property
    def kind(self) -> str:
        if self.name.startswith("Memcpy"):
            return "memcpy"
        if self.name.startswith("Memset"):
            return "memset"
        return "kernel"


def _outside_templates(text: str, fold: str = "") -> str:
    """``text`` up to its parameter list with every (nested) ``<...>`` dropped, or replaced by
    ``fold`` where an outermost one opens."""
    depth, out = 0, []
    for ch in text:
        if ch == "<":
            if depth == 0 and fold:
                out.append(fold)
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def base_name(name: str) -> str:
    """A kernel's function name without return type, namespaces, template arguments or
    parameters, as Nsight Compute's ``-k`` matches it: ``void at::native::f<4, X>(int, Y)`` -> ``f``."""
    text = name.strip()
    words = _outside_templates(text).split()
    last = words[-1] if words else text
    return last.split("::")[-1] or text


def short_name(name: str, limit: int = 100) -> str:
    """A readable name: template arguments folded to ``<...>``, parameters dropped."""
    text = re.sub(r"^void\s+", "", name.strip())
    folded = _outside_templates(text, fold="<...>").strip() or text
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


def _union_us(spans: list[tuple[float, float]]) -> float:
    busy, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        busy += stop - max(start, end)
        end = stop
    return busy


def summarise(
    activities: Iterable[DeviceActivity], host_start_us: float, host_end_us: float
) -> dict[str, Any]:
    """The timeline of one call from its GPU activities and the host range of the call."""
    acts = sorted(activities, key=lambda a: a.start_us)
    out: dict[str, Any] = {
        "launches": len(acts),  # kernels, memcpys and memsets: what the call put on the GPU
        "copies": sum(a.kind != "kernel" for a in acts),
        "host_ms": round(max(host_end_us - host_start_us, 0.0) / 1000, 6),
    }
    if not acts:
        return {**out, "busy_ms": 0.0, "span_ms": 0.0, "idle_ms": 0.0, "lead_ms": 0.0, "kernels": []}
    span_us = acts[-1].end_us - acts[0].start_us
    busy_us = _union_us([(a.start_us, a.end_us) for a in acts])
    by_name: dict[str, list[float]] = {}
    for a in acts:
        by_name.setdefault(a.name, []).append(a.end_us - a.start_us)
    ranked = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))
    listed = [
        {
            "name": short_name(name),
            "base": base_name(name) if DeviceActivity(name, 0, 0).kind == "kernel" else "",
            "launches": len(times),
            "ms": round(sum(times) / 1000, 6),
            "share": round(sum(times) / busy_us, 4) if busy_us > 0 else 0.0,
        }
        for name, times in ranked[:TOP_KERNELS]
    ]
    rest = ranked[TOP_KERNELS:]
    out.update(
        busy_ms=round(busy_us / 1000, 6),
        span_ms=round(span_us / 1000, 6),
        # GPU idle inside the call's span: the host was launching, computing or waiting.
        idle_ms=round(max(span_us - busy_us, 0.0) / 1000, 6),
        # Host time before the first GPU work (argument checks, allocation, first launch).
        lead_ms=round(max(acts[0].start_us - host_start_us, 0.0) / 1000, 6),
        kernels=listed,
    )
    if rest:
        other_us = sum(sum(t) for _, t in rest)
        out["other"] = {
            "kernels": len(rest),
            "launches": sum(len(t) for _, t in rest),
            "ms": round(other_us / 1000, 6),
            "share": round(other_us / busy_us, 4) if busy_us > 0 else 0.0,
        }
    return out


# Seconds :func:`prepare` took in this process (reported with the profile: part of its cost).
prepared_s: float | None = None


def prepare(device: Any) -> None:
    """Start CUPTI now (one tiny profile): the 4-6 s first start, apart from the profiled call."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    global prepared_s
    started = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]):
        torch.ones(1, device=device).add_(1)
        torch.cuda.synchronize(device)
    prepared_s = round(time.perf_counter() - started, 4)


def profile_call(call: Callable[[], Any], device: Any) -> dict[str, Any]:
    """Profile one ``call()`` on a CUDA ``device`` (already warm) and summarise its timeline."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    started = time.perf_counter()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function(CALL_RANGE):
            call()
        torch.cuda.synchronize(device)
    host = [e for e in prof.events() if e.name == CALL_RANGE and e.device_type == DeviceType.CPU]
    acts = [
        DeviceActivity(e.name, float(e.time_range.start), float(e.time_range.end))
        for e in prof.events()
        # The call's range shows on the GPU's track too, as a user annotation: no GPU work.
        if e.device_type == DeviceType.CUDA
        and e.name != CALL_RANGE
        and not getattr(e, "is_user_annotation", False)
    ]
    if host:
        start, end = float(host[0].time_range.start), float(host[0].time_range.end)
    else:  # no host range recorded: the GPU's own span stands for it
        start = min((a.start_us for a in acts), default=0.0)
        end = max((a.end_us for a in acts), default=0.0)
    out = summarise(acts, start, end)
    out["seconds"] = round(time.perf_counter() - started, 4)
    if prepared_s is not None:
        out["prepare_s"] = prepared_s
    return out
