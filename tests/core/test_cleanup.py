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

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def private_tmp() -> Iterator[Path]:
    # Short, under /tmp: Ray's unix sockets live below TMPDIR and their paths must stay < 108 bytes.
    tmp = Path(tempfile.mkdtemp(prefix="ekt-", dir="/tmp"))
    try:
        yield tmp
    finally:
        for pid in _processes_using(tmp):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def _processes_using(tmp: Path) -> list[int]:
    """Live processes whose environment or command line names ``tmp`` (all of a run's processes
    inherit TMPDIR; sandboxed candidates get a TMPDIR below it)."""
    needle = str(tmp).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            status = (entry / "stat").read_text().split(") ", 1)[1].split()[0]
            if status == "Z":  # a zombie holds nothing; its parent reaps it
                continue
            if needle in (entry / "environ").read_bytes() or needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, IndexError):  # gone meanwhile, or not ours to read
            continue
    return found


def _scratch_left(tmp: Path) -> list[Path]:
    base = tmp / f"evokernel-{os.getuid()}"
    left = list(base.iterdir()) if base.exists() else []
    return left + [p for p in tmp.iterdir() if p.name.startswith("evk-")]


def _wait_until_clean(tmp: Path, timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (procs := _processes_using(tmp)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return procs


def _describe(pids: list[int]) -> str:
    out = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:160]
            out.append(f"{pid}: {cmdline!r}")
        except OSError:
            out.append(f"{pid}: (gone)")
    return "\n".join(out)


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


def _count(db: Path, sql: str) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db, timeout=5) as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")}
        if "evaluations" not in tables:  # the driver has not created the schema yet
            return 0
        return int(conn.execute(sql).fetchone()[0])


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
    while _count(db, "select count(*) from evaluations") < 1:
        assert driver.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "run made no progress: " + log.read_text()
        time.sleep(0.2)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    # Ray's processes share the driver's fate; the actors' fork-servers see their actor go and
    # kill their candidates' process groups.
    assert not (left := _wait_until_clean(private_tmp)), "left running after SIGKILL:\n" + _describe(left)
    with sqlite3.connect(db) as conn:
        (run_id,) = conn.execute("select id from runs").fetchone()

    # 2. The resumed run's actors sweep what the killed ones left, and remove their own at exit.
    resumed = _run(config, private_tmp, log, "--resume", run_id)
    assert resumed.wait(timeout=300) == 0, log.read_text()
    assert not (left := _wait_until_clean(private_tmp)), "left running after the run:\n" + _describe(left)
    assert _scratch_left(private_tmp) == []
    assert _count(db, "select count(*) from evaluations") == 4
