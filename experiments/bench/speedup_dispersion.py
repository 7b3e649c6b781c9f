"""How far a kernel's speedup moves between runs (issue 35): per kernel, the ratio of its
speedups in two runs of ``field_verdicts.py`` (``--stream`` files), and optionally each loaded
run against a quiet one (the same kernels one at a time).

Prints the kernels that miss the goal (|change| > 5 %) with their intervals and both sides' medians,
then one JSON line (``missed_moved``: of those, how many moved with the eager side, the candidate's,
both or neither; ``missed_shared``: how many had another process's kernels in a window,
``shared_windows`` per run):
median / p90 / worst |change| between the loaded runs, loaded vs quiet, whether each run's
95 % interval held the other run's figure, and how much wider the intervals would have to be to
hold 95 % of the changes (``interval_calibration``, with the between-window spread they miss),
and the changes split by whether a side's host issuing outlasted its events (``by_issue``; the
same over the kernels whose windows no other process shared in either run: ``unshared``), and
each run's verdicts per minute (``throughput``: corpus_throughput.stream_throughput).
``launch_fast``: the same changes with each paired figure re-derived from its window's rounds
whose eager dispatch reading (``round_dispatch_us``, read before each round) was within
``--launch-limit`` of the fastest readings of both runs (their 5th percentile): whether gating
rounds on the launch path's speed would steady the figure (session 26: the H200 host's launch
path flips between ~7 and ~10 us with every spin fast). Its ``round_states``: within windows
whose kept rounds saw both states, the median ratio of the slow rounds over the fast ones (does
the state move a window's figure at all?) and ``by_link_gen``: the readings by the GPU's PCIe
generation read beside them. ``host_gate_only``: for two runs gated on the launch path (session
28's ``launch_slowdown_limit``, removed after those runs), the changes with each figure re-derived
from the rounds the host gate alone kept (``round_host_fast``): the ungated figure beside the gated
one, from one pair of runs. The re-derivations live in round_figures.py.

Usage::

    python3 experiments/bench/speedup_dispersion.py RUN1.jsonl RUN2.jsonl [--quiet QUIET.jsonl]
        [--within OTHER1.jsonl OTHER2.jsonl]   # only the kernels the other runs accepted too
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

from corpus_throughput import stream_throughput
from round_figures import host_gate_only, launch_fast, order_statistic, quantiles

from evokernel.evaluation.clocks import sharing_users


def load(path: Path) -> dict[str, dict[str, Any]]:
    rows = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        rows[row["solution"]] = row  # a later line wins (a re-run)
    return rows


def accepted(row: dict[str, Any] | None) -> bool:
    return row is not None and row["status"] == "correct" and bool(row.get("speedup_eager"))


def changes(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> dict[str, float]:
    """|speedup_b / speedup_a - 1| per kernel accepted in both."""
    return {
        k: abs(b[k]["speedup_eager"] / a[k]["speedup_eager"] - 1)
        for k in sorted(a)
        if accepted(a[k]) and accepted(b.get(k))
    }


def covered(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> float | None:
    """Share of kernels whose run-a interval holds run b's figure."""
    hits = [
        a[k]["speedup_low"] <= b[k]["speedup_eager"] <= a[k]["speedup_high"]
        for k in a
        if accepted(a[k]) and accepted(b.get(k)) and a[k].get("speedup_low") is not None
    ]
    return round(sum(hits) / len(hits), 4) if hits else None


def log_se(row: dict[str, Any], own: bool) -> float:
    """A row's standard error in log space (a 95 % interval's log half-width / 1.96): of the
    interval as recorded, or with ``own`` of the window's own (``paired.window_low``/``high``,
    before the spread between windows was added; the recorded one in rows from before)."""
    paired = row.get("paired") or {}
    low, high = row["speedup_low"], row["speedup_high"]
    if own and paired.get("window_low") is not None and paired.get("window_high") is not None:
        low, high = paired["window_low"], paired["window_high"]
    return (math.log(high) - math.log(low)) / (2 * 1.96)


