"""One real `evokernel run` from the command line, SIGKILLed mid-run and resumed with ``--resume``.

Three tests need exactly this (each used to make its own, ~20 s of two Ray starts and a CPU
evaluation pool each): test_cleanup (the killed run and the finished one leave no directory and no
process), test_resume (the resumed run holds exactly the budget, nothing lost or doubled) and
test_export (export --verify on a real run's library). The session fixture ``killed_run``
(tests/conftest.py) makes it once.

The user's layout: ``exp/quick.yaml`` with its task beside it, named relative to the config, the
library relative to the working directory, both commands typed from ``root``. Both runs get a
private TMPDIR (``tmp``), so what they leave is told apart from what the rest of the suite runs;
nothing is killed but the driver until the session ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.library_rows import count, polled_count

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BUDGET = 7


@dataclass(frozen=True)
class KilledRun:
    root: Path  # the working directory of both commands
    db: Path
    log: Path  # both commands' stdout and stderr
    tmp: Path  # their TMPDIR
    run_id: str
    evaluated_at_kill: int


def wait_for_work_in_flight(
    driver: subprocess.Popen[bytes], db: Path, log: Path, limit_s: float = 240
) -> None:
    """Until the run's seed is evaluated and its first generation's work is in flight: the moment
    a stopped run has something to lose."""
    deadline = time.monotonic() + limit_s
    while (
        polled_count(db, "select count(*) from evaluations") < 2
        or polled_count(db, "select count(*) from candidates where status = 'pending'")
        + polled_count(db, "select count(*) from proposals where state = 'open'")
        < 1
    ):
        assert driver.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "run made no progress: " + log.read_text()
        time.sleep(0.2)


def _evokernel(root: Path, tmp: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "evokernel", "run", "exp/quick.yaml", *extra],
        cwd=root,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def kill_and_resume(root: Path, tmp: Path) -> KilledRun:
    exp = root / "exp"
    exp.mkdir(parents=True)
    for name in ("axpy.py", "axpy.seed.py"):
        shutil.copy(FIXTURES / "tasks" / name, exp / name)
    (exp / "quick.yaml").write_text(
        "name: quick\ntasks: [axpy.py]\nlibrary: lib.db\n"
        f"budget: {{evaluations: {BUDGET}}}\nstrategy: {{name: pike_b, params: {{branches: 3, top_k: 2}}}}\n"
        "evaluation: {timeout_s: 120, timing: {warmup_ms: 1, min_reps: 3, max_ms: 50}}\n"
    )
    db, log = root / "lib.db", root / "run.log"
    driver = _evokernel(root, tmp, log)
    wait_for_work_in_flight(driver, db, log)
    # The driver alone: its actors, fork-servers and candidates are left to find that out.
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    evaluated_at_kill = count(db, "select count(*) from evaluations")
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select id from runs").fetchone()

    # The resumed run's actors sweep what the killed ones left, and remove their own at exit.
    resumed = _evokernel(root, tmp, log, "--resume", run_id)
    assert resumed.wait(timeout=300) == 0, log.read_text()
    return KilledRun(root, db, log, tmp, run_id, evaluated_at_kill)
