"""The timing window's GPU (evaluation/timing_window.quiet_window): a window whose GPU will not
drain, or in which the node's keeper stopped nothing (over its duty limit), is given up, the GPU
lock free in between, and asked for again; a GPU still busy after the backoffs is waited for up to
the stranger patience; on a real lock's files and a real keeper socket."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import torch

from evokernel.evaluation.clocks import wait_gpu_alone
from evokernel.evaluation.gpulock import GpuLock
from evokernel.evaluation.timing_window import BUSY_WINDOWS, quiet_window

CPU = torch.device("cpu")
# The stage's waits, shortened: these tests check which windows are kept, not how long they wait.
BACKOFF_S = (0.5, 0.5, 0.05, 0.05, 0.05)
# Their sum (1.15 s): a patience that ends with the backoffs gives up no window past them.
BACKOFFS_ONLY = 1.15


def gate_free(directory: Path) -> bool:
    """Whether another supervisor's timing could take the lock's gate now (a file description of
    its own: flock conflicts with this process's other holds as with any process's)."""
    fd = os.open(directory / "gate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the lock where it was taken
    return True


def windows(
    tmp_path: Path, answers: list[bool], lock: GpuLock | None = None, patience_s: float = BACKOFFS_ONLY
) -> tuple[dict[str, Any], list[bool], int]:
    """A window on a real GpuLock whose drains answer ``answers`` in turn: the kept window's record,
    whether the gate was held at each drain, and how often a watcher polling every 10 ms found it
    free while the windows were asked for."""
    lock = lock or GpuLock(tmp_path)
    with GpuLock(tmp_path).hold("time"):
        pass  # the lock files exist before the watcher opens them
    replies = iter(answers)
    held: list[bool] = []

    def drain(device: torch.device) -> dict[str, Any]:
        held.append(not gate_free(tmp_path))
        return {"drain_ms": 1.0, "quiet": next(replies)}

    free: list[bool] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            free.append(gate_free(tmp_path))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        window, pinned, record = quiet_window(
            lock, CPU, lambda: contextlib.nullcontext(None), drain, BACKOFF_S, patience_s
        )
    finally:
        done.set()
        watcher.join()
    assert pinned is None
    with window:
        assert not gate_free(tmp_path)  # the kept window holds the GPU until it ends
    assert gate_free(tmp_path)
    return record, held, sum(free)


def test_a_window_that_will_not_drain_is_given_up_and_the_gpu_is_free_until_the_next(tmp_path: Path) -> None:
    record, held, free_polls = windows(tmp_path, [False, False, True])
    assert record == {"drain_ms": 1.0, "quiet": True, "busy_windows": 2, "duty_windows": 0}
    assert held == [True, True, True]
    assert free_polls >= 50  # two 0.5 s waits between the windows, the gate free: others may time


def test_a_gpu_that_never_drains_is_timed_in_the_last_window_which_says_so(tmp_path: Path) -> None:
    record, held, _ = windows(tmp_path, [False] * BUSY_WINDOWS)
    assert record == {"drain_ms": 1.0, "quiet": False, "busy_windows": BUSY_WINDOWS - 1, "duty_windows": 0}
    assert held == [True] * BUSY_WINDOWS


def test_a_gpu_busy_past_the_backoffs_is_waited_for_up_to_the_patience(tmp_path: Path) -> None:
    """Session 32: a stranger's 37-40 s trials outlasted the backoffs; further windows are given
    up at the last wait (0.05 s here) while the waits stay within the patience: 1.15 s of
    backoffs, then three more waits within 1.31 s; the window after them is kept, and says so."""
    record, held, _ = windows(tmp_path, [False] * 20, patience_s=BACKOFFS_ONLY + 3 * 0.05 + 0.01)
    assert record == {
        "drain_ms": 1.0,
        "quiet": False,
        "busy_windows": BUSY_WINDOWS - 1 + 3,
        "duty_windows": 0,
        "stranger_windows": 3,
    }
    assert held == [True] * (BUSY_WINDOWS + 3)


def test_the_first_drained_window_past_the_backoffs_is_kept(tmp_path: Path) -> None:
    record, held, _ = windows(tmp_path, [False] * (BUSY_WINDOWS + 1) + [True], patience_s=10.0)
    assert record == {
        "drain_ms": 1.0,
        "quiet": True,
        "busy_windows": BUSY_WINDOWS + 1,
        "duty_windows": 0,
        "stranger_windows": 2,
    }
    assert len(held) == BUSY_WINDOWS + 2


def test_the_stranger_patience_keeps_half_the_evaluations_gpu_wait_allowance(tmp_path: Path) -> None:
    """The waits extend the deadline up to the lock's ``max_wait_s`` (sandbox.hard_limit_s): the
    patience takes at most half of it, so later lock waits keep room."""
    lock = GpuLock(tmp_path, max_wait_s=2 * (BACKOFFS_ONLY + 0.05 + 0.01))
    record, held, _ = windows(tmp_path, [False] * 20, lock, patience_s=60.0)
    assert record["busy_windows"] == BUSY_WINDOWS and record["stranger_windows"] == 1, record
    assert len(held) == BUSY_WINDOWS + 1


def test_no_patience_keeps_the_window_after_the_backoffs(tmp_path: Path) -> None:
    """``evaluation.timing.stranger_patience_s`` 0: a GPU another user's job shares for good."""
    record, held, _ = windows(tmp_path, [False] * 20, patience_s=0.0)
    assert record["busy_windows"] == BUSY_WINDOWS - 1 and "stranger_windows" not in record, record
    assert len(held) == BUSY_WINDOWS


