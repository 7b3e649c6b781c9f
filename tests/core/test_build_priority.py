"""Candidate builds run below the timed calls' CPU priority (evaluation/build_priority.py): what a
build starts inherits the lowered priority, the worker's own thread keeps its own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import replace

import pytest

from evokernel.config.schema import EvaluationConfig, TimingConfig
from evokernel.evaluation.build_priority import at_build_priority, build_priority_note
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.exceptions import ConfigError
from evokernel.types import Status, Task

CHILD_NICE = [sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"]


def own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def child_nice() -> int:
    """The nice value of a process the calling thread starts, as a compiler would be."""
    return int(subprocess.run(CHILD_NICE, capture_output=True, text=True, check=True).stdout)


def test_a_process_the_build_starts_is_nicer_and_the_caller_is_not() -> None:
    before = own_nice()
    nice, how = at_build_priority(child_nice, 7)
    assert nice == min(19, before + 7)
    assert how == f"nice {nice}"
    assert own_nice() == before


def test_niceness_zero_builds_in_the_callers_thread_at_its_priority() -> None:
    nice, how = at_build_priority(child_nice, 0)
    assert nice == own_nice()
    assert "normal priority" in how


def test_what_the_build_raises_reaches_the_caller() -> None:
    def exits() -> None:
        raise SystemExit(3)  # candidate code may call sys.exit at import

    with pytest.raises(SystemExit):
        at_build_priority(exits, 19)


def test_only_well_formed_notes_from_the_worker_are_shown() -> None:
    assert build_priority_note("nice 19") == "built at nice 19"
    assert build_priority_note("rm -rf /") == ""
    assert build_priority_note(19) == ""
    assert build_priority_note("nice " + "9" * 200) == ""


# At import (the build), the candidate starts a process, as load_inline starts ninja, and keeps a
# correct kernel only if that process ran at least 10 steps nicer than the worker's main thread.
PROBE = """
import os, subprocess, sys
_main = os.getpriority(os.PRIO_PROCESS, os.getpid())
_child = int(subprocess.run({cmd!r}, capture_output=True, text=True, check=True).stdout)
SCALE = 3.0 if _child >= min(19, _main + 10) else 2.0
"""


@pytest.mark.parametrize(("niceness", "expected"), [(19, Status.CORRECT), (0, Status.INCORRECT)])
def test_a_candidates_build_processes_run_nicer_in_the_sandbox(
    axpy_task: Task, niceness: int, expected: Status
) -> None:
    assert axpy_task.seed_source is not None
    kernel = (
        axpy_task.seed_source.replace("n, BLOCK: tl.constexpr", "n, scale, BLOCK: tl.constexpr")
        .replace("3.0 * x + b", "scale * x + b")
        .replace("y, n, BLOCK=64", "y, n, SCALE, BLOCK=64")
    )
    source = PROBE.format(cmd=CHILD_NICE) + kernel
    config = EvaluationConfig(build_niceness=niceness)
    request = build_request(
        axpy_task,
        source,
        device="cpu",
        scale="small",
        timing=TimingConfig(warmup_ms=1, min_reps=3, max_reps=20, max_ms=50),
        evaluation=config,
        static_checks=False,  # the probe imports subprocess, which the static rules refuse
    )
    ev = run_sandboxed(request, timeout_s=120)
    assert ev.status is expected, ev.reason + ev.feedback
    build = next(s for s in ev.details["stages"] if s["stage"] == "build")
    assert ("built at nice" in build["reason"]) is (niceness > 0), build


def test_build_niceness_out_of_range_is_a_config_error() -> None:
    from evokernel.config.loading import from_dict, to_dict
    from evokernel.config.schema import ExperimentConfig

    base = to_dict(replace(ExperimentConfig(), tasks=["tasks/level1/softmax.py"]))
    with pytest.raises(ConfigError, match=r"evaluation\.build_niceness=20"):
        from_dict(base, ["evaluation.build_niceness=20"])
