"""Stage 1 -- config: what a run is asked to do.

Enters: a YAML experiment file (or a dict) and ``key=value`` overrides.
Leaves: a checked, frozen-by-convention :class:`ExperimentConfig` (:mod:`.schema`) whose every key
is known; a wrong key or type is a :class:`~evokernel.exceptions.ConfigError` naming it.
Plug-in point: none here; the names it carries (strategy, mutators, migration, reset) are resolved
by :mod:`evokernel.plugins`.
"""

from __future__ import annotations

from evokernel.config.loading import from_dict, load_config, to_dict
from evokernel.config.schema import (
    BudgetConfig,
    ConcurrencyConfig,
    EvaluationConfig,
    ExperimentConfig,
    LLMConfig,
    ModelConfig,
    MutatorsConfig,
    RayConfig,
    StrategyConfig,
    TimingConfig,
    TuneConfig,
)

__all__ = [
    "BudgetConfig",
    "ConcurrencyConfig",
    "EvaluationConfig",
    "ExperimentConfig",
    "LLMConfig",
    "ModelConfig",
    "MutatorsConfig",
    "RayConfig",
    "StrategyConfig",
    "TimingConfig",
    "TuneConfig",
    "from_dict",
    "load_config",
    "to_dict",
]
