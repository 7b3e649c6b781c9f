"""Nothing outlives a run: no scratch directory and no process, after a finished run, a killed run
(once the next run on the node has started) and a crashed evaluator.

Each run gets a private TMPDIR, so what it leaves is told apart from what other runs on the same
machine (other tests, other users) are doing. Ray's own session logs (``<tmp>/ray``) are kept by
Ray on purpose and are not counted.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evokernel.evaluation.scratch import LOCK_NAME, ScratchDir, sweep_stale
from tests.support.leaks import describe, processes_using, scratch_left, wait_for_no_processes
from tests.support.library_rows import count, polled_count

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def private_tmp() -> Iterator[Path]:
    # Short, under /tmp: Ray's unix sockets live below TMPDIR and their paths must stay < 108 bytes.
    tmp = Path(tempfile.mkdtemp(prefix="ekt-", dir="/tmp"))
    try:
        yield tmp
    finally:
        for pid in processes_using(tmp, exiting_agents=True):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def _run(config: Path, tmp: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "evokernel", "run", str(config), *extra],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def test_a_scratch_dir_goes_on_close_and_a_dead_owners_dir_goes_at_the_next_start(tmp_path: Path) -> None:
    base = tmp_path / "base"
    mine = ScratchDir("actor", base)
    (mine.path / "candidate").mkdir()
    # An owner that dies without cleaning up (SIGKILL), and one that stays alive.
    code = (
        "import os, signal, sys; from pathlib import Path;"
        "from evokernel.evaluation.scratch import ScratchDir;"
        f"s = ScratchDir('actor', Path({str(base)!r})); print(s.path, flush=True);"
        "sys.stdin.readline() if sys.argv[1] == 'live' else os.kill(os.getpid(), signal.SIGKILL)"
    )
    live = subprocess.Popen(
        [sys.executable, "-c", code, "live"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert live.stdout is not None
        live_dir = Path(live.stdout.readline().strip())
        dead = subprocess.run(
            [sys.executable, "-c", code, "dead"], capture_output=True, text=True, check=False
        )
        assert dead.returncode == -signal.SIGKILL
        dead_dir = Path(dead.stdout.strip())
        assert dead_dir.exists() and live_dir.exists()
        # A directory without our lock file is not ours: it is never swept.
        (base / "someone-else").mkdir()

        assert sweep_stale(base) == [dead_dir]
        assert not dead_dir.exists() and (live_dir / LOCK_NAME).exists() and mine.path.exists()
        assert (base / "someone-else").exists()
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait()
    mine.close()
    mine.close()  # twice is fine
    assert not mine.path.exists()


@pytest.mark.slow
def test_a_finished_run_and_a_killed_run_leave_no_directory_and_no_process(
    tmp_path: Path, private_tmp: Path
) -> None:
    db, log = tmp_path / "lib.db", tmp_path / "run.log"
    config = tmp_path / "exp.yaml"
    config.write_text(
        f"name: cleanup\ntasks: [{FIXTURES / 'tasks' / 'axpy.py'}]\nlibrary: {db}\n"
        "budget: {evaluations: 4}\nstrategy: {name: pike_b, params: {branches: 2, top_k: 2}}\n"
        "evaluation: {timeout_s: 120, timing: {warmup_ms: 1, min_reps: 3, max_ms: 50}}\n"
    )
    # 1. Killed mid-run: the driver gets SIGKILL once the first evaluation is recorded.
    driver = _run(config, private_tmp, log)
    deadline = time.monotonic() + 240
    while polled_count(db, "select count(*) from evaluations") < 1:
        assert driver.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "run made no progress: " + log.read_text()
        time.sleep(0.2)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select id from runs").fetchone()

    # 2. The resumed run's actors sweep what the killed ones left, and remove their own at exit.
    resumed = _run(config, private_tmp, log, "--resume", run_id)
    assert resumed.wait(timeout=300) == 0, log.read_text()
    # The killed cluster's processes share the driver's fate: the actors' fork-servers see their
    # actor go and kill their candidates' process groups at once. Ray's two agents, once their
    # raylet is gone, report its death to the stopped GCS for Ray's fixed 60 s before they exit
    # (here, mostly the resumed run's: its raylet's log did not always show the SIGTERM); an agent
    # whose raylet is gone is exiting and not counted (leaks.orphaned_ray_agent), a raylet is.
    left = wait_for_no_processes(private_tmp, timeout_s=240.0)
    assert not left, "left running:\n" + describe(left)
    assert scratch_left(private_tmp) == []
    assert count(db, "select count(*) from evaluations") == 4
