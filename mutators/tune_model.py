"""A cheap surrogate of runtime over knob settings: the tune operator's model-based proposals.

Plain Bayesian optimisation, sized for ~100-3000 settings and ~5-300 evaluations:

* the response is log(runtime), so a knob that halves the runtime counts the same on a fast and a
  slow kernel. A wrong or failed setting is not a runtime: it stays out of the regression (imputing
  a bad value there would make a fast neighbour -- the largest tile that still fits -- look slow)
  and instead lowers its close neighbours' chance of being worth a try (:func:`feasibility`);
* inputs are log2(knob value): knobs act multiplicatively (doubling a tile or a warp count), so one
  doubling is one unit on every knob;
* a Gaussian process with a kernel that is a mix of an additive part (one squared-exponential per
  knob: per-knob main effects, learnable from few points) and a product part (the same over all
  knobs jointly: interactions such as tile size x warps). Its three hyperparameters (length
  scale, additive share, signal scale) are picked from a small grid by marginal likelihood;
* expected improvement chooses among the untried candidates it is given (the tune operator gives
  it either the whole space or a trust region around the incumbent, see :mod:`.tune`); settings
  proposed but not yet measured (siblings of the same generation) enter as "kriging believers" --
  observed at their predicted mean -- so a batch spreads out instead of proposing the same optimum
  four times.

Everything is deterministic given its inputs (ties go to the earlier candidate), so a proposal is
reproducible from the request alone. Cost: a Cholesky of the observations per hyperparameter
(27 of them) and one matrix product per candidate set: ~10 ms at 100 observations x 3000 candidates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Setting = tuple[int, ...]
LENGTH_SCALES = (0.5, 1.0, 2.0)  # in doublings of a knob
ADDITIVE_SHARES = (0.0, 0.5, 1.0)
SIGNAL_SCALES = (0.1, 0.3, 1.0)  # std of log-runtime across settings: 10 %, 35 %, 170 %
# What the smooth model cannot explain, in log units: timing noise (~1-2 %) plus ruggedness (a
# setting that is 5 % off its neighbours' trend for reasons no knob-by-knob model sees).
NOISES = (0.02, 0.06)
# Below this many observations marginal likelihood cannot tell the grid's points apart.
MIN_FIT = 5
DEFAULT = (1.0, 0.5, 0.3, 0.02)
# The model fits at most this many correct observations (~1 ms per Cholesky at 128).
MAX_OBSERVATIONS = 128
# Log runtimes above median + CAP * (median - fastest) are clipped to that bound (see rank()).
CAP = 1.0
# Length scale (doublings) of a failure's shadow on its neighbours; see feasibility().
FAIL_LENGTH = 0.5
# Improvement counted only beyond ~0.5 %: smaller gains are within the timing noise.
XI = 0.005


@dataclass(frozen=True)
class Observation:
    setting: Setting
    runtime_ms: float | None  # None: the setting was wrong or failed


def encode(settings: Sequence[Setting]) -> np.ndarray:
    return np.log2(np.maximum(np.asarray(settings, dtype=float), 1.0)).reshape(len(settings), -1)


def _kernel(a: np.ndarray, b: np.ndarray, length: float, additive: float) -> np.ndarray:
    sq = ((a[:, None, :] - b[None, :, :]) / length) ** 2  # (n, m, d)
    per_knob = np.exp(-0.5 * sq)
    return additive * per_knob.mean(axis=2) + (1.0 - additive) * np.exp(-0.5 * sq.sum(axis=2))


@dataclass(frozen=True)
class Surrogate:
    x: np.ndarray
    centred: np.ndarray  # y - mean
    mean: float
    length: float
    additive: float
    signal: float
    noise: float
    chol: np.ndarray
    alpha: np.ndarray

    @classmethod
    def fit(
        cls, x: np.ndarray, y: np.ndarray, params: tuple[float, float, float, float] | None = None
    ) -> Surrogate:
        """Fit on observations ``x`` (log2 knob values) and ``y`` (log runtimes)."""
        mean = float(np.mean(y))
        centred = y - mean
        if params is None:
            grid = list(itertools.product(LENGTH_SCALES, ADDITIVE_SHARES, SIGNAL_SCALES, NOISES))
            fits = [cls._build(x, centred, mean, *p) for p in grid] if len(y) >= MIN_FIT else []
            if fits:
                return max(fits, key=lambda s: s.log_likelihood())
            params = DEFAULT
        return cls._build(x, centred, mean, *params)

    @classmethod
    def _build(
        cls,
        x: np.ndarray,
        centred: np.ndarray,
        mean: float,
        length: float,
        additive: float,
        signal: float,
        noise: float,
    ) -> Surrogate:
        k = signal**2 * _kernel(x, x, length, additive) + (noise**2 + 1e-9) * np.eye(len(x))
        chol = np.linalg.cholesky(k)
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, centred))
        return cls(x, centred, mean, length, additive, signal, noise, chol, alpha)

    def log_likelihood(self) -> float:
        n = len(self.centred)
        fit_term = float(self.centred @ self.alpha)
        return -0.5 * fit_term - float(np.log(np.diag(self.chol)).sum()) - 0.5 * n * math.log(2 * math.pi)

    def predict(self, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of log runtime at ``xs``."""
        cross = self.signal**2 * _kernel(xs, self.x, self.length, self.additive)
        mean = self.mean + cross @ self.alpha
        v = np.linalg.solve(self.chol, cross.T)
        var = np.maximum(self.signal**2 - (v * v).sum(axis=0), 1e-12)
        return mean, np.sqrt(var)

    def believe(self, xs: np.ndarray) -> Surrogate:
        """The same model with ``xs`` observed at its own predicted mean (pending evaluations)."""
        if len(xs) == 0:
            return self
        predicted, _std = self.predict(xs)
        x = np.vstack([self.x, xs])
        centred = np.concatenate([self.centred, predicted - self.mean])
        return Surrogate._build(x, centred, self.mean, self.length, self.additive, self.signal, self.noise)


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    """Expected amount by which log runtime falls below ``best - XI`` (minimisation)."""
    gain = best - XI - mean
    z = gain / std
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return gain * _normal_cdf(z) + std * pdf


