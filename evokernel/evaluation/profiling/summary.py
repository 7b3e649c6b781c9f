"""A profile in a few lines: what prompts, ``verify`` and reports show.

At most :data:`MAX_LINES` lines and :data:`MAX_CHARS` characters (~150 tokens): the bottleneck with
the numbers that decided it, the speed-of-light share, the main kernels, and the main kernel's
counters when there are any. Kernel names are cut to :data:`NAME_CHARS`: cuBLAS and CUTLASS names
run to 200 characters that tell a model little.
"""

from __future__ import annotations

from typing import Any

MAX_LINES = 4
MAX_CHARS = 700
NAME_CHARS = 60
TOP_KERNELS = 3


def _name(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 3] + "..."


def sol_line(sol: dict[str, Any] | None) -> str:
    """e.g. ``Speed of light: 67% of the NVIDIA H200's limit for this task (compute floor 1.11 ms:
    1.1 TFLOP at 989 TFLOP/s float16)``; "" when there is no share."""
    if not sol or sol.get("share") is None:
        return ""
    if sol.get("limit") == "compute":
        work = f"{sol['flops'] / 1e9:.3g} GFLOP at {sol['peak_tflops']:g} TFLOP/s {sol['dtype']}"
    else:
        size = f"{sol['bytes'] / 1e9:.3g} GB" if sol["bytes"] >= 1e9 else f"{sol['bytes'] / 1e6:.3g} MB"
        work = f"{size} at {sol['bandwidth_gbps']:g} GB/s"
    floor = f"{sol['limit']} floor {sol['min_ms']:.3g} ms: {work}"
    line = f"Speed of light: {sol['share']:.0%} of the device's limit for this task ({floor})"
    return f"{line}; {sol['beyond']}" if sol.get("beyond") else line


def kernels_line(timeline: dict[str, Any] | None) -> str:
    if not timeline or not timeline.get("kernels"):
        return ""
    parts = [
        f"{_name(k['name'])} {k['share']:.0%} ({k['launches']}x, {k['ms']:.3g} ms)"
        for k in timeline["kernels"][:TOP_KERNELS]
    ]
    more = len(timeline["kernels"]) - TOP_KERNELS + int((timeline.get("other") or {}).get("kernels", 0))
    tail = f"; {more} more" if more > 0 else ""
    return (
        f"Kernels: {timeline['launches']} launches, GPU busy {timeline['busy_ms']:.3g} ms; "
        + "; ".join(parts)
        + tail
    )


def counters_line(counters: dict[str, Any] | None) -> str:
    rows = (counters or {}).get("kernels") or []
    if not rows:
        return ""
    k = max(rows, key=lambda r: float(r.get("share") or 0.0))
    figures = [
        f"{label} {k[key]:.0f}%"
        for label, key in (("DRAM", "dram_pct"), ("SM", "sm_pct"), ("occupancy", "occupancy_pct"))
        if k.get(key) is not None
    ]
    if k.get("registers") is not None:
        figures.append(f"{k['registers']:.0f} registers/thread")
    if k.get("smem_bytes") is not None:
        figures.append(f"{k['smem_bytes'] / 1024:.0f} KiB shared memory/block")
    stalls = ", ".join(str(s[0]) for s in k.get("stalls") or [])
    return (
        f"Counters of {_name(k['name'])}: "
        + ", ".join(figures)
        + (f"; warps stall on {stalls}" if stalls else "")
    )


def profile_lines(profile: dict[str, Any] | None) -> list[str]:
    """The summary lines of a profile; [] when there is none worth showing (skipped, none)."""
    if not profile or not str(profile.get("status", "")).startswith(("ok", "failed")):
        return []
    if str(profile["status"]).startswith("failed") and not profile.get("sol"):
        return []
    lines = [f"Bottleneck: {profile.get('bottleneck', 'unknown')} ({profile.get('why', '')})"]
    lines += [line for line in (sol_line(profile.get("sol")), kernels_line(profile.get("timeline"))) if line]
    lines.append(counters_line(profile.get("counters")))
    lines = [line for line in lines if line][:MAX_LINES]
    text, out = 0, []
    for line in lines:
        if text + len(line) > MAX_CHARS:
            break
        out.append(line)
        text += len(line) + 1
    return out


def profile_text(profile: dict[str, Any] | None) -> str:
    return "\n".join(profile_lines(profile))
