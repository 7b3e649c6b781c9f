"""SIGKILL the driver mid-run, resume it, and find exactly the budgeted work: nothing lost or doubled."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BUDGET = 7

pytestmark = pytest.mark.slow


def _count(db: Path, sql: str) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:  # tables not created yet
        return 0


def _evokernel(*args: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "evokernel", "run", *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_sigkill_then_resume_gives_exactly_the_budget(tmp_path: Path) -> None:
    db, log = tmp_path / "lib.db", tmp_path / "run.log"
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"name: resume-test\ntasks: [{FIXTURES / 'tasks' / 'axpy.py'}]\nlibrary: {db}\n"
        f"budget: {{evaluations: {BUDGET}}}\nstrategy: {{name: pike_b, params: {{branches: 3, top_k: 2}}}}\n"
        "evaluation: {timeout_s: 120, timing: {warmup_ms: 1, min_reps: 3, max_ms: 50}}\n"
    )
    driver = _evokernel(str(config), log=log)
    deadline = time.monotonic() + 240
    # Kill once the seed is evaluated and the first generation's work is in flight.
    while (
        _count(db, "select count(*) from evaluations") < 2
        or _count(db, "select count(*) from candidates where status = 'pending'")
        + _count(db, "select count(*) from proposals where state = 'open'")
        < 1
    ):
        assert driver.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "run made no progress: " + log.read_text()
        time.sleep(0.2)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    evaluated_at_kill = _count(db, "select count(*) from evaluations")
    assert evaluated_at_kill < BUDGET
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select id from runs").fetchone()

    resumed = _evokernel(str(config), "--resume", run_id, log=log)
    try:
        assert resumed.wait(timeout=300) == 0, log.read_text()
    finally:
        os.killpg(driver.pid, signal.SIGKILL) if _group_alive(driver.pid) else None

    assert f"resuming run {run_id}" in log.read_text()
    assert _count(db, "select count(*) from runs") == 1
    assert _count(db, "select count(*) from candidates") == BUDGET
    assert _count(db, "select count(*) from candidates where status = 'pending'") == 0
    assert _count(db, "select count(*) from evaluations") == BUDGET  # one evaluation per candidate
    assert _count(db, "select count(distinct candidate_id) from evaluations") == BUDGET
    assert _count(db, "select count(*) from proposals where state = 'open'") == 0
    assert _count(db, "select count(*) from proposals where state = 'done'") == BUDGET
    assert _count(db, "select count(distinct source_hash) from candidates") == BUDGET
    assert _count(db, "select count(*) from runs where status = 'finished'") == 1
    assert _count(db, "select count(*) from run_events where kind = 'resumed'") == 1


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
