"""The paired window's round gate (evaluation/round_gate.py) on the CPU, with the launch path's
readings made up so the answer is known: one reading per round in the rounds' order, recorded
beside the rounds and never gated on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace

import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.block_timer import BlockTimer
from evokernel.evaluation.cpu_pin import ThreadWait, WindowCpu
from evokernel.evaluation.host_speed import spin_us
from evokernel.evaluation.pairing import paired_ratios
from evokernel.evaluation.round_gate import RoundGate, for_window

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
    assert gate.dispatch_us == gate.link_gen == [None] * rounds
    assert gate.record() == {"round_dispatch_us": gate.dispatch_us, "round_link_gen": gate.link_gen}


def test_the_launch_path_is_read_and_recorded_but_never_gated_on() -> None:
    path = LaunchPath([7.0, 10.0, 10.2, 7.3])
    gate = RoundGate(*gate_parts(), 0.0, CPU, read_dispatch=path)
    capped = replace(SETTINGS, max_reps=200)  # the two states never agree to +-1 %: to the cap
    result = paired_ratios(sides(path), [1.0, 2.0], capped, gate)[0]  # type: ignore[arg-type]
    assert result.stopped == "cap" and all(result.round_kept) and result.slow_rounds == 0
    assert sorted({r for r in result.round_ratios if r is not None}) == [2.0, 3.0]  # both states
    assert set(gate.record()) == {"round_dispatch_us", "round_link_gen"}


def test_a_window_gate_takes_the_host_limit_from_the_settings_and_records_into_the_window() -> None:
    path = LaunchPath([6.5, 10.6, 6.7, 10.8])
    gate = for_window(*gate_parts(), replace(SETTINGS, host_slowdown_limit=1.3), CPU)
    gate.read_dispatch = path
    assert gate.limit == 1.3
    result = paired_ratios(sides(path), [1.0, 2.0], replace(SETTINGS, max_reps=200), gate)[0]  # type: ignore[arg-type]
    gate.close()
    assert all(result.round_kept)  # both launch states kept: the figure moves with them, recorded
    assert gate.window.record["round_dispatch_us"] == gate.dispatch_us
    assert len(gate.dispatch_us) == len(gate.link_gen) == len(result.round_ratios)
