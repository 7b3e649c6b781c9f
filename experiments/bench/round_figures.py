"""The per-round re-derivations of speedup_dispersion.py (issue 35) and the quantiles it reports:
each paired row carries its window's rounds (``paired.round_ratios``, ``round_kept``) and, lined
up by index, what the trusted side read before each (``pinned.round_dispatch_us``, the eager
dispatch path's speed; ``round_link_gen``, the GPU's PCIe generation; ``round_host_fast``, the
host gate's answer in session 28's launch-gated runs), so a figure can be re-derived from a
subset of its rounds offline: what a gate on one of them would have given, from one pair of runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from typing import Any


def order_statistic(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``ordered``, the nearest rank (no interpolation)."""
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def quantiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"kernels": 0, "median": None, "p90": None, "worst": None}
    ordered = sorted(values)
    p90 = order_statistic(ordered, 0.9)
    return {
        "kernels": len(values),
        "median": round(statistics.median(values), 4),
        "p90": round(p90, 4),
        "worst": round(ordered[-1], 4),
    }


def launch_anchor(runs: list[dict[str, dict[str, Any]]]) -> float | None:
    """The fast launch path's speed: the 5th percentile of every round's dispatch reading."""
    readings = [
        us
        for run in runs
        for row in run.values()
        for us in ((row.get("pinned") or {}).get("round_dispatch_us") or [])
        if us is not None
    ]
    return order_statistic(sorted(readings), 0.05) if readings else None


def kept_rounds(row: dict[str, Any]) -> list[tuple[float, float]] | None:
    """A paired row's kept rounds as ``(ratio, dispatch reading)``, those with both; None when the
    row was not paired or carries no rounds lined up with their readings."""
    paired = row.get("paired") or {}
    ratios, kept = paired.get("round_ratios") or [], paired.get("round_kept") or []
    dispatch = (row.get("pinned") or {}).get("round_dispatch_us") or []
    if row.get("method") != "paired" or not (len(ratios) == len(kept) == len(dispatch) > 0):
        return None
    rounds = zip(ratios, kept, dispatch, strict=True)
    return [(r, us) for r, k, us in rounds if k and r is not None and us is not None]


def launch_fast_figure(row: dict[str, Any], ceiling_us: float) -> float | None:
    """The median ratio of the row's kept rounds whose dispatch reading was at most
    ``ceiling_us``; the row's own figure when it was not paired (a CUDA-graph comparison); None
    when no round qualifies or the row has no rounds."""
    if row.get("method") != "paired":
        return float(row["speedup_eager"])
    fast = [r for r, us in kept_rounds(row) or [] if us <= ceiling_us]
    return statistics.median(fast) if fast else None


Figure = Callable[[dict[str, Any]], float | None]  # a row's figure, re-derived from its rounds


def rederived_changes(
    a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], kernels: Iterable[str], figure: Figure
) -> tuple[list[float], int]:
    """|change| between the runs of each of ``kernels`` (those both accepted), each run's figure
    re-derived by ``figure``; and how many kernels it gave no figure for in a run (left out)."""
    moved, missing = [], 0
    for k in kernels:
        first, second = (figure(run[k]) for run in (a, b))
        if first is None or second is None:
            missing += 1
            continue
        moved.append(abs(second / first - 1))
    return moved, missing


def launch_fast(
    a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], kernels: Iterable[str], limit: float
) -> dict[str, Any] | None:
    anchor = launch_anchor([a, b])
    if anchor is None:
        return None
    moved, missing = rederived_changes(a, b, kernels, lambda row: launch_fast_figure(row, limit * anchor))
    return {
        "limit": limit,
        "anchor_us": anchor,
        **quantiles(moved),
        "no_fast_round": missing,
        "round_states": round_states([a, b], limit * anchor),
        "by_link_gen": link_states([a, b], limit * anchor),
    }


