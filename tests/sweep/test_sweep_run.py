"""Sweeps end to end: cells on one pool, each with its own budget; SIGKILL mid-way and resume."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evokernel.analysis import get_sweep, list_sweeps
from evokernel.cli import main
from evokernel.conformance import InstantEvaluator, QuietReporter
from evokernel.db import SolutionLibrary
from evokernel.sweep.runner import run_sweep
from tests.report.browser import check_in_browser, chromium_path
from tests.support.library_rows import count, polled_count

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BUDGET = 6


def _project(tmp_path: Path) -> Path:
    """exp/exp.yaml with its task beside it, named relative to the config (as users write them)."""
    exp = tmp_path / "exp"
    (exp / "tasks").mkdir(parents=True)
    for name in ("axpy.py", "axpy.seed.py"):
        shutil.copy(FIXTURES / "tasks" / name, exp / "tasks" / name)
    (exp / "exp.yaml").write_text(
        "name: sweep-test\nlibrary: lib.db\n"
        f"budget: {{evaluations: {BUDGET}}}\n"
        "evaluation: {timeout_s: 120, timing: {warmup_ms: 1, min_reps: 3, max_ms: 50}}\n"
    )
    return exp / "exp.yaml"


def test_cells_share_one_pool_with_their_own_budgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    pool = InstantEvaluator(size=2)
    items = ["tasks=[tasks/axpy.py]", "strategy.name=greedy,random", "seed=0,1", "budget.evaluations=3,5"]
    summary = run_sweep(config, items, pool=pool, reporter_for=lambda i, r: QuietReporter())
    assert not summary.interrupted and len(summary.runs) == 8
    lib = SolutionLibrary(tmp_path / "lib.db")
    sweep = get_sweep(lib, summary.sweep_id)
    assert sweep.status == "finished" and sweep.axes == ("strategy.name", "seed", "budget.evaluations")
    for cell in sweep.cells:
        assert cell.evaluations == cell.budget == cell.point["budget.evaluations"]
        assert cell.config["strategy"]["name"] == cell.point["strategy.name"]
    assert pool.evaluated <= sum(c.budget for c in sweep.cells)  # one pool served every cell

    # Resuming a finished sweep runs nothing; a different command line is refused.
    again = run_sweep(
        config, items, resume=summary.sweep_id, pool=pool, reporter_for=lambda i, r: QuietReporter()
    )
    assert again.summaries == {} and len(list_sweeps(lib)) == 1
    with pytest.raises(Exception, match="different sweep"):
        run_sweep(config, [*items[:2], "seed=0,2", items[3]], resume=summary.sweep_id, pool=pool)

    capsys.readouterr()
    assert main(["runs", "--library", str(tmp_path / "lib.db")]) == 0
    out = capsys.readouterr().out
    assert f"sweep {summary.sweep_id} 'sweep-test': finished, 8 cells" in out
    assert "strategy.name=random seed=1 budget.evaluations=5" in out


def _sweep(cwd: Path, *args: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "evokernel", "sweep", *args],
        cwd=cwd,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


@pytest.mark.slow
def test_sigkill_mid_sweep_then_resume_finishes_every_cell_exactly(tmp_path: Path) -> None:
    _project(tmp_path)
    db, log = tmp_path / "lib.db", tmp_path / "sweep.log"
    # The command line a user types, relative paths and all; resume repeats it with --resume.
    line = ["exp/exp.yaml", "tasks=[tasks/axpy.py]", "strategy.name=pike_b,greedy", "seed=0,1"]
    driver = _sweep(tmp_path, *line, log=log)
    deadline = time.monotonic() + 240
    while polled_count(db, "select count(*) from evaluations") < 8:
        assert driver.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "sweep made no progress: " + log.read_text()
        time.sleep(0.2)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(driver.pid, signal.SIGKILL)  # Ray's workers of the killed driver
    at_kill = {
        run: count(db, f"select count(*) from candidates where run_id = '{run}' and status != 'pending'")
        for run in _runs(db)
    }
    assert len(at_kill) == 4 and sum(at_kill.values()) < 4 * BUDGET
    assert all(n >= 1 for n in at_kill.values()), at_kill  # the cells ran concurrently
    finished_at_kill = {
        r for r in at_kill if count(db, f"select count(*) from runs where id = '{r}' and status = 'finished'")
    }
    with sqlite3.connect(db) as conn:
        (sweep_id,) = {row[0] for row in conn.execute("select json_extract(config, '$.sweep.id') from runs")}

    resumed = _sweep(tmp_path, *line, "--resume", sweep_id, log=log)
    try:
        assert resumed.wait(timeout=300) == 0, log.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(resumed.pid, signal.SIGKILL)
    text = log.read_text()
    assert f"resuming sweep {sweep_id}: 4 cell(s)" in text
    for run in _runs(db):
        where = f"from candidates where run_id = '{run}'"
        assert count(db, f"select count(*) {where}") == BUDGET
        assert count(db, f"select count(*) {where} and status = 'pending'") == 0
        assert (
            count(db, f"select count(*) from evaluations where candidate_id in (select id {where})") == BUDGET
        )
        assert count(db, f"select count(*) from proposals where run_id = '{run}' and state = 'open'") == 0
        assert count(db, f"select count(*) from runs where id = '{run}' and status = 'finished'") == 1
        resumes = count(db, f"select count(*) from run_events where run_id = '{run}' and kind = 'resumed'")
        assert resumes == (0 if run in finished_at_kill else 1)

    # The report of that sweep, from the library alone, in a real browser.
    html, png = tmp_path / "report.html", tmp_path / "png"
    assert main(["report", sweep_id, "--library", str(db), "--html", str(html), "--png", str(png)]) == 0
    assert len(list(png.iterdir())) == 2 + 4 * 2
    chromium_path()
    facts = check_in_browser(html, tmp_path / "sweep_screenshot.png")
    assert facts["sweepRows"] == 3 and facts["taskRows"] == 4 * 2


def _runs(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("select id from runs order by id")]


@pytest.mark.parametrize(
    "stops",
    [[signal.SIGINT], [signal.SIGINT, signal.SIGINT], [signal.SIGTERM]],
    ids=["sigint", "sigint-twice", "sigterm"],
)
def test_a_signal_stops_every_cell_and_resume_finishes_them(
    tmp_path: Path, stops: list[signal.Signals]
) -> None:
    """SIGINT once: every cell finishes what it has in flight. SIGINT twice (as GNU timeout sends
    it: to the process and to its group) or SIGTERM: every cell stops at once, its open work left
    in the library, with no traceback. Either way resuming the sweep completes every cell."""
    from tests.sweep.sweep_driver import BUDGET

    db = tmp_path / "lib.db"
    root = Path(__file__).resolve().parents[2]
    driver = [sys.executable, "-m", "tests.sweep.sweep_driver", str(db)]
    # Twice: evaluations slow enough that every cell still has work in flight at the second.
    slow = {**os.environ, "SWEEP_DRIVER_DELAY_S": "4" if len(stops) > 1 else "0.4"}
    first = subprocess.Popen(driver, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=slow)

    def wait_for(query: str, least: int) -> None:
        deadline = time.monotonic() + 120
        while polled_count(db, query) < least:
            assert first.poll() is None and time.monotonic() < deadline, first.stdout.read()  # type: ignore[union-attr]
            time.sleep(0.05)

    wait_for("select count(*) from evaluations", 4 if len(stops) == 1 else 2)
    for i, stop in enumerate(stops):
        if i:  # signals sent back to back can merge into one: send the next once the first is seen
            wait_for("select count(*) from run_events where kind = 'sigint'", 4)
        os.kill(first.pid, stop)
    out, _ = first.communicate(timeout=120)
    assert first.returncode == (130 if stops[0] == signal.SIGINT else 143), out
    assert b"Traceback" not in out and b"never retrieved" not in out and b"destroyed" not in out, out
    assert count(db, "select count(*) from runs where status = 'interrupted'") == 4
    left_open = count(db, "select count(*) from candidates where status = 'pending'") + count(
        db, "select count(*) from proposals where state = 'open'"
    )
    if stops == [signal.SIGINT]:
        assert left_open == 0
    elif stops[0] == signal.SIGINT:
        assert count(db, "select count(*) from run_events where kind = 'sigint'") == 2 * 4
    else:
        assert count(db, "select count(*) from run_events where kind = 'sigterm'") == 4
    assert count(db, "select count(*) from evaluations") < 4 * BUDGET
    with sqlite3.connect(db) as conn:
        (sweep_id,) = {row[0] for row in conn.execute("select json_extract(config, '$.sweep.id') from runs")}

    second = subprocess.run([*driver, sweep_id], cwd=root, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    for run in _runs(db):
        assert (
            count(db, f"select count(*) from candidates where run_id = '{run}' and status != 'pending'")
            == BUDGET
        )
    assert count(db, "select count(*) from evaluations") == 4 * BUDGET
    assert count(db, "select count(*) from runs where status = 'finished'") == 4
