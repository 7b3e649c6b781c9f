"""The two-run dispersion report (experiments/bench/speedup_dispersion.py, issue 35) on two small
hand-made runs whose figures are known: its last line is one JSON object, and its interval
calibration says how many of the changes the intervals hold, with and without the between-window
term, and its table gives each window's host speed and stranger."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "bench" / "speedup_dispersion.py"


def row(kernel: str, speedup: float, dispatch: list[float | None], users: list[list[Any]]) -> dict[str, Any]:
    """A field_verdicts.py stream row: accepted, a +-1 % interval, one window's records."""
    return {
        "solution": kernel,
        "status": "correct",
        "speedup_eager": speedup,
        "speedup_low": speedup * 0.99,
        "speedup_high": speedup * 1.01,
        "eager_ms": speedup,
        "runtime_ms": 1.0,
        "paired": {"pairs": 30, "stopped": "precision"},
        "pinned": {"spin_us": 310.0, "dispatch_us": dispatch},
        "gpu": {"users": users, "busy_windows": 0},
        "host": {"reference": {"issue_ms": 1.5, "cpu_share": 0.99}},
        "ended_at": 1000.0,
        "duration_s": 10.0,
    }


def report(
    tmp_path: Path, first: list[dict[str, Any]], second: list[dict[str, Any]], *within: list[dict[str, Any]]
) -> list[str]:
    """The script's output lines for two runs' rows written as stream files (and ``within``'s
    runs given as ``--within``)."""
    paths = []
    runs = [("run1", first), ("run2", second), *((f"other{i}", rows) for i, rows in enumerate(within))]
    for name, rows in runs:
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows))
        paths.append(str(path))
    flags = ["--within", *paths[2:]] if within else []
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *paths[:2], *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip().splitlines()


def test_the_calibration_counts_the_changes_the_intervals_hold(tmp_path: Path) -> None:
    alone = [[1, 60, 3, "window"]]
    # Run 2 moves the kernels by 0, 0.5, 4 and 25 %: the combined +-1.4 % band holds the first
    # two; with the between-window term (2.3 % from the robust spread) the third as well.
    first = [row(f"k{i}", 2.0, [7.0, 7.2], alone) for i in range(4)]
    second = [row(f"k{i}", 2.0 * move, [7.1, 7.0], alone) for i, move in enumerate((1.0, 1.005, 1.04))] + [
        row("k3", 2.5, [15.0, None], [[2, 70, 4, "python3 R"]])
    ]
    second[-1]["host"]["reference"]["issue_ms"] = 3.0  # k3's reference issued longer than it timed
    lines = report(tmp_path, first, second)
    result = json.loads(lines[-1])
    calibration = result["interval_calibration"]
    assert calibration["kernels"] == 4 and calibration["holds"] == [0.5, 0.75]
    se = math.log(1.01 / 0.99) / 3.92
    changes = sorted(abs(math.log(m)) for m in (1.0, 1.005, 1.04, 1.25))
    spread = (1.4826 * (changes[1] + changes[2]) / 2) ** 2
    assert calibration["between_window"] == pytest.approx(math.sqrt((spread - 2 * se**2) / 2), abs=1e-4)
    assert calibration["median_z"] > 1  # honest intervals: 0.67
    assert result["missed_shared"] == 1 and result["shared_windows"] == [0, 1]
    by_issue = result["by_issue"]
    assert by_issue["issue_over_event"]["kernels"] == 1 and by_issue["issue_over_event"]["worst"] == 0.25
    assert by_issue["covered"]["kernels"] == 3 and by_issue["covered"]["worst"] == 0.04
    # The calibration of each group apart: the three covered kernels' own interval band holds two.
    grouped = result["interval_calibration_by_issue"]
    assert grouped["issue_over_event"]["kernels"] == 1 and grouped["covered"]["kernels"] == 3
    assert grouped["covered"]["holds"][0] == pytest.approx(2 / 3, abs=1e-3)
    # Rows that carry the spread between windows keep their window's own interval beside it: the
    # spread is measured from the own ones (the same as above), the recorded band holds more.
    for r in first + second:
        r["paired"].update(window_low=r["speedup_low"], window_high=r["speedup_high"], window_spread=0.04)
        r["speedup_low"], r["speedup_high"] = r["speedup_eager"] / 1.08, r["speedup_eager"] * 1.08
    widened = json.loads(report(tmp_path, first, second)[-1])["interval_calibration"]
    assert widened["between_window"] == calibration["between_window"]
    assert widened["holds"] == [0.75, calibration["holds"][1]]  # +-8 % each: 0, 0.5 and 4 % inside
    # The kernels over 5 %: k3 (25 %), with the window's spin and eager-op readings and the stranger.
    table = [line for line in lines if line.startswith("| k") and not line.startswith("| kernel ")]
    assert len(table) == 1 and table[0].startswith("| k3 |")
    assert "310, 7,7.2 / 310, 15,-" in table[0] and "70% R" in table[0]


