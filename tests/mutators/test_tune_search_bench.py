"""The tune_search benchmark script runs end to end on a CPU (Triton's interpreter, tiny grid),
saves its measured table, and replays it without measuring to the same figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "bench" / "tune_search.py"


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )


@pytest.mark.slow
def test_tune_search_runs_on_cpu_saves_and_replays_its_table(tmp_path: Path) -> None:
    table = tmp_path / "table.json"
    out = _bench(
        "--device", "cpu", "--small", "--reps", "3", "--tasks", "softmax", "--save-table", str(table)
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["bench"] == "tune_search" and summary["scale"] == "small"
    assert summary["goal_met"] is False  # one task: the goal needs at least two
    row = summary["tasks"]["softmax"]
    assert row["knobs"] == ["BLOCK_SIZE", "num_warps", "num_stages"]
    # 4 block sizes x 2 warp counts x 2 stage counts, minus the 2 with 32 * num_warps > BLOCK_SIZE.
    assert row["grid"] == 14 and row["budget"] == 3 and row["failed_settings"] == 0
    assert 0 < row["best_ms"] <= row["seed_ms"]
    assert row["exhaustive"]["median_fraction_of_best"] == 1.0 and row["exhaustive"]["evaluations"] == 14
    for method in ("tune", "tune_random_step", "random"):
        result = row[method]
        assert result["evaluations"] == 3
        assert 0 < result["min_fraction_of_best"] <= result["median_fraction_of_best"] <= 1.0

    saved = json.loads(table.read_text())
    assert saved["format"] == "evokernel.tune_table/1" and saved["scale"] == "small"
    assert {"device", "torch", "triton", "python"} <= set(saved["environment"])
    settings = saved["tasks"]["softmax"]["settings"]
    # The grid's 14 and the seed's own (64, 4, 2), outside this small space (num_warps 1 or 2).
    assert len(settings) == 15 and settings[0]["values"] == [64, 4, 2] and all(s["ms"] > 0 for s in settings)
    assert min(s["ms"] for s in settings) == pytest.approx(row["best_ms"], rel=1e-4)

    replay = _bench("--table", str(table), "--reps", "3")  # no --device: nothing is measured
    assert replay.returncode == 0, replay.stderr[-3000:]
    again = json.loads(replay.stdout.strip().splitlines()[-1])
    assert again["source"] == f"table {table}" and again["tasks"] == summary["tasks"]


def test_a_table_that_is_not_one_is_refused_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something/else"}))
    out = _bench("--table", str(bad))
    assert out.returncode == 2 and "is not a tune_search table" in out.stderr
    out = _bench("--table", str(tmp_path / "missing.json"))
    assert out.returncode == 2 and "cannot read the table" in out.stderr
