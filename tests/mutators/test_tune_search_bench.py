"""The tune_search benchmark script runs end to end on a CPU (Triton's interpreter, tiny grid)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_tune_search_runs_on_cpu_and_reports_every_method() -> None:
    script = ROOT / "experiments" / "bench" / "tune_search.py"
    args = [sys.executable, str(script), "--device", "cpu", "--small", "--reps", "3", "--tasks", "softmax"]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["bench"] == "tune_search" and summary["scale"] == "small"
    row = summary["tasks"]["softmax"]
    assert row["knobs"] == ["BLOCK_SIZE", "num_warps", "num_stages"]
    # 4 block sizes x 2 warp counts x 2 stage counts, minus the 2 with 32 * num_warps > BLOCK_SIZE.
    assert row["grid"] == 14 and row["budget"] == 3 and row["failed_settings"] == 0
    assert 0 < row["best_ms"] <= row["seed_ms"]
    assert row["exhaustive"]["median_fraction_of_best"] == 1.0 and row["exhaustive"]["evaluations"] == 14
    for method in ("tune", "random"):
        result = row[method]
        assert result["evaluations"] == 3
        assert 0 < result["min_fraction_of_best"] <= result["median_fraction_of_best"] <= 1.0
