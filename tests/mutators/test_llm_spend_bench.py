"""The llm_spend benchmark runs end to end on a CPU (a few evaluations per strategy) and its last
line is one JSON object with the figures issue 36 asks for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "bench" / "llm_spend.py"


@pytest.mark.slow
def test_llm_spend_runs_both_strategies_and_reports_its_figures() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--evaluations", "8", "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result["results"]) == {"pike_b", "pike_o"}
    for figures in result["results"].values():
        assert figures["evaluated"] == 8 and figures["llm_calls"] >= 8
        assert 0.0 <= figures["wasted_share"] <= 1.0 and figures["identical_prompts"] == 0
        assert "seed" in figures["prompt_chars"] and figures["prompt_chars"]["seed"]["median"] > 0
    assert "ideas" in result["results"]["pike_b"]["prompt_chars"]  # PIKE-B's seeds start from ideas
