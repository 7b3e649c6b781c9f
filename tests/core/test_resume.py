"""SIGKILL the driver mid-run, resume it, and find exactly the budgeted work: nothing lost or doubled."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.killed_run import BUDGET as KILLED_BUDGET
from tests.support.killed_run import KilledRun, wait_for_work_in_flight
from tests.support.library_rows import count, polled_count

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BUDGET = 7

pytestmark = pytest.mark.slow


def _evokernel(*args: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "evokernel", "run", *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_sigkill_then_resume_gives_exactly_the_budget(killed_run: KilledRun) -> None:
    """The session's run (tests/support/killed_run.py): SIGKILLed once the seed was evaluated and
    the first generation's work was in flight, then resumed."""
    db = killed_run.db
    assert killed_run.evaluated_at_kill < KILLED_BUDGET
    assert f"resuming run {killed_run.run_id}" in killed_run.log.read_text()
    _check_exactly_the_budget(db, KILLED_BUDGET)


def test_sigterm_then_resume_gives_exactly_the_budget(tmp_path: Path) -> None:
    db, log = tmp_path / "lib.db", tmp_path / "run.log"
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"name: resume-test\ntasks: [{FIXTURES / 'tasks' / 'axpy.py'}]\nlibrary: {db}\n"
        f"budget: {{evaluations: {BUDGET}}}\nstrategy: {{name: pike_b, params: {{branches: 3, top_k: 2}}}}\n"
        "evaluation: {timeout_s: 120, timing: {warmup_ms: 1, min_reps: 3, max_ms: 50}}\n"
    )
    driver = _evokernel(str(config), log=log)
    wait_for_work_in_flight(driver, db, log)
    os.kill(driver.pid, signal.SIGTERM)
    returncode = driver.wait(timeout=120)
    # A scheduler's stop: the CLI's own exit, not death by the signal.
    assert returncode == 143, log.read_text()
    assert "stopped by SIGTERM" in log.read_text()
    evaluated_at_kill = count(db, "select count(*) from evaluations")
    assert evaluated_at_kill < BUDGET
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select id from runs").fetchone()

    resumed = _evokernel(str(config), "--resume", run_id, log=log)
    try:
        assert resumed.wait(timeout=300) == 0, log.read_text()
    finally:
        os.killpg(driver.pid, signal.SIGKILL) if _group_alive(driver.pid) else None

    assert f"resuming run {run_id}" in log.read_text()
    _check_exactly_the_budget(db, BUDGET)


def _check_exactly_the_budget(db: Path, budget: int) -> None:
    assert count(db, "select count(*) from runs") == 1
    assert count(db, "select count(*) from candidates") == budget
    assert count(db, "select count(*) from candidates where status = 'pending'") == 0
    assert count(db, "select count(*) from evaluations") == budget  # one evaluation per candidate
    assert count(db, "select count(distinct candidate_id) from evaluations") == budget
    assert count(db, "select count(*) from proposals where state = 'open'") == 0
    assert count(db, "select count(*) from proposals where state = 'done'") == budget
    assert count(db, "select count(distinct source_hash) from candidates") == budget
    assert count(db, "select count(*) from runs where status = 'finished'") == 1
    assert count(db, "select count(*) from run_events where kind = 'resumed'") == 1


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# ---- instant parts: exact resume after SIGKILL or SIGINT at several points ----------------------
# A driver subprocess (tests/core/instant_driver.py) runs the real engine and library on the
# instant evaluator and mutator of evokernel.conformance, slowed down so signals land mid-flight.
# Its final library must equal, row for row (ids aside), that of an uninterrupted run.

ROOT = Path(__file__).resolve().parents[2]
SPECS: dict[str, dict[str, Any]] = {
    "pike_b": {
        "strategy": "pike_b",
        "params": {"branches": 4, "top_k": 2, "fix_rounds": 2},
        "tasks": 2,
        "budget": {"evaluations": 24},
        "llm": True,
        "eval_delay_s": 0.04,
        "mutate_delay_s": 0.02,
    },
    "pike_o": {
        "strategy": "pike_o",
        "params": {
            "islands": 3,
            "batch": 2,
            "migration_interval": 2,
            "reset": "funsearch",
            "reset_interval": 3,
        },
        "tasks": 1,
        "budget": {"evaluations": 30},
        "eval_delay_s": 0.04,
    },
}


