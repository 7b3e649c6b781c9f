"""What a timing says of a window another process's kernels shared, and which of them keep a window
from counting as quiet (evaluation/clocks.py)."""

from __future__ import annotations

from evokernel.evaluation.clocks import SHARED_SM_PERCENT, running_strangers, shared_with


def test_a_window_only_the_timing_used_says_nothing() -> None:
    assert shared_with({}) == ""
    assert shared_with({"users": [[10, 90, 6, "window"], [11, 40, 6, "window"]], "busy_windows": 0}) == ""


def test_an_idle_stranger_is_not_a_shared_window() -> None:
    record = {"users": [[10, 90, 6, "window"], [12, SHARED_SM_PERCENT - 1, 2, "python3 S"]]}
    assert shared_with(record) == ""


def test_the_busiest_stranger_is_named_with_the_windows_given_up_for_it() -> None:
    record = {
        "users": [[10, 44, 6, "window"], [12, 25, 3, "python3 R"], [13, 87, 12, "python3 T"]],
        "busy_windows": 3,
    }
    line = shared_with(record)
    assert "pid 13, python3 T, up to 87 % of the SMs, after 3 windows given up" in line
    assert line.endswith("the figure may be off")


BUSY = SHARED_SM_PERCENT + 30


def test_a_running_stranger_keeps_the_window_from_being_quiet_and_a_stopped_one_does_not() -> None:
    """A stopped process's queued kernels run out (the probes wait for them); a running one's never
    do. Sleeping (``S``: in a synchronize, its kernels running) and disk wait (``D``) issue work too."""
    users = [
        [10, 90, 6, "window"],
        [11, BUSY, 3, "python3 R"],
        [12, BUSY, 3, "python3 S"],
        [13, BUSY, 3, "ninja D"],
        [14, 95, 3, "python3 T"],  # stopped by the quiet window
        [15, 95, 3, "gdb-ed t"],  # stopped by a tracer
        [16, 95, 3, "python3 Z"],  # exited, not yet reaped: its context is gone
    ]
    running = running_strangers({"seen_self": True, "users": users})
    assert [u[0] for u in running] == [11, 12, 13]


def test_an_idle_or_gone_stranger_does_not_keep_a_window() -> None:
    users = [[11, SHARED_SM_PERCENT - 1, 3, "python3 R"], [12, 99, 3, "?"]]  # ? : exited since
    assert running_strangers({"seen_self": True, "users": users}) == []


def test_pids_of_another_namespace_judge_nobody() -> None:
    """Where NVML's pids are not this namespace's (the timing's own process is not among them), a
    pid's state here belongs to some other process: only the probes count."""
    users = [[11, 99, 3, "python3 R"]]
    assert running_strangers({"seen_self": False, "users": users}) == []
    assert running_strangers({}) == []
