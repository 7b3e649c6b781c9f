"""One evaluation as a stream row: the JSON line ``field_verdicts.py`` and ``build_throughput.py``
write per verdict (``--stream``), which ``speedup_dispersion.py`` and ``round_figures.py`` read:
the verdict, the timing window's record, the stages, the GPU lock and the builds."""

from __future__ import annotations

import time
from typing import Any

# The paired figure's record in a row, its rounds included (speedup_dispersion.py's launch_fast),
# and the window's own interval beside the one with the spread between windows added (pairing.py).
PAIRED_KEYS = (
    "pairs",
    "stopped",
    "halfwidth",
    "seconds",
    "slow_rounds",
    "round_ratios",
    "round_kept",
    "window_spread",
    "window_low",
    "window_high",
)


def verdict_row(ev: Any, solution: str, task: str) -> dict[str, Any]:
    """One evaluation as a stream row: its verdict, its timing window's record (pairs, pinning,
    hosts, the GPU's users, phases, quiet windows), its stages, the GPU lock and its builds."""
    paired = (ev.details.get("timing") or {}).get("paired", {})
    return {
        "solution": solution,
        "task": task,
        "profile": ev.profile,
        "status": ev.status.value,
        "stage": ev.stage,
        "reason": ev.reason[:1500],
        "feedback": ev.feedback[:1500],
        "speedup_eager": ev.speedup_eager,
        "speedup_low": ev.speedup_low,
        "speedup_high": ev.speedup_high,
        "paired": {k: paired.get(k) for k in PAIRED_KEYS},
        "pinned": (paired.get("reference") or {}).get("pinned"),
        # How each side's host issued its timed calls (block_timer.BlockTimer.host): the
        # candidate's is its worker's word, a diagnosis only.
        "host": {
            "reference": (paired.get("reference") or {}).get("host"),
            "candidate": ((ev.details.get("timing") or {}).get("candidate") or {}).get("host"),
        },
        # The window's GPU: the drain before it, who else ran kernels in it (clocks.gpu_users),
        # and the SM clock while the reference's blocks ran.
        "gpu": (paired.get("reference") or {}).get("gpu"),
        # The timing window's phases (s): open (busy-window waits, drain, CPU claim), both
        # sides' settle, the pairs, the finish checks.
        "phases_s": (paired.get("reference") or {}).get("phases_s"),
        "clock": (paired.get("reference") or {}).get("clock"),
        "method": ((ev.details.get("timing") or {}).get("methods") or {}).get("eager"),
        "quiet": (ev.details.get("gpu_lock") or {}).get("quiet"),
        "timing_s": next(
            (st.get("seconds") for st in ev.details.get("stages", []) if st.get("stage") == "timing"),
            None,
        ),
        "runtime_ms": ev.runtime_ms,
        "eager_ms": ev.eager_ms,
        "max_abs_error": ev.max_abs_error,
        "weights": ev.details.get("weights"),
        "entry_class": ev.details.get("entry_class"),
        "checks": ev.details.get("checks", [])[-3:],
        "duration_s": round(ev.duration_s, 2),
        # Where the evaluation's time went (a warm H200 run's took ~70 s at 16 in flight,
        # session 26): each stage's seconds, and the GPU lock's wait and holds.
        "stage_s": {st.get("stage"): st.get("seconds") for st in ev.details.get("stages", [])},
        "lock": {k: (ev.details.get("gpu_lock") or {}).get(k) for k in ("wait_s", "exclusive_s", "shared_s")},
        # The seconds the node held the candidate's builds back, by which its deadline moved
        # (evaluation/build_clock.py, session 31), and the builds' core-seconds.
        "build_held_s": (ev.details.get("object_cache") or {}).get("build_held_s", 0.0),
        "build_cpu_s": (ev.details.get("object_cache") or {}).get("build_cpu_s", 0.0),
        "ended_at": round(time.time(), 1),  # to line a verdict up with a device log (nvidia-smi)
    }