def _driver(db: Path, spec: dict, *resume: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.core.instant_driver", str(db), json.dumps(spec), *resume],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait_for(db: Path, evaluations: int, driver: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while polled_count(db, "select count(*) from evaluations") < evaluations:
        assert driver.poll() is None, (driver.stdout.read() if driver.stdout else b"").decode()
        assert time.monotonic() < deadline, "the driver made no progress"
        time.sleep(0.02)


def _uninterrupted(tmp_path: Path, spec: dict) -> list:
    from evokernel.conformance import QuietReporter, library_fingerprint
    from evokernel.db import SolutionLibrary
    from evokernel.run.runner import run_experiment
    from tests.core.instant_driver import setup

    db = tmp_path / "reference.db"
    config, tasks, evaluator, mutator = setup(str(db), {**spec, "eval_delay_s": 0, "mutate_delay_s": 0})
    summary = run_experiment(
        config, reporter=QuietReporter(), pool=evaluator, mutators=[mutator], tasks=tasks
    )
    lib = SolutionLibrary(db)
    return library_fingerprint(lib, summary.run_id)


def _check_complete(db: Path, spec: dict) -> list:
    from evokernel.conformance import library_fingerprint
    from evokernel.db import SolutionLibrary

    budget = spec["budget"]["evaluations"] * spec["tasks"]
    assert count(db, "select count(*) from runs") == 1
    assert count(db, "select count(*) from runs where status = 'finished'") == 1
    assert count(db, "select count(*) from proposals where state = 'open'") == 0
    assert count(db, "select count(*) from candidates where status = 'pending'") == 0
    assert count(db, "select count(*) from candidates") == budget
    assert count(db, "select count(*) from evaluations") == budget  # none evaluated twice
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select id from runs").fetchone()
    return library_fingerprint(SolutionLibrary(db), run_id)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_sigkill_at_several_points_then_resume_equals_an_uninterrupted_run(tmp_path: Path, name: str) -> None:
    spec = SPECS[name]
    db = tmp_path / "killed.db"
    driver = _driver(db, spec)
    run_id = ""
    for kill_at in (3, 11, 19):  # seed phase, mid-run, late: each time with work in flight
        _wait_for(db, kill_at, driver)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        assert count(db, "select count(*) from runs where status = 'finished'") == 0
        with sqlite3.connect(db) as conn:
            (run_id,) = conn.execute("select id from runs").fetchone()
        driver = _driver(db, spec, "--resume", run_id)
    assert driver.wait(timeout=120) == 0, (driver.stdout.read() if driver.stdout else b"").decode()
    assert _check_complete(db, spec) == _uninterrupted(tmp_path, spec)
    assert count(db, "select count(*) from run_events where kind = 'resumed'") == 3


def test_sigint_finishes_in_flight_work_and_a_second_stops_at_once(tmp_path: Path) -> None:
    spec = {**SPECS["pike_b"], "eval_delay_s": 0.3}
    db = tmp_path / "sigint.db"
    driver = _driver(db, spec)
    _wait_for(db, 3, driver)
    os.kill(driver.pid, signal.SIGINT)  # once: finish what is in flight, start nothing new
    assert driver.wait(timeout=30) == 130
    assert count(db, "select count(*) from runs where status = 'interrupted'") == 1
    assert count(db, "select count(*) from proposals where state = 'open'") == 0
    assert count(db, "select count(*) from candidates where status = 'pending'") == 0
    assert count(db, "select count(*) from evaluations") < spec["budget"]["evaluations"] * spec["tasks"]
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select id from runs").fetchone()

    driver = _driver(db, {**spec, "eval_delay_s": 2.0}, "--resume", run_id)
    _wait_for(db, count(db, "select count(*) from evaluations") + 1, driver)
    time.sleep(0.3)  # evaluations of 0-4 s are in flight now
    os.kill(driver.pid, signal.SIGINT)
    time.sleep(0.1)
    os.kill(driver.pid, signal.SIGINT)  # twice: stop at once, abandoning work in flight
    assert driver.wait(timeout=30) == 130
    # Had it finished the work in flight, as after one SIGINT, nothing would be left open.
    abandoned = count(db, "select count(*) from proposals where state = 'open'") + count(
        db, "select count(*) from candidates where status = 'pending'"
    )
    assert abandoned > 0
    assert count(db, "select count(*) from run_events where kind = 'sigint'") == 3
    assert count(db, "select count(*) from run_events where message = 'stopping at once'") == 1

    driver = _driver(db, spec, "--resume", run_id)  # re-runs what was abandoned, counts nothing twice
    assert driver.wait(timeout=120) == 0, (driver.stdout.read() if driver.stdout else b"").decode()
    assert _check_complete(db, spec) == _uninterrupted(tmp_path, spec)


def test_sigterm_stops_at_once_and_resume_finishes_the_budget(tmp_path: Path) -> None:
    """A batch scheduler's SIGTERM: the driver stops at once, exits 143 (not killed by the signal),
    records why, and ``--resume`` re-runs the work it left open without counting anything twice."""
    spec = {**SPECS["pike_b"], "eval_delay_s": 2.0}
    db = tmp_path / "sigterm.db"
    driver = _driver(db, spec)
    _wait_for(db, 2, driver)
    time.sleep(0.3)  # evaluations of 0-4 s are in flight now
    os.kill(driver.pid, signal.SIGTERM)
    assert driver.wait(timeout=30) == 143
    assert count(db, "select count(*) from runs where status = 'interrupted'") == 1
    assert count(db, "select count(*) from run_events where kind = 'sigterm'") == 1
    abandoned = count(db, "select count(*) from proposals where state = 'open'") + count(
        db, "select count(*) from candidates where status = 'pending'"
    )
    assert abandoned > 0  # stopped at once: what was in flight is open, not finished
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select id from runs").fetchone()
    driver = _driver(db, {**spec, "eval_delay_s": 0.0}, "--resume", run_id)
    assert driver.wait(timeout=120) == 0, (driver.stdout.read() if driver.stdout else b"").decode()
    assert _check_complete(db, spec) == _uninterrupted(tmp_path, spec)