def feasibility(failed: Sequence[Setting], candidates: np.ndarray) -> np.ndarray:
    """Chance each candidate runs at all, from its distance to settings that failed: 0 at a failed
    setting, ~0.86 one doubling away from it in one knob, ~1 beyond (a failure is usually a resource
    limit -- shared memory, registers -- that its immediate neighbours may share)."""
    out = np.ones(len(candidates))
    for point in encode(list(failed)) if failed else ():
        sq = (((candidates - point) / FAIL_LENGTH) ** 2).sum(axis=1)
        out *= 1.0 - np.exp(-0.5 * sq)
    return out


def rank(
    observed: Sequence[Observation],
    pending: Sequence[Setting],
    candidates: Sequence[Setting],
    features: Callable[[Sequence[Setting]], np.ndarray] = encode,
) -> list[int]:
    """Indices of ``candidates`` from most to least promising: expected improvement under the
    surrogate of the correct observations (``pending`` believed at their predicted runtime), times
    the chance of not failing like the failed observations did."""
    if not candidates:
        return []
    ok = [o for o in observed if o.runtime_ms is not None and o.runtime_ms > 0]
    failed = [o.setting for o in observed if o.runtime_ms is None or o.runtime_ms <= 0]
    chance = feasibility(failed, encode(list(candidates)))
    if not ok:  # nothing correct yet: stay away from failures, nearest first
        return sorted(range(len(candidates)), key=lambda i: (-float(chance[i]), i))
    if len(ok) > MAX_OBSERVATIONS:  # the fastest: where the optimum is; slow regions are known
        ok = sorted(ok, key=lambda o: (o.runtime_ms, o.setting))[:MAX_OBSERVATIONS]
    y = np.log(np.array([o.runtime_ms for o in ok], dtype=float))
    # Only the fast end matters: a setting many times slower than the rest (a tile far too small
    # for its warps) would otherwise pull its whole neighbourhood down with it.
    middle = float(np.median(y))
    y = np.minimum(y, middle + CAP * (middle - float(y.min())))
    xs = features(list(candidates))
    model = Surrogate.fit(features([o.setting for o in ok]), y)
    model = model.believe(features(list(pending)) if pending else np.empty((0, model.x.shape[1])))
    mean, std = model.predict(xs)
    # The incumbent is the best *predicted* runtime among the observed: with noise, the fastest
    # measurement is partly luck.
    incumbent = float(model.predict(model.x[: len(ok)])[0].min())
    score = expected_improvement(mean, std, incumbent) * chance
    return sorted(range(len(candidates)), key=lambda i: (-float(score[i]), i))
