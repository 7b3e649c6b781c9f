"""`evokernel report` from the library alone: text, PNGs and one self-contained HTML, checked in
a real headless chromium (no console error, every plot decoded, the tables filled)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from evokernel.cli import main
from evokernel.conformance import (
    InstantEvaluator,
    InstantMutator,
    QuietReporter,
    instant_config,
    instant_task,
    run_instant,
)
from evokernel.db import SolutionLibrary
from evokernel.report.write import write_report
from evokernel.sweep.runner import run_sweep
from tests.report.browser import check_in_browser, chromium_path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_run_report_text_png_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = [instant_task("alpha"), instant_task("beta")]
    config = instant_config("greedy", None, tmp_path / "lib.db", tasks, evaluations=10)
    run_id = run_instant(
        config, tasks, mutator=InstantMutator(incorrect_rate=0.4, uses_llm=True, cost_usd=0.02)
    )
    # alpha's best kernel profiled again (as evaluation.profiling records it): its speed of light shows.
    lib = SolutionLibrary(tmp_path / "lib.db")
    best = lib.top(run_id, "alpha", 1)[0]
    assert best.evaluation is not None
    profile = {"status": "ok", "bottleneck": "memory-bound", "why": "DRAM 84 %", "sol": {"share": 0.71}}
    details = {**best.evaluation.details, "profiling": profile}
    lib.record_evaluation(best.candidate.id, dataclasses.replace(best.evaluation, details=details))
    html, png = tmp_path / "out" / "report.html", tmp_path / "out" / "png"
    assert (
        main(["report", "--library", str(tmp_path / "lib.db"), "--html", str(html), "--png", str(png)]) == 0
    )
    out = capsys.readouterr().out
    alpha_row = next(line for line in out.splitlines() if line.startswith("alpha "))
    assert "71%" in alpha_row and "memory-bound" in alpha_row
    assert '<td class="num">71%</td><td>memory-bound</td>' in html.read_text()
    assert f"run {run_id} 'conformance': finished, 20/20 evaluations" in out
    assert "alpha lineage: #" in out and "failed" in out
    assert sorted(p.name for p in png.iterdir()) == ["convergence.png", "fast_p.png"]
    text = html.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text  # offline
    chromium_path()
    facts = check_in_browser(html, tmp_path / "run.png")
    assert [alt for alt, _ok, _w in facts["images"]] == ["convergence", "fast_p"]
    assert facts["taskRows"] == 3 and facts["lineageRows"] >= 3 and facts["usageRows"] == 4
    assert facts["failureRows"] >= 2 and facts["sweepRows"] == 0


def test_sweep_report_in_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    for name in ("axpy.py", "axpy.seed.py"):
        shutil.copy(FIXTURES / "tasks" / name, exp / name)
    (exp / "exp.yaml").write_text("name: rep\ntasks: [axpy.py]\nlibrary: lib.db\nbudget: {evaluations: 4}\n")
    monkeypatch.chdir(tmp_path)
    summary = run_sweep(
        exp / "exp.yaml",
        ["strategy.name=greedy,random", "seed=0,1"],
        pool=InstantEvaluator(),
        reporter_for=lambda i, r: QuietReporter(),
    )
    lib = SolutionLibrary(tmp_path / "lib.db")
    written = write_report(lib, summary.sweep_id, html=tmp_path / "sweep.html", png_dir=tmp_path / "png")
    assert "strategy.name  seeds" in written.text and "greedy" in written.text
    names = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert names[-2:] == ["sweep_cells.png", "sweep_convergence.png"] and len(names) == 2 + 4 * 2
    chromium_path()
    facts = check_in_browser(tmp_path / "sweep.html", tmp_path / "sweep_screenshot.png")
    assert facts["sweepRows"] == 3  # header + one row per strategy (seeds folded)
    assert facts["taskRows"] == 4 * 2 and len(facts["images"]) == 2 + 4 * 2
    assert facts["title"] == f"evokernel sweep {summary.sweep_id} 'rep'"
    assert str(tmp_path / "lib.db") in (tmp_path / "sweep.html").read_text()