def test_the_waits_between_windows_count_as_the_gpus(tmp_path: Path) -> None:
    """A wait between windows is the pool's, not the candidate's: counted as a GPU wait, so the
    evaluation's deadline grows by it (supervisor.deadline)."""
    lock = GpuLock(tmp_path)
    windows(tmp_path, [False, True], lock)
    assert lock.waited_s >= BACKOFF_S[0]


class Keeper:
    """A quiet-window keeper's socket (quiet.Keeper's protocol, quiet_link.py) that grants the
    first ``over_duty`` windows over its duty limit (``paused 0 duty``: nothing stopped) and then
    stops 3 processes."""

    def __init__(self, path: Path, over_duty: int, hang_up_after: int = 0) -> None:
        self.path, self.over_duty, self.pauses = path, over_duty, 0
        self.hang_up_after = hang_up_after  # closes the connection at that window's resume
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            while data := conn.recv(64):
                if data.startswith(b"hello"):
                    conn.sendall(b"registered\n")
                elif data.startswith(b"pause"):
                    self.pauses += 1
                    conn.sendall(b"paused 0 duty\n" if self.pauses <= self.over_duty else b"paused 3\n")
                elif self.pauses == self.hang_up_after:
                    return  # a keeper gone mid-run: the link closes and stops nothing more
                else:
                    conn.sendall(b"resumed\n")


def test_a_window_that_stopped_nothing_over_the_duty_limit_is_given_up(tmp_path: Path) -> None:
    keeper = Keeper(tmp_path / "keeper.sock", over_duty=2)
    lock = GpuLock(tmp_path, quiet=str(keeper.path))
    record, held, _ = windows(tmp_path, [True], lock)  # not drained in the windows given up for duty
    assert record == {"drain_ms": 1.0, "quiet": True, "busy_windows": 2, "duty_windows": 2}
    assert held == [True] and keeper.pauses == 3
    assert lock.quiet.record["over_duty"] == 2 and lock.quiet.record["paused"] == 3


def test_the_last_window_is_kept_over_the_duty_limit_drained_and_says_so(tmp_path: Path) -> None:
    keeper = Keeper(tmp_path / "keeper.sock", over_duty=BUSY_WINDOWS)
    lock = GpuLock(tmp_path, quiet=str(keeper.path))
    record, held, _ = windows(tmp_path, [True], lock)
    assert record == {
        "drain_ms": 1.0,
        "quiet": True,
        "busy_windows": BUSY_WINDOWS - 1,
        "duty_windows": BUSY_WINDOWS - 1,
        "over_duty": True,
    }
    assert held == [True]


def test_a_quiet_gpu_is_one_window(tmp_path: Path) -> None:
    record, held, _ = windows(tmp_path, [True])
    assert record["busy_windows"] == 0 and held == [True]


def test_on_the_cpu_there_is_nothing_to_drain(tmp_path: Path) -> None:
    drain = lambda device: wait_gpu_alone(device, {os.getpid()})  # noqa: E731 - the stage's own drain
    window, _, record = quiet_window(GpuLock(tmp_path), CPU, lambda: contextlib.nullcontext(None), drain)
    with window:
        pass
    assert record == {"busy_windows": 0, "duty_windows": 0}


def test_a_keeper_gone_after_a_window_over_the_duty_limit_does_not_give_up_the_next(tmp_path: Path) -> None:
    """The duty answer is the window's own: with the keeper gone, the next window stops nothing
    because nothing can, and is kept."""
    keeper = Keeper(tmp_path / "keeper.sock", over_duty=1, hang_up_after=1)
    lock = GpuLock(tmp_path, quiet=str(keeper.path))
    record, held, _ = windows(tmp_path, [True], lock)
    assert record == {"drain_ms": 1.0, "quiet": True, "busy_windows": 1, "duty_windows": 1}
    assert held == [True] and keeper.pauses == 1
