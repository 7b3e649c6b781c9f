"""Paired timing: a speedup measured so that the host's state cancels in it (issue 35).

Two identical searches used to disagree on a candidate's speedup by a median 22 % (up to 4.9x):
the candidate was timed in one window and the eager baseline in another (cached, from another
moment of the host's load), so the ratio carried whatever the host did in each. Here both sides
are timed in one window under the GPU lock, in alternating blocks of ~``paired_block_ms`` each
(A B, then B A, so a drift inside a pair falls on both sides), on the same inputs. Each pair
gives a ratio (median of side B's block / median of side A's); the speedup is the median of the
pair ratios, with a distribution-free interval for that median from order statistics
(:func:`median_interval`: no normality assumed, exact for any continuous distribution of ratios).

Sampling is adaptive (nvbench-style): pairs are added until the interval's half-width is within
``paired_halfwidth`` of the estimate (after ``paired_min_pairs`` pairs and ``min_ms`` per side),
or until either side reaches its cap (``max_ms`` of timed calls, or ``max_reps`` calls per pair
the rule needs). Every result says how many pairs it took and why sampling stopped.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Protocol

from evokernel.evaluation.block_timer import MAX_BLOCK_CALLS
from evokernel.evaluation.timing import TimingSettings
from evokernel.exceptions import EvaluationError

LEVEL = 0.95
Block = Callable[[int], list[float]]


class HostGate(Protocol):
    """Whether the host ran a round at full speed (host_speed.py; cpu_pin.WindowCpu is one):
    ``fast`` asked before the round, ``undisturbed`` after it; a round is kept when both say so."""

    def fast(self) -> bool: ...

    def undisturbed(self) -> bool: ...


class PairingError(EvaluationError):
    """A paired timing that could not produce one ratio within its caps."""


@dataclass(frozen=True)
class PairedRatio:
    """``ratio`` = side B's time / side A's (the speedup of A over B), its interval
    ``[low, high]`` at ``level`` (the coverage the order statistics give: ``LEVEL`` from 6 pairs
    on, less below), ``pairs`` and why sampling stopped (``precision`` or ``cap``)."""

    ratio: float
    low: float
    high: float
    level: float
    pairs: int
    stopped: str
    halfwidth: float  # (high - low) / 2 / ratio
    a_ms: float  # median of all of side A's samples
    b_ms: float
    block_calls: tuple[int, int]
    seconds: float
    # Rounds the host was slow in (host_speed.py): left out, unless every round was slow (then
    # slow_rounds == pairs and they are the figure).
    slow_rounds: int = 0
    # Every round's ratio in the order timed (None: a side's block took no measurable time) and
    # whether it was kept, so a figure can be re-derived from the rounds: the host's state per
    # round (round_gate.RoundGate's readings) lines up with them by index.
    round_ratios: tuple[float | None, ...] = ()
    round_kept: tuple[bool, ...] = ()
    # The spread between windows added to [low, high] (:func:`with_window_spread`), and the
    # interval from this window's pairs alone (None: nothing added).
    window_spread: float = 0.0
    window_low: float | None = None
    window_high: float | None = None

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["block_calls"] = list(self.block_calls)
        out["round_ratios"] = [None if r is None else round(r, 5) for r in self.round_ratios]
        out["round_kept"] = list(self.round_kept)
        return out


def with_window_spread(paired: PairedRatio, spread: float) -> PairedRatio:
    """``paired`` with its interval widened by ``spread``, the relative standard deviation of one
    window's figure between windows, which no interval from one window's pairs can see: added in
    quadrature in log space at the interval's own level, ``ratio * exp(+-sqrt(w**2 + (z *
    spread)**2))`` for each side's log half-width ``w``. The window's own interval is kept
    (``window_low``, ``window_high``); sampling stopped on it, before the spread was added.
    Measured (docs/benchmarks.md, "Intervals that hold what moves between windows"): 2.9-4.1 %
    with a host-bound side, 0-0.33 % otherwise, on four pairs of identical runs on an H200."""
    if spread <= 0 or not 0 < paired.low <= paired.ratio <= paired.high:
        return paired
    # At the interval's own level: under 6 pairs it is the range, whose coverage is lower (2
    # pairs: 0.5, z 0.67); one pair covers nothing (z 0), so there is nothing to add to.
    z = statistics.NormalDist().inv_cdf((1 + paired.level) / 2)
    if z <= 0:
        return paired
    added = (z * spread) ** 2
    low = paired.ratio * math.exp(-math.sqrt(math.log(paired.ratio / paired.low) ** 2 + added))
    high = paired.ratio * math.exp(math.sqrt(math.log(paired.high / paired.ratio) ** 2 + added))
    return replace(
        paired,
        low=low,
        high=high,
        halfwidth=(high - low) / 2 / paired.ratio,
        window_spread=spread,
        window_low=paired.low,
        window_high=paired.high,
    )


def median_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float, float]:
    """``(median, low, high, coverage)``: the order statistics ``x(k)`` and ``x(n-k+1)`` around
    the median with k the largest for which P(Binomial(n, 1/2) < k) <= (1 - level) / 2. Under
    six values no such k exists and the interval is the range (coverage 1 - 2^(1-n))."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("median_interval of no values")
    median = statistics.median(xs)
    k, below = 0, 0.0
    for j in range(n):
        below += math.comb(n, j) / 2**n  # P(B <= j)
        if below > (1 - level) / 2:
            break
        k = j + 1
    if k == 0:
        return median, xs[0], xs[-1], 1 - 2 ** (1 - n)
    outside = sum(math.comb(n, j) for j in range(k)) / 2**n
    return median, xs[k - 1], xs[n - k], 1 - 2 * outside


