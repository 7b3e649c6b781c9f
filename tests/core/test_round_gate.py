"""The paired window's round gate (evaluation/round_gate.py) on the CPU, with the launch path's
readings made up so the answer is known: one reading per round in the rounds' order, rounds with
a slow launch path left out against the node's anchor when the limit is set, and the anchor kept
in the node's registry as the lowest window lower quartile."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.block_timer import BlockTimer
from evokernel.evaluation.cpu_pin import ThreadWait, WindowCpu
from evokernel.evaluation.host_speed import spin_us
from evokernel.evaluation.pairing import paired_ratios
from evokernel.evaluation.round_gate import RoundGate, anchor_path, for_window, read_anchor, remember_anchor

CPU = torch.device("cpu")
SETTINGS = TimingConfig(min_ms=0.0, max_ms=10_000.0, max_reps=100_000, paired_min_pairs=10)


def gate_parts() -> tuple[WindowCpu, BlockTimer, list[ThreadWait]]:
    """A window without a host limit (its spin gate always fast) and a reference timer that never
    timed a block (never disturbed): what is left to gate on is the launch path."""
    return WindowCpu([os.getpid()], None), BlockTimer(lambda: None, CPU, SETTINGS), [ThreadWait(os.getpid())]


class LaunchPath:
    """Made-up dispatch readings, one per round, cycling through ``pattern``; ``slow`` says
    whether the current round's reading was over 8.5 us (the state the sides see)."""

    def __init__(self, pattern: list[float]) -> None:
        self.readings: Iterator[float] = iter(pattern * 1000)
        self.slow = False

    def __call__(self, device: torch.device) -> float:
        reading = next(self.readings)
        self.slow = reading > 8.5
        return reading


def sides(path: LaunchPath) -> list[object]:
    """A GPU-bound candidate (1 ms whatever the host) against a host-bound reference whose calls
    take 2 ms on a fast launch path and 3 ms on a slow one: pairing cannot cancel that."""
    return [lambda calls: [1.0] * calls, lambda calls: [3.0 if path.slow else 2.0] * calls]


def test_the_round_gate_takes_one_dispatch_reading_per_round_in_the_rounds_order() -> None:
    """Off the GPU there is no dispatch path to read: one None per round, nothing gated."""
    timer = BlockTimer(lambda: spin_us(2_000), CPU, SETTINGS)
    worker = ThreadWait(os.getpid())
    gate = RoundGate(WindowCpu([os.getpid()], None), timer, [worker], 1.15, CPU)

    def candidate(calls: int) -> list[float]:
        worker.begin()
        try:
            return [0.5] * calls
        finally:
            worker.end()

    settings = replace(SETTINGS, paired_min_pairs=6, max_reps=50)
    result = paired_ratios([candidate, timer.block], [0.5, timer.settle()], settings, gate)[0]
    rounds = len(result.round_ratios)
    assert rounds == len(result.round_kept) == len(gate.dispatch_us) >= 6
    assert gate.dispatch_us == [None] * rounds and gate.record() == {"round_dispatch_us": gate.dispatch_us}


def test_rounds_with_a_slow_launch_path_are_left_out_when_the_limit_is_set() -> None:
    path = LaunchPath([7.0, 10.0, 10.2, 7.3])
    gate = RoundGate(*gate_parts(), 0.0, CPU, launch_limit=1.15, read_dispatch=path)
    result = paired_ratios(sides(path), [1.0, 2.0], SETTINGS, gate)[0]  # type: ignore[arg-type]
    assert result.ratio == result.low == result.high == 2.0  # the fast path's figure, every time
    slow = [us > 8.5 for us in gate.dispatch_us]  # type: ignore[operator]
    assert result.round_kept == tuple(not s for s in slow) and gate.launch_slow_rounds == sum(slow) > 0
    assert result.slow_rounds == sum(slow)
    record = gate.record()
    assert record["launch_slow_rounds"] == sum(slow) and record["launch_anchor_us"] is None  # its own lowest
    # The host gate alone kept every round (this window has no host limit): the figure without
    # the launch gate can be re-derived from the same run.
    assert record["round_host_fast"] == [True] * len(slow)


