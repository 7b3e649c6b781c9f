"""evokernel: evolutionary search with LLM operators for fast, verified GPU kernels.

The public Python API is the names in ``__all__`` (the README lists them). They are imported on
first use, so ``import evokernel`` stays cheap and never imports Ray, torch or litellm: sandboxed
candidates and evaluation nodes import ``evokernel.*`` without the LLM client.

A candidate flows through the stage subpackages in this order (docs/architecture.md)::

    config -> run (strategies ask, mutators write) -> pool -> evaluation -> db
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evokernel import _moved

__version__ = "0.1.0"

_moved.install()  # old flat-layout paths (evokernel.runner, ...) stay importable, with a warning

# name -> module that defines it
_PUBLIC: dict[str, str] = {
    # config and run
    "load_config": "evokernel.config",
    "from_dict": "evokernel.config",
    "ExperimentConfig": "evokernel.config",
    "run_experiment": "evokernel.run",
    "run_experiment_async": "evokernel.run",
    "RunSummary": "evokernel.run",
    "load_tasks": "evokernel.tasks",
    # plug-in kinds and what they see
    "Strategy": "evokernel.strategies.base",
    "GenerationalStrategy": "evokernel.strategies.base",
    "RunView": "evokernel.strategies.view",
    "Mutator": "evokernel.mutators.base",
    "MutationRequest": "evokernel.mutators.base",
    "MutationResult": "evokernel.mutators.base",
    "available": "evokernel.plugins",
    "resolve": "evokernel.plugins",
    "check_strategy": "evokernel.conformance",
    # storage
    "SolutionLibrary": "evokernel.db",
    # types passed between parts
    "Task": "evokernel.types",
    "Proposal": "evokernel.types",
    "Candidate": "evokernel.types",
    "Evaluation": "evokernel.types",
    "Status": "evokernel.types",
    "Scored": "evokernel.types",
    "IslandEvent": "evokernel.types",
    "LLMCall": "evokernel.types",
    # errors
    "EvoKernelError": "evokernel.exceptions",
    "ConfigError": "evokernel.exceptions",
    "TaskError": "evokernel.exceptions",
    "LibraryError": "evokernel.exceptions",
    "RunNotFoundError": "evokernel.exceptions",
    "PluginError": "evokernel.exceptions",
    "MutationError": "evokernel.exceptions",
    "LLMError": "evokernel.exceptions",
    "EvaluationError": "evokernel.exceptions",
    "BudgetExhausted": "evokernel.exceptions",
}

__all__ = [
    "BudgetExhausted",
    "Candidate",
    "ConfigError",
    "Evaluation",
    "EvaluationError",
    "EvoKernelError",
    "ExperimentConfig",
    "GenerationalStrategy",
    "IslandEvent",
    "LLMCall",
    "LLMError",
    "LibraryError",
    "MutationError",
    "MutationRequest",
    "MutationResult",
    "Mutator",
    "PluginError",
    "Proposal",
    "RunNotFoundError",
    "RunSummary",
    "RunView",
    "Scored",
    "SolutionLibrary",
    "Status",
    "Strategy",
    "Task",
    "TaskError",
    "available",
    "check_strategy",
    "from_dict",
    "load_config",
    "load_tasks",
    "resolve",
    "run_experiment",
    "run_experiment_async",
]

if TYPE_CHECKING:
    from evokernel.config import ExperimentConfig, from_dict, load_config
    from evokernel.conformance import check_strategy
    from evokernel.db import SolutionLibrary
    from evokernel.exceptions import (
        BudgetExhausted,
        ConfigError,
        EvaluationError,
        EvoKernelError,
        LibraryError,
        LLMError,
        MutationError,
        PluginError,
        RunNotFoundError,
        TaskError,
    )
    from evokernel.mutators.base import MutationRequest, MutationResult, Mutator
    from evokernel.plugins import available, resolve
    from evokernel.run import RunSummary, run_experiment, run_experiment_async
    from evokernel.strategies.base import GenerationalStrategy, Strategy
    from evokernel.strategies.view import RunView
    from evokernel.tasks import load_tasks
    from evokernel.types import Candidate, Evaluation, IslandEvent, LLMCall, Proposal, Scored, Status, Task


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'evokernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