def test_launch_fast_rederives_each_figure_from_the_rounds_the_launch_path_was_fast_in(
    tmp_path: Path,
) -> None:
    """A host-bound reference against a GPU-bound candidate: rounds with a slow launch path (10 us
    against 7) read 3x, fast ones 2x. Run 1 had mostly fast rounds (2x), run 2 mostly slow ones
    (3x): 50 % apart; from the fast rounds alone both are 2x. A CUDA-graph comparison keeps its
    figure; a kernel with no fast round in a run is counted, not compared."""

    def paired_row(kernel: str, rounds: list[tuple[float, float, bool]]) -> dict[str, Any]:
        kept = sorted(ratio for ratio, _, k in rounds if k)
        r = row(kernel, kept[len(kept) // 2], [7.0, 7.0], [[1, 60, 3, "window"]])
        r["method"] = "paired"
        r["paired"] = {
            "pairs": len(kept),
            "stopped": "precision",
            "round_ratios": [ratio for ratio, _, _ in rounds],
            "round_kept": [k for _, _, k in rounds],
        }
        r["pinned"]["round_dispatch_us"] = [us for _, us, _ in rounds]
        r["pinned"]["round_link_gen"] = [5 if us < 8 else 1 for _, us, _ in rounds]  # slow: a low link
        return r

    fast, slow, left_out = (2.0, 7.0, True), (3.0, 10.0, True), (5.0, 7.1, False)
    graph = {**row("graph", 4.0, [7.0, 7.0], [[1, 60, 3, "window"]]), "method": "cuda_graph"}
    first = [paired_row("k", [fast, fast, slow, left_out]), paired_row("never", [slow, slow]), graph]
    second = [paired_row("k", [fast, slow, slow]), paired_row("never", [fast, slow, fast]), graph]
    result = json.loads(report(tmp_path, first, second)[-1])
    assert result["between_runs"]["worst"] == 0.5  # k: 2x then 3x
    launch = result["launch_fast"]
    assert launch["anchor_us"] == 7.0 and launch["limit"] == 1.15
    # k (2x both) and the graph (4x both) compared; "never" had no fast round in run 1.
    assert launch["kernels"] == 2 and launch["worst"] == 0.0 and launch["no_fast_round"] == 1
    # Inside a window: k's two windows and run 2's "never" saw both states, slow rounds 1.5x.
    states = launch["round_states"]
    assert states["windows"] == 3 and states["slow_over_fast_median"] == 1.5 and states["over_2pct"] == 3
    # Every reading (kept or not) by the link generation beside it: the fast ones all at gen 5.
    assert launch["by_link_gen"] == {
        "1": {"readings": 6, "median_us": 10.0, "fast_share": 0.0},
        "5": {"readings": 6, "median_us": 7.0, "fast_share": 1.0},
    }
    assert result["host_gate_only"] is None  # these runs were not gated on the launch path
    assert [t["verdicts"] for t in result["throughput"]] == [3, 3]


def test_host_gate_only_rederives_launch_gated_runs_without_the_launch_gate(tmp_path: Path) -> None:
    """Two runs gated on the launch path: their figures are the fast rounds' (2x both), and from
    the rounds the host gate alone kept, the ungated figure is 2x, then 3x (the slow rounds
    counted again); a round the host itself called slow (5x) stays out of both."""

    def gated_row(rounds: list[tuple[float, bool, bool]]) -> dict[str, Any]:
        r = row("k", 2.0, [7.0, 7.0], [[1, 60, 3, "window"]])
        r["method"] = "paired"
        r["paired"] = {
            "pairs": sum(k for _, k, _ in rounds),
            "stopped": "precision",
            "round_ratios": [ratio for ratio, _, _ in rounds],
            "round_kept": [k for _, k, _ in rounds],
        }
        r["pinned"].update(round_dispatch_us=[7.0] * len(rounds), round_host_fast=[h for *_, h in rounds])
        return r

    fast, launch_slow, host_slow = (2.0, True, True), (3.0, False, True), (5.0, False, False)
    first = [gated_row([fast, fast, launch_slow, host_slow, host_slow])]
    second = [gated_row([fast, launch_slow, launch_slow, host_slow])]
    result = json.loads(report(tmp_path, first, second)[-1])
    assert result["between_runs"]["worst"] == 0.0  # gated: 2x both
    assert result["host_gate_only"]["kernels"] == 1 and result["host_gate_only"]["worst"] == 0.5


def test_within_compares_a_pair_of_runs_on_the_kernels_another_pair_accepted_too(tmp_path: Path) -> None:
    alone = [[1, 60, 3, "window"]]
    first = [row(f"k{i}", 2.0, [7.0], alone) for i in range(3)]
    second = [row("k0", 2.0, [7.0], alone), row("k1", 2.02, [7.0], alone), row("k2", 3.0, [7.0], alone)]
    # The other pair accepted k0 and k1 and refused k2: k2's 50 % move is left out.
    other = [row("k0", 1.0, [7.0], alone), row("k1", 1.0, [7.0], alone), {**row("k2", 1.0, [7.0], alone)}]
    other[2]["status"] = "incorrect"
    result = json.loads(report(tmp_path, first, second, other, other)[-1])
    assert result["kernels"] == 2 and result["between_runs"]["kernels"] == 2
    assert result["between_runs"]["worst"] == pytest.approx(0.01)
    assert len(result["within"]) == 2
    whole = json.loads(report(tmp_path, first, second)[-1])
    assert whole["kernels"] == 3 and whole["between_runs"]["worst"] == pytest.approx(0.5)
