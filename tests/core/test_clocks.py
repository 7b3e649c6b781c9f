"""What a timing says of a window another process's kernels shared (evaluation/clocks.py)."""

from __future__ import annotations

from evokernel.evaluation.clocks import SHARED_SM_PERCENT, shared_with


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
