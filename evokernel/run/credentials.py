"""LLM credentials, checked before a run records anything or starts Ray.

Without it a run with ``mutators.llm.model=openai/gpt-4o`` and no ``OPENAI_API_KEY`` started,
failed every LLM call after its retries for a minute, and finished with exit 0. Each model of the
run is checked the way its calls will authenticate (:meth:`mutators.client.ModelClient.api_key`):
``api_key_env`` must name a set variable; a model with an ``api_base`` (a local server) needs no
key; any other is asked of litellm's ``validate_environment``, which knows which variable each
provider reads (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...).
"""

from __future__ import annotations

import os

from evokernel.config.schema import ExperimentConfig
from evokernel.exceptions import ConfigError


def missing_credentials(config: ExperimentConfig) -> list[str]:
    """One phrase per model whose calls could not authenticate; empty when all can (or no LLM runs)."""
    llm = config.mutators.llm
    if "llm" not in config.mutators.builtins or not llm.enabled():
        return []
    from evokernel.mutators.client import import_litellm
    from evokernel.mutators.llm import resolve_models

    problems = []
    for model in resolve_models(llm):
        if model.api_key_env:
            if not os.environ.get(model.api_key_env):
                problems.append(
                    f"{model.model} reads its key from {model.api_key_env} (api_key_env), which is not set"
                )
            continue
        if model.api_base:
            continue  # a local OpenAI-compatible server: a placeholder key is sent
        found = import_litellm().validate_environment(model=model.model)
        missing = [str(k) for k in found.get("missing_keys") or []]
        if missing:
            problems.append(f"{model.model} needs {' and '.join(missing)} in the environment")
    return problems


def check_credentials(config: ExperimentConfig) -> None:
    """Raise :class:`ConfigError` naming every variable the run's models need and lack."""
    problems = missing_credentials(config)
    if problems:
        raise ConfigError(
            "LLM credentials missing, nothing started: "
            + "; ".join(problems)
            + " (export the variable, or name another with mutators.llm.api_key_env)"
        )
