"""What the LLM model selector learned per model of a run (the library's ``model_stats``)."""

from __future__ import annotations

from dataclasses import dataclass

from evokernel.db import SolutionLibrary


@dataclass(frozen=True)
class ModelLearning:
    """One model's bandit state: proposals it was chosen for (``pulls``), those whose outcome was
    observed, their summed gain (log-speedup over the last correct ancestor, plus a credit for a
    correct candidate) and summed LLM cost."""

    model: str
    pulls: int
    observed: int
    gain: float
    cost_usd: float

    @property
    def mean_gain(self) -> float:
        return self.gain / self.observed if self.observed else 0.0

    @property
    def gain_per_usd(self) -> float | None:
        return self.gain / self.cost_usd if self.cost_usd > 0 else None


def model_learning(lib: SolutionLibrary, run_id: str) -> list[ModelLearning]:
    """Per model, in name order; [] for a run without an LLM (or from before migration 0007)."""
    return [
        ModelLearning(m, int(v["pulls"]), int(v["observed"]), float(v["gain"]), float(v["cost_usd"]))
        for m, v in lib.model_stats(run_id).items()
    ]


def learning_lines(models: list[ModelLearning] | tuple[ModelLearning, ...]) -> list[str]:
    """One line per model for a terminal report."""
    out = []
    for m in models:
        rate = f", {m.gain_per_usd:.3g} gain/$" if m.gain_per_usd is not None else ""
        out.append(
            f"  model {m.model}: chosen {m.pulls}x, {m.observed} observed, mean gain {m.mean_gain:.3g}, "
            f"${m.cost_usd:.4f}{rate}"
        )
    return out
