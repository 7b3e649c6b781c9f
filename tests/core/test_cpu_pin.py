"""One CPU for both sides of a paired timing (evaluation/cpu_pin.py), on real processes and threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evokernel.evaluation.cpu_pin import ThreadWait, current_cpu, one_cpu, threads_of

# Each CPU's speed is read and compared: another test's load on them would move it.
pytestmark = pytest.mark.serial

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
    with one_cpu([child.pid]) as window:
        record = window.record
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
    with one_cpu([child.pid]) as window:
        record = window.record
        other = min(mine - {record["cpu"]})
        os.sched_setaffinity(child.pid, {other})  # as the worker's main thread could do itself
    assert record["moved"] == 1


def test_a_process_that_is_gone_is_no_error() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    mine = os.sched_getaffinity(0)
    with one_cpu([gone.pid]) as window:
        record = window.record
        assert record["threads"] == 0 and "error" not in record
    assert os.sched_getaffinity(0) == mine


CLAIMER = """
import sys, time
from pathlib import Path
from evokernel.evaluation.cpu_pin import one_cpu
with one_cpu([], Path(sys.argv[1])) as window:
    record = window.record
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
            with one_cpu([], claims) as window:
                record = window.record
                assert record["cpu"] != cpu and record["claimed"]
        os.sched_setaffinity(0, {cpu})  # only the claimed CPU left to this thread
        with one_cpu([], claims) as window:
            record = window.record
            assert (record["cpu"], record["claimed"]) == (cpu, False)  # shared, and it says so
        claimer.kill()
        claimer.wait()
        with one_cpu([], claims) as window:
            record = window.record  # the kernel dropped the dead window's claim
            assert (record["cpu"], record["claimed"]) == (cpu, True)
    finally:
        os.sched_setaffinity(0, mine)
        claimer.kill()
        claimer.wait()


# A window at the lowest priority (nice 19), so that a busy process on a CPU takes nearly all of
# it from the window, as a stolen slice would; its spin is ~12 ms of work, several scheduler
# slices (the default 0.3 ms spin runs inside the slice a moved thread gets first: host_speed.py;
# at ~3 ms the window still took the busy CPU, or stayed on it, in 2 of 30 runs on 2 cores).
# Prints the CPU it took, then, once a line arrives (the test made that CPU busy), the record.
SLOWED = """
import functools, json, os, sys
from evokernel.evaluation.cpu_pin import one_cpu
from evokernel.evaluation.host_speed import spin_us
os.nice(19)
with one_cpu([], None, 1.15, functools.partial(spin_us, 400_000)) as window:
    print(window.cpu, flush=True)
    sys.stdin.readline()
    fast = window.fast()
    print(json.dumps({"fast": fast, **window.record}), flush=True)
"""


HOG = """
import os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
print("spinning", flush=True)
while True:
    pass
"""


