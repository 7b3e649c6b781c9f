"""Paired timing's statistics and stopping rule (evaluation/pairing.py), on sides whose times are
made up so the answer is known."""

from __future__ import annotations

import math
import random
import time
from dataclasses import replace

import pytest
import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation.block_timer import MAX_BLOCK_CALLS, BlockTimer
from evokernel.evaluation.host_speed import spin_us, window_spread
from evokernel.evaluation.pairing import (
    PairedRatio,
    PairingError,
    block_calls,
    median_interval,
    paired_ratio,
    paired_ratios,
    with_window_spread,
)

SETTINGS = TimingConfig(min_ms=0.0, max_ms=10_000.0, max_reps=100_000)


def test_the_median_interval_is_the_binomial_order_statistics() -> None:
    values = list(range(1, 21))  # n = 20: k = 6 (P(B <= 5) = 0.0207 <= 0.025 < P(B <= 6))
    median, low, high, coverage = median_interval(values)
    assert (median, low, high) == (10.5, 6, 15)
    assert coverage == pytest.approx(1 - 2 * sum(math.comb(20, j) for j in range(6)) / 2**20)
    assert coverage >= 0.95
    # Under six values no order statistic gives 95 %: the range, at the coverage it has.
    assert median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0, 0.75)
    with pytest.raises(ValueError):
        median_interval([])


def test_a_load_that_moves_between_rounds_cancels_in_the_ratio() -> None:
    rng = random.Random(1)
    load, blocks = [1.0], [0]

    def side(ms: float) -> object:
        """Every call takes ``ms`` times the host's load, which changes between rounds, +-1 %."""

        def block(calls: int) -> list[float]:
            if blocks[0] % 2 == 0:
                load[0] = rng.choice([1.0, 1.5, 3.0])
            blocks[0] += 1
            return [ms * load[0] * rng.gauss(1.0, 0.01) for _ in range(calls)]

        return block

    result = paired_ratio(side(1.0), side(2.0), 1.0, 2.0, SETTINGS)  # type: ignore[arg-type]
    assert result.stopped == "precision" and result.pairs == SETTINGS.paired_min_pairs
    assert result.low <= 2.0 <= result.high
    assert result.halfwidth <= SETTINGS.paired_halfwidth
    assert result.block_calls == (10, 5)  # ~paired_block_ms (10 ms) of calls a side
    # Each side's own median carries the load and is reported as it was measured.
    assert result.a_ms > 1.0


def test_three_sides_give_each_ratio_against_the_first() -> None:
    rng = random.Random(3)

    def side(ms: float) -> object:
        return lambda calls: [ms * rng.gauss(1.0, 0.005) for _ in range(calls)]

    eager, incumbent = paired_ratios([side(1.0), side(3.0), side(1.5)], [1.0, 3.0, 1.5], SETTINGS)  # type: ignore[list-item]
    assert eager.low <= 3.0 <= eager.high and incumbent.low <= 1.5 <= incumbent.high
    assert eager.pairs == incumbent.pairs and eager.stopped == incumbent.stopped == "precision"


def test_sampling_stops_at_a_sides_cap_and_says_so() -> None:
    rng = random.Random(2)

    def noisy(ms: float) -> object:
        return lambda calls: [ms * rng.uniform(0.5, 2.0) for _ in range(calls)]

    capped = replace(SETTINGS, max_reps=6)  # blocks of 6 calls, 60 a side: far too noisy for 1 %
    result = paired_ratio(noisy(1.0), noisy(1.0), 1.0, 1.0, capped)  # type: ignore[arg-type]
    assert result.stopped == "cap" and result.pairs == 10
    assert result.halfwidth > capped.paired_halfwidth and result.low < 1.0 < result.high


def test_a_side_that_takes_no_time_is_an_error_not_a_ratio() -> None:
    with pytest.raises(PairingError, match="no block"):
        paired_ratio(lambda n: [0.0] * n, lambda n: [1.0] * n, 1.0, 1.0, replace(SETTINGS, max_reps=50))


