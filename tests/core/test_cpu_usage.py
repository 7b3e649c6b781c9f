"""Core-seconds of a process tree (evaluation/cpu_usage.py), with real processes burning a core."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from evokernel.evaluation.cpu_usage import process_tree_seconds, supervisor_seconds

# A child that burns about 0.4 s of CPU itself, then runs a grandchild that burns as much and
# waits for it (as ninja waits for nvcc), then blocks on stdin until told to exit.
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
TREE = (
    BURN
    + "import subprocess, sys\n"
    + f"subprocess.run([sys.executable, '-c', {BURN!r}], check=True)\n"
    + "print('burnt', flush=True)\nsys.stdin.read()\n"
)


def test_a_live_child_is_read_with_what_it_waited_for_then_counted_once_after_reaping() -> None:
    before = supervisor_seconds(None)
    child = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == b"burnt"
    live = process_tree_seconds(child.pid)
    assert live >= 0.75  # its own 0.4 s and the reaped grandchild's 0.4 s (plus start-up)
    with_child = supervisor_seconds(child.pid)
    assert with_child - before >= 0.75
    child.stdin.close()
    child.wait()
    # reaped: the same seconds now come from this process's children times, not /proc
    after = supervisor_seconds(None)
    assert after - before >= live - 0.05
    assert process_tree_seconds(child.pid) == 0.0  # gone: nothing to read


def test_a_waiting_process_costs_no_core() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    assert child.stdin is not None
    time.sleep(0.3)
    start = process_tree_seconds(child.pid)
    time.sleep(0.5)
    assert process_tree_seconds(child.pid) - start < 0.05
    child.stdin.close()
    child.wait()


def test_this_process_is_readable_as_a_tree_too() -> None:
    assert process_tree_seconds(os.getpid()) > 0
