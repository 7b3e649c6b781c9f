"""One CPU for both sides of a paired timing (evaluation/cpu_pin.py), on real processes and threads."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evokernel.evaluation.cpu_pin import current_cpu, one_cpu, threads_of

# A process with two idle threads that starts a third when its stdin gets a line.
CHILD = """
import sys, threading, time
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print("started", flush=True)
time.sleep(60)
"""


def allowed(tid: int) -> set[int]:
    return os.sched_getaffinity(tid)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to see a pin")
def test_every_thread_shares_the_callers_cpu_in_the_window_and_gets_its_own_set_back(
    child: subprocess.Popen[str],
) -> None:
    before = {tid: allowed(tid) for tid in threads_of(child.pid)}
    mine = os.sched_getaffinity(0)
    assert len(before) >= 2 and all(len(mask) >= 2 for mask in before.values())
    with one_cpu([child.pid]) as record:
        cpu = record["cpu"]
        assert os.sched_getaffinity(0) == {cpu} and current_cpu() == cpu
        assert record["threads"] == len(before) and "error" not in record
        assert all(allowed(tid) == {cpu} for tid in threads_of(child.pid))
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "started"
        started = set(threads_of(child.pid)) - set(before)
        assert started and all(allowed(tid) == {cpu} for tid in started)  # inherited the pin
    assert os.sched_getaffinity(0) == mine
    for tid in threads_of(child.pid):
        assert allowed(tid) == before.get(tid, before[child.pid])  # the new thread: its process's set
    assert record["moved"] == 0


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to see a pin")
def test_a_thread_that_moves_itself_off_the_cpu_is_counted(child: subprocess.Popen[str]) -> None:
    mine = os.sched_getaffinity(0)
    with one_cpu([child.pid]) as record:
        other = min(mine - {record["cpu"]})
        os.sched_setaffinity(child.pid, {other})  # as the worker's main thread could do itself
    assert record["moved"] == 1


def test_a_process_that_is_gone_is_no_error() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    mine = os.sched_getaffinity(0)
    with one_cpu([gone.pid]) as record:
        assert record["threads"] == 0 and "error" not in record
    assert os.sched_getaffinity(0) == mine


CLAIMER = """
import sys, time
from pathlib import Path
from evokernel.evaluation.cpu_pin import one_cpu
with one_cpu([], Path(sys.argv[1])) as record:
    print(record["cpu"], record["claimed"], flush=True)
    time.sleep(60)
"""


def test_two_windows_never_share_a_cpu_and_a_dead_windows_cpu_is_free(tmp_path: Path) -> None:
    claims = tmp_path / "cpus"
    claimer = subprocess.Popen(
        [sys.executable, "-c", CLAIMER, str(claims)], stdout=subprocess.PIPE, text=True
    )
    mine = os.sched_getaffinity(0)
    try:
        assert claimer.stdout is not None
        theirs, claimed = claimer.stdout.readline().split()
        cpu = int(theirs)
        assert claimed == "True"
        if len(mine) > 1:
            with one_cpu([], claims) as record:
                assert record["cpu"] != cpu and record["claimed"]
        os.sched_setaffinity(0, {cpu})  # only the claimed CPU left to this thread
        with one_cpu([], claims) as record:
            assert (record["cpu"], record["claimed"]) == (cpu, False)  # shared, and it says so
        claimer.kill()
        claimer.wait()
        with one_cpu([], claims) as record:  # the kernel dropped the dead window's claim
            assert (record["cpu"], record["claimed"]) == (cpu, True)
    finally:
        os.sched_setaffinity(0, mine)
        claimer.kill()
        claimer.wait()