def test_a_block_never_asks_for_more_calls_than_a_block_timer_makes() -> None:
    # A 20 µs kernel wants ~500 calls per 10 ms block; the worker's block timer makes at most
    # MAX_BLOCK_CALLS and a worker answering fewer calls than asked breaks the protocol (nine
    # fast published kernels were refused so on the H100 before this bound).
    assert block_calls(0.02, SETTINGS) == MAX_BLOCK_CALLS
    assert block_calls(5.0, SETTINGS) == 2


class Gate:
    """A host gate whose verdicts the test sets: ``before`` and ``after`` each round."""

    def __init__(self, before: object, after: object = lambda: True) -> None:
        self.before, self.after = before, after

    def fast(self) -> bool:
        return bool(self.before())  # type: ignore[operator]

    def undisturbed(self) -> bool:
        return bool(self.after())  # type: ignore[operator]


def test_rounds_the_host_was_slow_in_are_left_out() -> None:
    """A GPU-bound side A against a host-bound side B: B's calls take 1.5x when the host is slow,
    A's do not, so a slow round's ratio is 1.5x off and pairing cannot cancel it. Rounds the gate
    calls slow are left out; when every round is slow they are all there is, and say so."""
    slow = [False]
    rounds = [0]

    def gate() -> bool:
        rounds[0] += 1
        slow[0] = rounds[0] % 3 == 0  # every third round
        return not slow[0]

    def side(ms: float, host_bound: bool) -> object:
        return lambda calls: [ms * (1.5 if slow[0] and host_bound else 1.0)] * calls

    a, b = side(1.0, False), side(2.0, True)
    result = paired_ratios([a, b], [1.0, 2.0], SETTINGS, Gate(gate))[0]  # type: ignore[list-item]
    assert result.ratio == 2.0 and result.low == result.high == 2.0
    assert result.b_ms == 2.0 and result.slow_rounds == rounds[0] // 3 > 0
    assert result.pairs == rounds[0] - result.slow_rounds
    # Every round, in order, for re-deriving a figure: the slow ones' 1.5x-off ratio, not kept.
    assert result.round_kept == tuple(r % 3 != 2 for r in range(rounds[0]))
    assert result.round_ratios == tuple(2.0 if k else 3.0 for k in result.round_kept)
    assert result.to_dict()["round_ratios"] == list(result.round_ratios)

    def never() -> bool:
        slow[0] = True
        return False

    capped = replace(SETTINGS, max_reps=20)  # 200 calls a side: 20 rounds of side A's 10
    result = paired_ratios([a, b], [1.0, 2.0], capped, Gate(never))[0]  # type: ignore[list-item]
    assert result.stopped == "cap" and result.ratio == 3.0 and result.slow_rounds == result.pairs > 0
    assert result.round_kept == (True,) * result.pairs  # all slow: all of them are the figure


def test_a_round_the_host_was_found_disturbed_in_afterwards_is_left_out() -> None:
    """The spin before a round said fast, but the side's threads then waited on a run queue (the
    gate's ``undisturbed``, asked after the round): that round's samples and ratio are left out."""
    rounds = [0]
    disturbed = [False]

    def side(ms: float, host_bound: bool) -> object:
        def block(calls: int) -> list[float]:
            if not host_bound:  # side A runs first in even rounds, side B first in odd ones
                disturbed[0] = rounds[0] % 4 == 1
            return [ms * (2.0 if disturbed[0] and host_bound else 1.0)] * calls

        return block

    def after() -> bool:
        rounds[0] += 1
        return not disturbed[0]

    a, b = side(1.0, False), side(2.0, True)
    result = paired_ratios([a, b], [1.0, 2.0], SETTINGS, Gate(lambda: True, after))[0]  # type: ignore[list-item]
    assert result.ratio == 2.0 and result.b_ms == 2.0  # no sample of a disturbed round kept
    assert result.slow_rounds == sum(1 for r in range(rounds[0]) if r % 4 == 1) > 0


