"""Candidate builds at a low CPU priority, so they cannot slow another candidate's timed calls.

A node evaluates many candidates at once: while one holds the GPU's timing lock, the others build
(``load_inline`` runs ninja -> nvcc/cicc/g++, 20-60 s of CPU each on real level-3 files). Level-3
networks are launch-bound chains of small kernels, so their timed calls are host-bound: with 16
builds on 16 cores the timed process gets a fraction of a core and its runtime, and the eager
baseline's, moves by up to 3x between runs (docs/benchmarks.md, issue 18 and "Timing under build
load"). The GPU lock makes timing exclusive on the device; this makes it nearly so on the host.

Linux keeps a nice value per thread and a forked child inherits the forking thread's, so the
worker imports the candidate (which is when ``load_inline`` builds) in a short-lived thread whose
nice value is raised; the compilers it starts inherit it, while the worker's main thread, which
later runs the trials and the timed calls, keeps its own. An unprivileged process can raise a nice
value but never lower it again, which is why this is a thread rather than the process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def at_build_priority(work: Callable[[], T], niceness: int) -> tuple[T, str]:
    """``work()`` in a thread ``niceness`` steps nicer than the caller, and how it ran: ``nice N``,
    or why it ran as it was (niceness 0, or the system refused). Whatever ``work`` raises
    (``SystemExit`` included: candidate code may call it) is raised here, in the caller's thread."""
    if niceness <= 0:
        return work(), "normal priority (evaluation.build_niceness=0)"
    value: list[T] = []
    error: list[BaseException] = []
    how = ["normal priority"]

    def run() -> None:
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + niceness)
            how[0] = f"nice {os.getpriority(os.PRIO_PROCESS, tid)}"
        except OSError as exc:  # a seccomp or container policy may refuse it; the build still runs
            how[0] = f"normal priority (setpriority refused: {exc.strerror})"
        try:
            value.append(work())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread below
            error.append(exc)

    thread = threading.Thread(target=run, name="evokernel-build", daemon=True)
    try:
        thread.start()
    except RuntimeError as exc:  # no thread can be started (a process limit): build as before
        return work(), f"normal priority (no build thread: {exc})"
    thread.join()
    if error:
        raise error[0]
    return value[0], how[0]


def build_priority_note(value: object) -> str:
    """The worker's word on how its build ran, for the build stage's note: a short string of a
    known form, anything else dropped (the worker runs candidate code)."""
    if isinstance(value, str) and len(value) <= 120 and value.startswith(("nice ", "normal priority")):
        return f"built at {value}"
    return ""