def host_gate_figure(row: dict[str, Any]) -> float | None:
    """A launch-gated row's figure re-derived without the launch gate: the median ratio of its
    rounds the host gate alone kept (``round_host_fast``); the row's own figure when it was not
    paired (a CUDA-graph comparison); None for a paired row that was not gated."""
    if row.get("method") != "paired":
        return float(row["speedup_eager"])
    paired, pinned = row.get("paired") or {}, row.get("pinned") or {}
    ratios, host = paired.get("round_ratios") or [], pinned.get("round_host_fast")
    if not host or len(host) != len(ratios):
        return None
    kept = [r for r, fast in zip(ratios, host, strict=True) if fast and r is not None]
    # As pairing does: with no round the host called fast, every round is the figure.
    kept = kept or [r for r in ratios if r is not None]
    return statistics.median(kept) if kept else None


def host_gate_only(
    a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], kernels: Iterable[str]
) -> dict[str, Any] | None:
    """The changes between two launch-gated runs with every figure re-derived without the launch
    gate (the graph rows as they were): the ungated figure side by side from the same runs."""
    moved, _ = rederived_changes(a, b, kernels, host_gate_figure)
    gated = any((row.get("pinned") or {}).get("round_host_fast") for run in (a, b) for row in run.values())
    return quantiles(moved) if gated else None


def round_states(runs: list[dict[str, dict[str, Any]]], ceiling_us: float) -> dict[str, Any]:
    """Within one window, do its rounds' ratios follow the launch path? Per paired row with kept
    rounds of both states (reading at most ``ceiling_us``, or over): the median ratio of its slow
    rounds over that of its fast ones. 1 everywhere: the state does not move the figure; away from
    1 (above for a host-bound reference against a GPU-bound candidate): it does."""
    shifts = []
    for run in runs:
        for row in run.values():
            states: dict[bool, list[float]] = {True: [], False: []}
            for r, us in kept_rounds(row) or []:
                states[us <= ceiling_us].append(r)
            if states[True] and states[False]:
                shifts.append(statistics.median(states[False]) / statistics.median(states[True]))
    if not shifts:
        return {"windows": 0}
    ordered = sorted(shifts)
    return {
        "windows": len(shifts),
        "slow_over_fast_median": round(statistics.median(ordered), 4),
        "p10": round(order_statistic(ordered, 0.1), 4),
        "p90": round(order_statistic(ordered, 0.9), 4),
        "over_2pct": sum(abs(x - 1) > 0.02 for x in shifts),
    }


def by_link_gen(readings: Iterable[tuple[float, object]], ceiling_us: float) -> dict[str, Any]:
    """``(dispatch reading, PCIe generation)`` pairs split by generation: per generation, how many
    readings, their median and the share at most ``ceiling_us`` (fast). Also launch_state.py's."""
    split: dict[str, list[float]] = {}
    for us, gen in readings:
        split.setdefault(str(gen), []).append(us)
    return {
        gen: {
            "readings": len(values),
            "median_us": round(statistics.median(values), 2),
            "fast_share": round(sum(us <= ceiling_us for us in values) / len(values), 3),
        }
        for gen, values in sorted(split.items())
    }


def link_states(runs: list[dict[str, dict[str, Any]]], ceiling_us: float) -> dict[str, Any] | None:
    """Every round's dispatch reading by the PCIe generation read beside it (``round_link_gen``,
    recorded from session 29's runs on), :func:`by_link_gen`; None for runs without link readings.
    A fast state that is the high generation's and a slow one the low's: the launch path follows
    the idle GPU's link."""
    readings: list[tuple[float, object]] = []
    for run in runs:
        for row in run.values():
            pinned = row.get("pinned") or {}
            dispatch, links = pinned.get("round_dispatch_us") or [], pinned.get("round_link_gen") or []
            if len(dispatch) == len(links):
                readings += [(us, gen) for us, gen in zip(dispatch, links, strict=True) if us is not None]
    if all(gen is None for _, gen in readings):
        return None
    return by_link_gen(readings, ceiling_us)