def block_calls(call_ms: float, settings: TimingSettings) -> int:
    """Calls in one block: ~``paired_block_ms`` of them, at least one, at most ``max_reps`` and
    the block timer's MAX_BLOCK_CALLS (a worker answers exactly the calls it was asked for)."""
    wanted = math.ceil(settings.paired_block_ms / max(call_ms, 1e-4))
    return max(1, min(wanted, settings.max_reps, MAX_BLOCK_CALLS))


def count_cap(settings: TimingSettings) -> int:
    """A side's calls at most: ``max_reps`` per pair the stopping rule needs. A fast call's side
    used to reach a plain ``max_reps`` after a pair or two (1000 calls of a 10 µs kernel are 10
    blocks), before the interval could narrow; ``max_ms`` is the cap that binds on a GPU."""
    return settings.max_reps * max(1, settings.paired_min_pairs)


def paired_ratio(
    a: Block, b: Block, a_call_ms: float, b_call_ms: float, settings: TimingSettings
) -> PairedRatio:
    """Time sides ``a`` and ``b`` in alternating blocks until the ratio's interval is narrow enough
    or a side reaches its cap. ``*_call_ms``: one call's time after warm-up, which sizes the blocks."""
    return paired_ratios([a, b], [a_call_ms, b_call_ms], settings)[0]


def paired_ratios(
    sides: list[Block],
    call_ms: list[float],
    settings: TimingSettings,
    host: HostGate | None = None,
) -> list[PairedRatio]:
    """:func:`paired_ratio` of every side after the first against the first, all timed in one
    window, a block each per round in an order that rotates every round (A B C, B C A, ...: two
    sides are A B then B A), until every ratio's interval is narrow enough or a side is capped.
    ``host``, asked before and after each round: a round it calls slow is left out (its time still
    counts toward the caps), unless no round was fast by the cap (host_speed.py)."""
    start = time.perf_counter()
    n = len(sides)
    calls = [block_calls(ms, settings) for ms in call_ms]
    samples: list[list[float]] = [[] for _ in sides]
    spent = [0.0] * n
    ratios: list[list[float]] = [[] for _ in range(n - 1)]
    slow_samples: list[list[float]] = [[] for _ in sides]
    slow_ratios: list[list[float]] = [[] for _ in range(n - 1)]
    rounds, stopped = 0, ""
    every_round: list[list[float | None]] = [[] for _ in range(n - 1)]
    kept: list[bool] = []
    while not stopped:
        fast = host.fast() if host is not None else True
        medians = [0.0] * n
        blocks: list[list[float]] = [[] for _ in sides]
        for step in range(n):
            side = (step + rounds) % n
            t0 = time.perf_counter()
            blocks[side] = sides[side](calls[side])
            spent[side] += (time.perf_counter() - t0) * 1e3
            medians[side] = statistics.median(blocks[side])
        rounds += 1
        fast = (host.undisturbed() if host is not None else True) and fast
        kept_samples, kept_ratios = (samples, ratios) if fast else (slow_samples, slow_ratios)
        for side, block in enumerate(blocks):
            kept_samples[side].extend(block)
        measured = medians[0] > 0 and all(m > 0 for m in medians[1:])
        for k in range(1, n):
            ratio = medians[k] / medians[0] if measured else None
            every_round[k - 1].append(ratio)
            if ratio is not None:
                kept_ratios[k - 1].append(ratio)
        kept.append(fast)
        pairs = len(ratios[0])
        enough = pairs >= max(1, settings.paired_min_pairs) and min(spent) >= settings.min_ms
        if enough and all(_precise(r, settings) for r in ratios):
            stopped = "precision"
        timed = [len(x) + len(y) for x, y in zip(samples, slow_samples, strict=True)]
        capped = max(spent) >= settings.max_ms or max(timed) >= count_cap(settings)
        if not stopped and capped:
            if not pairs:  # never fast: the slow rounds are all there is, and are used
                samples, ratios = slow_samples, slow_ratios
                pairs = len(ratios[0])
                kept = [True] * len(kept)
            if not pairs:
                counts = " and ".join(str(len(x)) for x in samples)
                raise PairingError(f"no block of either side took measurable time ({counts} calls timed)")
            stopped = "cap"
    seconds = round(time.perf_counter() - start, 4)
    out = []
    for k in range(1, n):
        ratio, low, high, coverage = median_interval(ratios[k - 1])
        out.append(
            PairedRatio(
                ratio=ratio,
                low=low,
                high=high,
                level=round(coverage, 4),
                pairs=len(ratios[k - 1]),
                stopped=stopped,
                halfwidth=round((high - low) / 2 / ratio, 5) if ratio > 0 else math.inf,
                a_ms=statistics.median(samples[0]),
                b_ms=statistics.median(samples[k]),
                block_calls=(calls[0], calls[k]),
                seconds=seconds,
                slow_rounds=len(slow_ratios[k - 1]),
                round_ratios=tuple(every_round[k - 1]),
                round_kept=tuple(kept),
            )
        )
    return out


def _precise(ratios: list[float], settings: TimingSettings) -> bool:
    ratio, low, high, _ = median_interval(ratios)
    return (high - low) / 2 <= settings.paired_halfwidth * ratio