def calibration(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> dict[str, float | int | None]:
    """How far the intervals are from honest, from the kernels both runs accepted with one:
    ``z`` = ln(b / a) over the two recorded intervals' standard errors combined, which is standard
    normal when an interval holds all the noise between two runs. ``scale_for_95``: the factor the
    intervals would need to be widened by for 95 % of the kernels' |z| to stay under 1.96.
    ``between_window``: the relative spread of one window's figure that the windows' own intervals
    do not see, sqrt((robust var(ln(b / a)) - median own var) / 2), the term an honest interval
    adds in quadrature (timing.window_spread*, which rows from session 29 on already carry: their
    own intervals are kept beside, so this stays the measured spread). ``holds``: the share of
    changes inside the recorded intervals combined, and inside the own ones with the term."""
    zs, diffs, within, own = [], [], [], []
    for k in a:
        ra, rb = a[k], b.get(k)
        if (
            not (accepted(ra) and accepted(rb))
            or ra.get("speedup_low") is None
            or rb.get("speedup_low") is None
        ):
            continue
        d = math.log(rb["speedup_eager"] / ra["speedup_eager"])
        var = log_se(ra, False) ** 2 + log_se(rb, False) ** 2
        diffs.append(d)
        within.append(var)
        own.append(log_se(ra, True) ** 2 + log_se(rb, True) ** 2)
        if var > 0:
            zs.append(abs(d) / math.sqrt(var))
    if not zs:
        return {"kernels": 0, "median_z": None, "scale_for_95": None, "between_window": None, "holds": None}
    p95 = order_statistic(sorted(zs), 0.95)
    robust_var = (1.4826 * statistics.median(abs(d) for d in diffs)) ** 2
    between = math.sqrt(max(0.0, robust_var - statistics.median(own)) / 2)

    def holds(variances: list[float], term: float) -> float:
        """Share of kernels whose change lies inside the two intervals combined, ``term`` added."""
        inside = [abs(d) <= 1.96 * math.sqrt(v + 2 * term**2) for d, v in zip(diffs, variances, strict=True)]
        return round(sum(inside) / len(inside), 3)

    return {
        "kernels": len(zs),
        "median_z": round(statistics.median(zs), 3),
        "scale_for_95": round(p95 / 1.96, 3),
        "between_window": round(between, 4),
        # what the combined 95 % band holds as recorded, and the own intervals with the term added
        "holds": [holds(within, 0.0), holds(own, between)],
    }


def reference_host(row: dict[str, Any]) -> str:
    """How the eager reference's host issued its calls in the window (block_timer.BlockTimer.host:
    a call's issuing ms and the share of it on a CPU), or "-" for rows from before it was kept."""
    host = (row.get("host") or {}).get("reference") or {}
    return f"{host['issue_ms']:.4g} ms, {host['cpu_share']:.2f}" if host else "-"


def host_speed(row: dict[str, Any]) -> str:
    """The window CPU's fastest spin and the eager dispatch path's speed at the window's start and
    end (cpu_pin.WindowCpu ``spin_us``, host_clock.dispatch_us), "-" for rows without them."""
    pinned = row.get("pinned") or {}
    if "spin_us" not in pinned:
        return "-"
    dispatch = ",".join("-" if us is None else f"{us:.3g}" for us in pinned.get("dispatch_us") or [])
    return f"{pinned['spin_us']:.4g}, {dispatch or '-'}"


def stranger(row: dict[str, Any]) -> str:
    """Another process's kernels in the window (clocks.gpu_users): its peak SM % and state
    (``T``: stopped, its queued kernels still running), "-" for none, "" for rows from before it
    was kept; ``+N`` windows given up first (timing_window.BUSY_WINDOWS)."""
    gpu = row.get("gpu")
    if not gpu or "users" not in gpu:
        return ""
    others = sharing_users(gpu)
    given_up = f" +{gpu['busy_windows']}" if gpu.get("busy_windows") else ""
    if not others:
        return "-" + given_up
    peak = max(others, key=lambda u: u[1])
    return f"{peak[1]}% {peak[3].rsplit(' ', 1)[-1]}{given_up}"


def issue_over_event(row: dict[str, Any]) -> bool:
    """A side spent longer issuing a call than its events timed (``host.*.issue_ms`` over its ms):
    the events did not see all of its host time, as when a queued call's flush hid it (timed_calls.py,
    "Where a call starts")."""
    host = row.get("host") or {}
    sides = (("reference", "eager_ms"), ("candidate", "runtime_ms"))
    issued = {side: (host.get(side) or {}).get("issue_ms") or 0.0 for side, _ in sides}
    return any(issued[side] > (row.get(ms) or math.inf) for side, ms in sides)


def side_moved(r1: dict[str, Any], r2: dict[str, Any], miss: float) -> str:
    """Which side's median moved by more than ``miss`` between the runs: the eager reference's,
    the candidate's, both or neither (the ratio moved inside the window)."""
    eager = abs(r2["eager_ms"] / r1["eager_ms"] - 1) > miss
    candidate = abs(r2["runtime_ms"] / r1["runtime_ms"] - 1) > miss
    return "both" if eager and candidate else "eager" if eager else "candidate" if candidate else "neither"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--quiet", type=Path)
    parser.add_argument("--fill", type=int, default=16, help="candidates in flight (the runs' --concurrency)")
    parser.add_argument("--miss", type=float, default=0.05)
    parser.add_argument("--launch-limit", type=float, default=1.15, help="of the fast dispatch reading")
    parser.add_argument(
        "--within",
        type=Path,
        nargs="+",
        default=[],
        help="only the kernels these streams accepted too (two pairs of runs compared on one set)",
    )
    args = parser.parse_args()
    a, b = load(args.first), load(args.second)
    if args.within:
        # Issue 37: the split cluster's pair against the builds-paused pair over the kernels all
        # four accepted, so that neither pair's figure rests on kernels the other never timed.
        others = [load(path) for path in args.within]
        kept = {k for k in a if all(accepted(run.get(k)) for run in others)}
        a = {k: r for k, r in a.items() if k in kept}
        b = {k: r for k, r in b.items() if k in kept}
    between = changes(a, b)
    moved = {"eager": 0, "candidate": 0, "both": 0, "neither": 0}
    print(f"{len(between)} kernels accepted in both runs")
    columns = ["kernel", "run 1", "run 2", "change", "eager ms (1/2)", "candidate ms (1/2)"]
    host = "reference issue ms, CPU share (1/2)"
    speed = "spin us, eager op us (1/2)"
    extra = [host, speed, "pairs (1/2)", "stopped (1/2)", "stranger (1/2)"]
    print("| " + " | ".join([*columns, *extra]) + " |")
    print("|" + "---|" * (len(columns) + len(extra)))
    missed_shared = 0
    for k, change in sorted(between.items(), key=lambda kv: -kv[1]):
        if change <= args.miss:
            continue
        r1, r2 = a[k], b[k]

        def fig(r: dict[str, Any]) -> str:
            low, high = r.get("speedup_low"), r.get("speedup_high")
            band = f" [{low:.3g}-{high:.3g}]" if low is not None and high is not None else ""
            return f"{r['speedup_eager']:.3g}x{band}"

        pairs = f"{(r1.get('paired') or {}).get('pairs')}/{(r2.get('paired') or {}).get('pairs')}"
        stops = f"{(r1.get('paired') or {}).get('stopped')}/{(r2.get('paired') or {}).get('stopped')}"
        sides = " | ".join(f"{r1[x]:.4g} / {r2[x]:.4g}" for x in ("eager_ms", "runtime_ms"))
        issued = " / ".join(reference_host(r) for r in (r1, r2))
        shared = f"{stranger(r1)} / {stranger(r2)}"
        missed_shared += "%" in shared
        speeds = " / ".join(host_speed(r) for r in (r1, r2))
        cells = [k, fig(r1), fig(r2), f"{change:.1%}", sides, issued, speeds, pairs, stops, shared]
        print("| " + " | ".join(cells) + " |")
        moved[side_moved(r1, r2, args.miss)] += 1
    verdicts_same = sum(a[k]["status"] == b[k]["status"] for k in a if k in b)
    result: dict[str, Any] = {
        "kernels": len(a),
        "within": [str(path) for path in args.within],
        "verdicts_identical": verdicts_same,
        "accepted": [sum(map(accepted, a.values())), sum(map(accepted, b.values()))],
        "between_runs": quantiles(list(between.values())),
        "interval_holds_other_run": [covered(a, b), covered(b, a)],
        "interval_calibration": calibration(a, b),
        "missed_moved": moved,
        "missed_shared": missed_shared,
        "shared_windows": [sum("%" in stranger(r) for r in run.values() if accepted(r)) for run in (a, b)],
        "stopped_by_cap": [
            sum((r.get("paired") or {}).get("stopped") == "cap" for r in run.values() if accepted(r))
            for run in (a, b)
        ],
    }
    # The changes of kernels with a side whose issuing outlasted its events in either run, and
    # of the rest (session 22's H200 runs 3/4: 39 kernels, p90 17.9 %, 17 of the 19 over 5 %;
    # 33 kernels, p90 1.3 %).
    over = {k: issue_over_event(a[k]) or issue_over_event(b[k]) for k in between}
    result["by_issue"] = {
        name: quantiles([c for k, c in between.items() if over[k] is flag])
        for name, flag in (("issue_over_event", True), ("covered", False))
    }
    # The same split over the kernels whose kept windows no other process's kernels shared in
    # either run (session 32: a candidate's 37-40 s trials shared four of run 2's windows, three
    # of the four worst changes; timing_window.STRANGER_PATIENCE_S now waits them out).
    alone = {k for k in between if "%" not in stranger(a[k]) + stranger(b[k])}
    result["unshared"] = {
        "all": quantiles([between[k] for k in alone]),
        **{
            name: quantiles([between[k] for k in alone if over[k] is flag])
            for name, flag in (("issue_over_event", True), ("covered", False))
        },
    }
    # The intervals' calibration in each group: the spread between windows they miss differs by
    # ~10x (sessions 22-28: 2.9-4.1 % host-bound, 0-0.33 % the rest; timing.window_spread*).
    result["interval_calibration_by_issue"] = {
        name: calibration(*({k: run[k] for k in between if over[k] is flag} for run in (a, b)))
        for name, flag in (("issue_over_event", True), ("covered", False))
    }
    result["launch_fast"] = launch_fast(a, b, between, args.launch_limit)
    result["host_gate_only"] = host_gate_only(a, b, between)  # None unless the runs were launch-gated
    result["throughput"] = [stream_throughput(list(run.values()), args.fill) for run in (a, b)]
    if args.quiet:
        quiet = load(args.quiet)
        result["loaded_vs_quiet"] = [quantiles(list(changes(quiet, run).values())) for run in (a, b)]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
