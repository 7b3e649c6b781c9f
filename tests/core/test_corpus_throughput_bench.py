"""The throughput benchmarks' steady rate (experiments/bench/corpus_throughput.py, issue 37): the
verdicts after the pipeline's fill, over the time after it, on made-up verdict times."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script as a module; it imports its sibling benchmarks as the command line runs it."""
    monkeypatch.syspath_prepend(str(ROOT / "experiments" / "bench"))
    path = ROOT / "experiments" / "bench" / "corpus_throughput.py"
    spec = importlib.util.spec_from_file_location("corpus_throughput", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_steady_rate_leaves_out_the_fill(monkeypatch: pytest.MonkeyPatch) -> None:
    steady = bench(monkeypatch).steady_per_min
    # 4 in flight; nothing for 60 s (the first builds), then one verdict every 3 s to a 180 s cut:
    # 41 verdicts in 180 s is 13.7/min overall, 20/min once the pipeline is full.
    done_at = [60.0 + 3 * i for i in range(41)]
    assert steady(done_at, 180.0, 4) == round(37 / (180.0 - 69.0) * 60, 2) == 20.0
    assert steady(done_at[::-1], 180.0, 4) == 20.0  # verdict order does not matter
    # Too few verdicts to tell: the fill is at most half of them; none after it is no figure.
    assert steady([100.0, 110.0, 120.0, 130.0], 150.0, 16) == round(2 / 40 * 60, 2)
    assert steady([100.0], 150.0, 16) is None and steady([], 150.0, 16) is None


def test_a_stream_files_rate_runs_from_its_first_submission_to_its_last_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rate = bench(monkeypatch).stream_throughput
    # Submitted at 1000 s (the earliest ended_at - duration_s), then a verdict every 3 s from 60 s
    # in: the same run as above, seen as field_verdicts.py streams it (the last verdict at 180 s).
    rows: list[dict[str, float | None]] = [
        {"ended_at": 1060.0 + 3 * i, "duration_s": 60.0 + i} for i in range(41)
    ]
    rows.append({"ended_at": 1100.0, "duration_s": None})  # a row without times is not counted
    assert rate(rows, 4) == {"verdicts": 41, "wall_s": 180.0, "per_min": 13.67, "steady_per_min": 20.0}
    assert rate([], 4) is None
