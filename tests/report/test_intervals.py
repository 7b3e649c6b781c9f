"""Speedups with their 95 % interval as users read them (issue 35): `evokernel runs`, `evokernel
report` (text and HTML), `evokernel export` (table, manifest, file header) and the dataset; a figure
from before paired timing stays bare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evokernel.cli import main
from evokernel.db import SolutionLibrary
from evokernel.export.dataset import export_dataset
from tests.dashboard.test_intervals import paired_run

SHOWN = "2.05x [1.98-2.11]"


@pytest.fixture
def library(tmp_path: Path) -> tuple[str, str, int, int]:
    path = str(tmp_path / "lib.db")
    run_id, best, old = paired_run(path)
    return path, run_id, best, old


def _row(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(start))


def test_runs_and_report_show_the_interval(
    library: tuple[str, str, int, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, _best, _old = library
    assert main(["runs", "--library", path]) == 0
    assert SHOWN in _row(capsys.readouterr().out, run_id)
    html = tmp_path / "report.html"
    assert main(["report", run_id, "--library", path, "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert SHOWN in _row(out, "relu ")
    softmax = _row(out, "softmax ")
    assert "1.3x" in softmax and "[" not in softmax  # not measured paired: the bare figure
    assert "relu lineage: #" in out and f"mutate/fake/kernel-writer {SHOWN}" in out
    text = html.read_text()
    assert f'<td class="num">{SHOWN}</td>' in text and '<td class="num">1.3x</td>' in text


def test_export_manifest_header_and_dataset_carry_the_interval(
    library: tuple[str, str, int, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, best, old = library
    out = tmp_path / "out"
    assert main(["export", run_id, "--library", path, "--out", str(out)]) == 0
    assert SHOWN in _row(capsys.readouterr().out, "relu ")
    entries = {e["task"]: e for e in json.loads((out / "manifest.json").read_text())}
    relu, softmax = entries["relu"], entries["softmax"]
    assert (relu["speedup_eager"], relu["speedup_low"], relu["speedup_high"], relu["confirmed"]) == (
        2.05,
        1.98,
        2.11,
        True,
    )
    assert (softmax["speedup_low"], softmax["speedup_high"], softmax["confirmed"]) == (None, None, False)
    header = (out / relu["file"]).read_text().splitlines()[1]
    assert f"recorded: {SHOWN} vs eager (95 % interval) on" in header
    assert "recorded: 1.3x vs eager on" in (out / softmax["file"]).read_text()
    lib = SolutionLibrary(path)
    try:
        assert export_dataset(lib, run_id, tmp_path / "rows.jsonl") == 3
    finally:
        lib.close()
    rows = {r["candidate_id"]: r for r in map(json.loads, (tmp_path / "rows.jsonl").read_text().splitlines())}
    assert (rows[best]["speedup_low"], rows[best]["speedup_high"], rows[best]["confirmed"]) == (
        1.98,
        2.11,
        True,
    )
    assert (rows[old]["speedup_low"], rows[old]["confirmed"]) == (None, False)