def test_without_a_limit_the_launch_path_is_read_and_recorded_but_not_gated_on() -> None:
    path = LaunchPath([7.0, 10.0, 10.2, 7.3])
    gate = RoundGate(*gate_parts(), 0.0, CPU, read_dispatch=path)
    capped = replace(SETTINGS, max_reps=200)  # the two states never agree to +-1 %: to the cap
    result = paired_ratios(sides(path), [1.0, 2.0], capped, gate)[0]  # type: ignore[arg-type]
    assert result.stopped == "cap" and all(result.round_kept) and result.slow_rounds == 0
    assert gate.launch_slow_rounds == 0
    assert sorted({r for r in result.round_ratios if r is not None}) == [2.0, 3.0]  # both states
    assert set(gate.record()) == {"round_dispatch_us"}


def test_a_window_wholly_in_the_slow_state_is_measured_against_the_nodes_anchor() -> None:
    """Its own lowest reading is slow, so only the node's anchor can tell: every round is left
    out, and with no fast round by the cap the slow ones are the figure (pairing says so)."""
    path = LaunchPath([10.0, 10.4])
    capped = replace(SETTINGS, max_reps=200)
    gate = RoundGate(*gate_parts(), 0.0, CPU, launch_limit=1.15, anchor_us=7.0, read_dispatch=path)
    result = paired_ratios(sides(path), [1.0, 2.0], capped, gate)[0]  # type: ignore[arg-type]
    assert result.stopped == "cap" and result.ratio == 3.0 and result.slow_rounds == result.pairs > 0
    assert gate.launch_slow_rounds == len(gate.dispatch_us)


def test_the_nodes_anchor_is_the_lowest_window_lower_quartile(tmp_path: Path) -> None:
    path = anchor_path(tmp_path / "registry", torch.device("cpu", 1))  # a GPU's is by its UUID
    assert path.name == "launch-anchor-cpu1" and read_anchor(path) is None
    # A window half fast, half slow: its lower quartile is a fast reading, not the lucky 6.0.
    assert remember_anchor(path, [6.0, 7.2, 7.3, 7.4, 10.0, 10.1, 10.2, 10.3, None]) == 7.2
    assert read_anchor(path) == 7.2
    assert remember_anchor(path, [10.0, 10.2, 10.4]) == 7.2  # a slow window leaves it
    assert remember_anchor(path, [7.0, 7.1, 7.1]) == 7.0 and read_anchor(path) == 7.0
    assert remember_anchor(path, [None]) == 7.0
    path.write_text("not a number")
    assert read_anchor(path) is None  # a broken file is no anchor, never an error


def test_a_window_gate_reads_the_nodes_anchor_and_offers_its_readings_back(tmp_path: Path) -> None:
    registry = tmp_path / "registry"
    remember_anchor(anchor_path(registry, CPU), [7.0])
    settings = replace(SETTINGS, launch_slowdown_limit=1.15)
    path = LaunchPath([6.5, 6.6, 6.7, 6.8])
    gate = for_window(*gate_parts(), settings, CPU, registry)
    gate.read_dispatch = path
    assert gate.anchor_us == 7.0 and gate.launch_limit == 1.15
    paired_ratios(sides(path), [1.0, 2.0], SETTINGS, gate)  # type: ignore[arg-type]
    gate.close()
    assert read_anchor(anchor_path(registry, CPU)) == pytest.approx(6.5, abs=0.11)  # its lower quartile
    assert gate.window.record["launch_anchor_us"] == 7.0  # the anchor it measured against
    assert gate.window.record["round_dispatch_us"] == gate.dispatch_us
