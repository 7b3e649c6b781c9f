"""Nothing outlives a run: no scratch directory and no process, after a finished run, a killed run
(once the next run on the node has started) and a crashed evaluator.

Each run gets a private TMPDIR, so what it leaves is told apart from what other runs on the same
machine (other tests, other users) are doing. Ray's own session logs (``<tmp>/ray``) are kept by
Ray on purpose and are not counted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evokernel.evaluation.scratch import LOCK_NAME, ScratchDir, sweep_stale
from tests.support.killed_run import BUDGET, KilledRun
from tests.support.leaks import describe, scratch_left, wait_for_no_processes
from tests.support.library_rows import count


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
def test_a_finished_run_and_a_killed_run_leave_no_directory_and_no_process(killed_run: KilledRun) -> None:
    """The session's killed-then-resumed run (tests/support/killed_run.py): its driver got SIGKILL
    once the first evaluations were recorded, with work in flight; the resumed run's actors swept
    what the killed ones left, and removed their own at exit."""
    # The killed cluster's processes share the driver's fate: the actors' fork-servers see their
    # actor go and kill their candidates' process groups at once. Ray's two agents, once their
    # raylet is gone, report its death to the stopped GCS for Ray's fixed 60 s before they exit
    # (here, mostly the resumed run's: its raylet's log did not always show the SIGTERM); an agent
    # whose raylet is gone is exiting and not counted (leaks.orphaned_ray_agent), a raylet is.
    left = wait_for_no_processes(killed_run.tmp, timeout_s=240.0)
    assert not left, "left running:\n" + describe(left)
    assert scratch_left(killed_run.tmp) == []
    assert killed_run.evaluated_at_kill >= 1
    assert count(killed_run.db, "select count(*) from evaluations") == BUDGET