def hog(cpu: int) -> subprocess.Popen[bytes]:
    """A process spinning on ``cpu``, returned once it is: a hog still starting its interpreter
    left the window's spin fast, and the window unmoved, in 1 of 10 runs on 2 cores."""
    busy = subprocess.Popen([sys.executable, "-c", HOG, str(cpu)], stdout=subprocess.PIPE)
    assert busy.stdout is not None and busy.stdout.readline() == b"spinning\n"
    return busy


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to choose between")
def test_the_window_takes_a_fast_cpu_and_moves_when_its_own_slows() -> None:
    mine = sorted(os.sched_getaffinity(0))
    busy = [hog(mine[0])]
    window = subprocess.Popen(
        [sys.executable, "-c", SLOWED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert window.stdin is not None and window.stdout is not None
        first = int(window.stdout.readline())
        assert first != mine[0]  # the busy CPU was measured slow and passed over
        busy.append(hog(first))
        busy[0].kill()  # the first CPU is free again, the window's own is now the busy one
        busy[0].wait()
        window.stdin.write("go\n")
        window.stdin.flush()
        record = json.loads(window.stdout.readline())
    finally:
        window.kill()
        window.wait()
        for process in busy:
            process.kill()
            process.wait()
    assert record["slow_rounds"] == 1 and record["moves"] == 1, record
    assert record["cpu"] != first, record
    assert record["spin_us"] > 0


def test_without_a_limit_every_round_is_fast_and_nothing_is_measured() -> None:
    with one_cpu([], None) as window:
        assert window.fast() and "spin_us" not in window.record


# A window whose spin always says "fast" (so only the run queue can tell), at nice 19 so that a
# busy process put on its CPU takes nearly all of it: a ~10 ms round of work then waits on the run
# queue for most of its time. Prints its CPU, then, once a line arrives, what the gate said.
# A worker's calling thread spinning (as in its block), or waiting while a helper thread spins.
MAIN_BUSY = """
import sys, threading
threading.Thread(target=sys.stdin.readline, daemon=True).start()
print("ready", flush=True)
while True:
    pass
"""
HELPER_BUSY = """
import sys, threading
threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()
"""


def block_wait_ms(script: str) -> float:
    """Run-queue wait of ``script``'s main thread over 300 ms, pinned with a hog on one CPU."""
    worker = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    busy: subprocess.Popen[bytes] | None = None
    mine = os.sched_getaffinity(0)
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        with one_cpu([worker.pid], None) as window:
            os.sched_setaffinity(0, mine - {window.cpu} or mine)  # the caller only reads /proc
            busy = hog(window.cpu)
            wait = ThreadWait(worker.pid)
            wait.begin()
            time.sleep(0.3)
            wall_ns, waited_ns = wait.end()
            assert wait.last == (wall_ns, waited_ns)
    finally:
        os.sched_setaffinity(0, mine)
        for proc in (worker, busy):
            if proc is not None:
                proc.kill()
                proc.wait()
    assert 290e6 < wall_ns < 600e6
    return waited_ns / 1e6


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU besides the window's")
def test_a_calling_thread_that_shares_its_cpu_with_a_busy_process_waits_half_its_block() -> None:
    assert 100 < block_wait_ms(MAIN_BUSY) < 220


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU besides the window's")
def test_a_helper_thread_queued_behind_a_busy_cpu_is_no_wait_of_the_calling_thread() -> None:
    assert block_wait_ms(HELPER_BUSY) < 10


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to move between")
def test_a_round_a_side_found_contended_or_lost_moves_the_window() -> None:
    mine = os.sched_getaffinity(0)
    try:
        with one_cpu([], None, 1.15, lambda: 1.0) as window:
            cpus = [window.cpu]
            assert window.fast() and window.undisturbed(waited_ns=2_000_000)
            assert window.fast() and not window.undisturbed(lost=True)
            assert window.fast()  # moved to another CPU, which spins as fast
            cpus.append(window.cpu)
            assert not window.undisturbed(contended=True, waited_ns=50_000_000)
            assert window.fast()
            cpus.append(window.cpu)
            record = dict(window.record)
    finally:
        os.sched_setaffinity(0, mine)
    assert cpus[0] != cpus[1] != cpus[2], cpus
    assert record["lost_rounds"] == 1 and record["contended_rounds"] == 1 and record["moves"] == 2, record
    assert record["wait_ms"] == 52.0, record


# A process whose second thread keeps busy: in a window it shares the window's CPU with both sides.
BUSY_THREAD = """
import threading, time
def spin():
    while True:
        pass
threading.Thread(target=spin, name="spinner", daemon=True).start()
print("ready", flush=True)
time.sleep(60)
"""


def test_the_window_says_which_pinned_threads_ran_in_it() -> None:
    busy = subprocess.Popen([sys.executable, "-c", BUSY_THREAD], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout is not None and busy.stdout.readline().strip() == "ready"
        with one_cpu([busy.pid]) as window:
            time.sleep(0.2)
        record = window.record
    finally:
        busy.kill()
        busy.wait()
    names = [name for name, _ in record["busiest"]]
    assert names and names[0].endswith("(thread)") and record["busiest"][0][1] > 20, record
    assert not any(name.endswith("(main)") for name in names), record  # asleep all along