def test_a_block_timer_says_how_the_host_issued_its_calls() -> None:
    """On the CPU a call is all host: its issuing time is its time, and a busy loop's thread is
    always either on a CPU or waiting for one (never asleep)."""
    timer = BlockTimer(lambda: spin_us(20_000), torch.device("cpu"), SETTINGS)
    timer.settle()
    for _ in range(3):
        timer.block(4)
    result = timer.result()
    assert result.host["issue_ms"] == pytest.approx(result.median_ms, rel=0.5)
    assert result.host["cpu_share"] + result.host["wait_share"] > 0.9, result.host


def test_a_block_whose_calls_ran_off_the_cpu_is_disturbed() -> None:
    """A call that spends its time off the CPU (here asleep; on a GPU host, its vCPU stolen) is
    that much slower than the host's speed; a busy call on a free CPU is not."""
    asleep = BlockTimer(lambda: time.sleep(0.002), torch.device("cpu"), SETTINGS)
    asleep.block(5)
    assert asleep.disturbed(1.15) and asleep.result().host["disturbed_blocks"] == 1
    assert not asleep.disturbed(0.0)  # no limit, no gate
    busy = BlockTimer(lambda: spin_us(5_000), torch.device("cpu"), SETTINGS)
    busy.block(5)
    assert not busy.disturbed(1.15), busy.result().host


def window_pairs(ratio: float, low: float, high: float) -> PairedRatio:
    halfwidth = (high - low) / 2 / ratio
    return PairedRatio(ratio, low, high, 0.95, 20, "precision", halfwidth, 1.0, ratio, (4, 4), 0.5)


def test_the_spread_between_windows_is_added_to_the_interval_in_quadrature() -> None:
    """A window's interval sees only its own pairs; the spread of one window's figure between
    windows goes on top, each side in log space: +-1 % and 4 % at 95 % (z 1.96) give
    exp(+-sqrt(ln(1.01)**2 + (1.96 * 0.04)**2)), the window's own interval kept beside it."""
    window = window_pairs(2.0, 2.0 / 1.01, 2.0 * 1.01)
    wide = with_window_spread(window, 0.04)
    half = math.sqrt(math.log(1.01) ** 2 + (1.959964 * 0.04) ** 2)
    assert wide.low == pytest.approx(2.0 * math.exp(-half))
    assert wide.high == pytest.approx(2.0 * math.exp(half))
    assert wide.ratio == 2.0 and wide.pairs == 20
    assert wide.halfwidth == pytest.approx((wide.high - wide.low) / 4)
    assert (wide.window_spread, wide.window_low, wide.window_high) == (0.04, window.low, window.high)
    assert wide.to_dict()["window_low"] == window.low
    # The GPU-bound default (0.3 %) against +-1 %: the half-width grows by 16 %, not 30 %.
    small = with_window_spread(window, 0.003)
    assert math.log(small.ratio / small.low) == pytest.approx(1.16 * math.log(1.01), rel=0.01)
    assert with_window_spread(window, 0.0) is window  # nothing added, nothing recorded


def test_a_host_bound_side_gets_the_host_bound_spread() -> None:
    """Either side issuing each call for longer than its events timed (block_timer's issue_ms over
    the side's median) makes the pair host-bound: the host's state moves between windows."""
    settings = replace(SETTINGS, window_spread=0.003, window_spread_host_bound=0.04)
    gpu_bound, host_bound = {"issue_ms": 0.02}, {"issue_ms": 0.09}
    assert window_spread(settings, 0.05, 0.08, gpu_bound, host_bound) == 0.04  # reference: 0.09 > 0.08
    assert window_spread(settings, 0.05, 0.08, host_bound, gpu_bound) == 0.04  # candidate: 0.09 > 0.05
    assert window_spread(settings, 0.05, 0.10, gpu_bound, host_bound) == 0.003
    assert window_spread(settings, 0.05, 0.08, None, {}) == 0.003  # no host record: nothing to say
    # The candidate's record comes from its worker: anything but a finite number says nothing.
    for odd in ("0.09", float("nan"), True, [0.09]):
        assert window_spread(settings, 0.05, 0.10, {"issue_ms": odd}, gpu_bound) == 0.003
