"""Which model of an ensemble answers a proposal: by weight, or by a bandit over improvement per dollar.

``weighted`` draws a model with probability proportional to its weight, from the request's
``rng_seed``, so a resumed run re-draws the same model for the same proposal.

``bandit`` is a cost-aware UCB1 over gain per dollar. Each model's score is

    weight * (rate + EXPLORATION * pooled rate * sqrt(2 ln(total pulls) / pulls))

where *rate* is the model's summed gain over its summed cost (USD), the *pooled rate* is the same
over all models (it puts the exploration bonus in the rates' own units), the *gain* of one proposal
is the log-speedup of its candidate over its fastest correct parent (a fix's parent failed: over
its last correct ancestor; over PyTorch eager for a parentless seed), clipped at 0, plus
CORRECT_CREDIT when the candidate is correct at all, and its *cost* is what its LLM calls cost.
Models never observed go first (fewest pulls first), so each is tried before any is preferred;
while no model has gained anything, choices go round robin. Pulls count at choice time and gains
when :meth:`ModelSelector.observe` is told the outcome, so proposals in flight already spread the
next choices. The engine records the state in the library (``model_stats``) after every
observation, and a resumed run starts from it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evokernel.exceptions import ConfigError
from evokernel.types import Evaluation, Scored, Status

SELECTIONS = ("weighted", "bandit")
# A correct candidate that is no faster still shows the model writes working code: worth as much as
# a 5 % speedup, so a model that is always correct beats one that never is when neither improves.
CORRECT_CREDIT = 0.05
# UCB's exploration weight, relative to the pooled rate. Simulated over 60 proposals, two models,
# sparse gains and 1-4x price ratios (50 seeds each, share of the last 30 picks): at 1.0 a cheap
# model that never improves gets 6 %, a model with a 2.7x better rate 60 %, the cheaper of two
# equally good ones 97 %; at 0.3 the 2.7x-better model got only 46 % (too little exploration), at
# 2.0 the useless one 13 % and the cheaper equal one 87 % (too much).
EXPLORATION = 1.0
# Local servers cost 0 USD; the floor keeps their score finite (a proposal rarely costs < 1e-5 USD).
COST_FLOOR_USD = 1e-5


def proposal_gain(
    parents: Sequence[Scored], evaluation: Evaluation | None, ancestor_ms: float | None = None
) -> float:
    """How much a proposal improved on its parents (see the module docstring); ``ancestor_ms``: the
    runtime of the last correct ancestor, for a proposal whose parents are not correct (a fix)."""
    if evaluation is None or evaluation.status is not Status.CORRECT:
        return 0.0
    baselines = [
        p.evaluation.runtime_ms
        for p in parents
        if p.evaluation is not None
        and p.evaluation.status is Status.CORRECT
        and p.evaluation.runtime_ms is not None
    ]
    if not baselines and ancestor_ms:
        baselines = [ancestor_ms]
    baseline = min(baselines) if baselines else evaluation.eager_ms
    speedup = 0.0
    if baseline and evaluation.runtime_ms:
        speedup = max(0.0, math.log(baseline / evaluation.runtime_ms))
    return CORRECT_CREDIT + speedup


@dataclass
class ModelStats:
    pulls: int = 0
    observed: int = 0
    gain: float = 0.0
    cost_usd: float = 0.0

    @property
    def mean_gain(self) -> float:
        return self.gain / self.observed if self.observed else 0.0

    @property
    def mean_cost(self) -> float:
        return self.cost_usd / self.observed if self.observed else 0.0

    @property
    def rate(self) -> float:
        """Gain per dollar so far."""
        return _rate(self.gain, self.cost_usd, self.observed)


def _rate(gain: float, cost_usd: float, observed: int) -> float:
    return gain / max(cost_usd, COST_FLOOR_USD * observed, COST_FLOOR_USD)


class ModelSelector:
    """Chooses among ``models`` (litellm model strings, distinct) with their ``weights``."""

    def __init__(self, models: Sequence[str], weights: Sequence[float], selection: str = "weighted") -> None:
        if selection not in SELECTIONS:
            raise ConfigError(f"llm.selection must be one of {', '.join(SELECTIONS)}, not {selection!r}")
        if not models or len(models) != len(weights):
            raise ConfigError("llm.models needs at least one model, each with a weight")
        if len(set(models)) != len(models):
            raise ConfigError("llm.models lists a model twice; give each model one entry")
        if any(w < 0 or not math.isfinite(w) for w in weights) or not any(w > 0 for w in weights):
            raise ConfigError("llm.models weights must be >= 0 with at least one > 0")
        self.models = tuple(models)
        self.weights = tuple(float(w) for w in weights)
        self.selection = selection
        self.stats = {m: ModelStats() for m in self.models}

    def choose(self, rng_seed: int, *, count: bool = True) -> str:
        """The model for one proposal; ``count=False`` for calls no outcome will be observed for
        (PIKE-B's ideas), so they do not look like unfinished pulls to the bandit."""
        live = [(m, w) for m, w in zip(self.models, self.weights, strict=True) if w > 0]
        if self.selection == "weighted" or len(live) == 1:
            chosen = random.Random(rng_seed).choices([m for m, _ in live], weights=[w for _, w in live])[0]
        else:
            chosen = self._ucb(live)
        if count:
            self.stats[chosen].pulls += 1
        return chosen

    def _ucb(self, live: list[tuple[str, float]]) -> str:
        unseen = [m for m, _ in live if self.stats[m].observed == 0]
        if unseen:
            return min(unseen, key=lambda m: self.stats[m].pulls)  # min keeps config order on ties
        stats = [self.stats[m] for m, _ in live]
        total = sum(s.pulls for s in stats)
        pooled = _rate(
            sum(s.gain for s in stats), sum(s.cost_usd for s in stats), sum(s.observed for s in stats)
        )

        def score(item: tuple[str, float]) -> tuple[float, int]:
            s = self.stats[item[0]]
            bonus = EXPLORATION * pooled * math.sqrt(2 * math.log(max(total, 2)) / max(s.pulls, 1))
            return item[1] * (s.rate + bonus), -s.pulls  # with no gain anywhere yet: round robin

        return max(live, key=score)[0]

    def observe(self, model: str, gain: float, cost_usd: float) -> None:
        """Record one finished proposal of ``model``; unknown models are ignored."""
        stats = self.stats.get(model)
        if stats is None:
            return
        stats.observed += 1
        stats.gain += gain
        stats.cost_usd += cost_usd

    def state(self) -> dict[str, dict[str, float]]:
        """Per model: pulls, observed, summed gain and cost (what the library keeps)."""
        return {
            m: {"pulls": s.pulls, "observed": s.observed, "gain": s.gain, "cost_usd": s.cost_usd}
            for m, s in self.stats.items()
        }

    def restore(self, state: Mapping[str, Mapping[str, float]]) -> None:
        """Continue from :meth:`state` of an earlier process; models not configured now are ignored.
        Pulls in flight when that process stopped were never observed: they count as observed-less
        pulls, as they were."""
        for model, values in state.items():
            if model in self.stats:
                self.stats[model] = ModelStats(
                    int(values.get("pulls", 0)),
                    int(values.get("observed", 0)),
                    float(values.get("gain", 0.0)),
                    float(values.get("cost_usd", 0.0)),
                )

    def summary(self) -> dict[str, dict[str, float]]:
        """Per model: pulls, observed, mean gain, mean cost (for logs and reports)."""
        return {
            m: {"pulls": s.pulls, "observed": s.observed, "mean_gain": s.mean_gain, "mean_cost": s.mean_cost}
            for m, s in self.stats.items()
        }
