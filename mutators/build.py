"""Build the mutators a config asks for: ``mutators.plugins`` first, then ``mutators.builtins``.

Every mutator is a plug-in found by name (:mod:`evokernel.plugins`: built-in, entry point of the
group ``evokernel.mutators``, or ``module:Class``) and built by its own ``from_config``, so adding
an operator touches neither the runner nor the config schema.
"""

from __future__ import annotations

from typing import Any

from evokernel.config.schema import ExperimentConfig
from evokernel.exceptions import PluginError
from evokernel.mutators.base import Mutator
from evokernel.plugins import resolve


def build_mutators(config: ExperimentConfig) -> list[Mutator]:
    """The run's mutators, in the order that decides which serves an operator first."""
    wanted = [(p.name, dict(p.params)) for p in config.mutators.plugins]
    wanted += [(name, {}) for name in config.mutators.builtins]
    mutators: list[Mutator] = []
    for name, params in wanted:
        cls: Any = resolve("mutators", name)
        if not (isinstance(cls, type) and issubclass(cls, Mutator)):
            raise PluginError(
                f"mutator {name!r} resolves to {cls!r}, not a subclass of evokernel.mutators.base.Mutator"
            )
        mutator_cls: type[Mutator] = cls
        built = mutator_cls.from_config(config, params)
        if built is not None:
            mutators.append(built)
    return mutators
