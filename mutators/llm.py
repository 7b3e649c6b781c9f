"""The ``llm`` mutator: renders a prompt for the proposal's operator, asks a model through litellm,
and parses the reply into a ``ModelNew`` source (or, for PIKE-B's brainstorm, into ideas).

One model (``llm.model``) or an ensemble (``llm.models``) chosen per proposal by
:mod:`~evokernel.mutators.selection`. Every HTTP attempt, failed or not, becomes an
:class:`~evokernel.types.LLMCall` in the result, so the library accounts for tokens, cost and
latency of retries too. Retries back off exponentially on 429, 5xx and timeouts, up to
``llm.max_retries``; an empty reply is recorded and not retried; a reply without usable code goes
back to the same model with the reason, up to ``llm.repair_rounds``
(:mod:`evokernel.mutators.repair`). The API key is read from the environment per call and never
stored in a record, an error text or a log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from evokernel.config.schema import ExperimentConfig, LLMConfig, ModelConfig
from evokernel.exceptions import ConfigError, MutationError
from evokernel.mutators.base import IdeasResult, MutationRequest, MutationResult, Mutator, no_params
from evokernel.mutators.client import MAX_RECORD_CHARS, Attempt, ModelClient, Sampling
from evokernel.mutators.ideas import parse_ideas
from evokernel.mutators.prompting import (
    LANGUAGES,
    PromptSettings,
    clip,
    load_template,
    render_ideas_prompt,
    render_prompt,
)
from evokernel.mutators.repair import judge, repair_message
from evokernel.mutators.selection import ModelSelector, proposal_gain
from evokernel.types import Evaluation, LLMCall, Operator, source_hash

__all__ = ["LLMMutator", "load_template", "resolve_models"]


def resolve_models(config: LLMConfig) -> list[ModelConfig]:
    """The models of ``config``, each with the section's api_base/api_key_env where it sets none."""
    if config.model and config.models:
        raise ConfigError("set either llm.model (one model) or llm.models (an ensemble), not both")
    if not config.model and not config.models:
        raise ConfigError("llm.model is not set: name a litellm model or drop the LLM operators")
    if config.model:
        entries = [
            ModelConfig(
                model=config.model,
                input_cost_per_mtok=config.input_cost_per_mtok,
                output_cost_per_mtok=config.output_cost_per_mtok,
            )
        ]
    else:
        entries = list(config.models)
    resolved = []
    for i, entry in enumerate(entries):
        if not entry.model:
            raise ConfigError(f"llm.models[{i}].model is empty: name a litellm model")
        resolved.append(
            dataclasses.replace(
                entry,
                api_base=entry.api_base or config.api_base,
                api_key_env=entry.api_key_env or config.api_key_env,
            )
        )
    return resolved


class LLMMutator(Mutator):
    """Serves seed/mutate/fix/crossover and :meth:`ideas`. Construct from :class:`LLMConfig`.

    ``request.language`` (which the engine fills from ``llm.language``) picks the prompt guidance.
    """

    name: ClassVar[str] = "llm"
    operators: ClassVar[tuple[str, ...]] = (Operator.SEED, Operator.MUTATE, Operator.FIX, Operator.CROSSOVER)
    can_brainstorm: ClassVar[bool] = True
    # Earlier generations' candidates feed the prompts' "previous attempts" and "ideas tried".
    wants_history: ClassVar[bool] = True
    # Prompts show a few attempts; 4 generations hold them (PIKE-O makes islands x batch per
    # generation), and reading more would make every generation read the whole library.
    history_window: ClassVar[int | None] = 4

    def __init__(self, config: LLMConfig, *, backoff_base_s: float = 0.5, backoff_cap_s: float = 8.0) -> None:
        models = resolve_models(config)
        if config.language not in LANGUAGES:
            raise ConfigError(f"llm.language {config.language!r} is not one of {', '.join(LANGUAGES)}")
        for m in models:
            if m.api_key_env and m.api_key_env not in os.environ:
                raise ConfigError(f"api_key_env of {m.model} names {m.api_key_env}, which is not set")
        if config.max_retries < 0 or config.timeout_s <= 0 or config.repair_rounds < 0:
            raise ConfigError("llm.max_retries and llm.repair_rounds must be >= 0 and llm.timeout_s > 0")
        self.config = config
        # One model per job, retried by _ask, once per repair round.
        self.llm_calls_per_job = (config.max_retries + 1) * (config.repair_rounds + 1)
        self.clients = {m.model: ModelClient(m) for m in models}
        self.selector = ModelSelector([m.model for m in models], [m.weight for m in models], config.selection)
        unpriced = [c.model for c in self.clients.values() if not config.allow_unpriced and not c.priced()]
        if unpriced:
            raise ConfigError(
                f"no price for {', '.join(unpriced)}: litellm's cost map does not know it, so budget.usd "
                "could never stop the run; give llm.input_cost_per_mtok / output_cost_per_mtok (0 for "
                "a free local server, per model under llm.models) or set llm.allow_unpriced=true"
            )
        self.model: str = models[0].model
        self.settings = PromptSettings(
            config.previous_attempts, config.history_chars, config.diversify, config.exemplar_chars
        )
        if config.exemplars < 0:
            raise ConfigError("llm.exemplars must be >= 0")
        self.exemplar_count = config.exemplars
        self.sampling = Sampling(config.temperature, config.max_tokens, config.timeout_s, config.stream)
        # Retry i waits base * 2^i, capped: 0.5, 1, 2, 4 s for the default max_retries=3.
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s

    @classmethod
    def from_config(cls, config: ExperimentConfig, params: Mapping[str, Any]) -> LLMMutator | None:
        """From ``mutators.llm``; None when no model is set (the run then has no LLM operators)."""
        no_params("llm", params)
        return cls(config.mutators.llm) if config.mutators.llm.enabled() else None

    def describe(self) -> str:
        """One line for logs, e.g. ``openai/gpt-4o via http://127.0.0.1:8000/v1`` (never the key)."""
        text = ", ".join(c.describe() for c in self.clients.values())
        return text if len(self.clients) == 1 else f"{self.config.selection} over {text}"

    def __repr__(self) -> str:
        return f"LLMMutator({self.describe()})"

    async def mutate(self, request: MutationRequest) -> MutationResult:
        op = request.proposal.operator
        if op not in self.operators:
            return MutationResult(source=None, error=f"llm mutator does not serve operator {op!r}")
        try:
            system, user = render_prompt(request, self.settings)
        except MutationError as e:
            return MutationResult(source=None, error=str(e))
        client = self._choose(request.rng_seed, learn=True)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        spent: tuple[LLMCall, ...] = ()
        for round_ in range(self.config.repair_rounds + 1):
            calls, attempt, error = await self._ask(client, messages, repair=round_ > 0)
            spent += calls
            reply = (attempt.reply or "") if attempt is not None else ""
            if attempt is None or error:  # no reply, or an empty one (recorded, not retried)
                return MutationResult(source=None, error=error, raw_reply=reply, llm_calls=spent)
            verdict = judge(reply, request)
            if verdict.source is not None:
                return MutationResult(source=verdict.source, raw_reply=reply, llm_calls=spent)
            spent = self._mark_unusable(spent, attempt, verdict.outcome, verdict.problem)
            messages = [
                *messages,
                {"role": "assistant", "content": reply},
                {"role": "user", "content": repair_message(verdict)},
            ]
        return MutationResult(source=None, error=spent[-1].error, raw_reply=reply, llm_calls=spent)

    async def ideas(self, request: MutationRequest, count: int) -> IdeasResult:
        """Up to ``count`` distinct optimization ideas for ``request.task`` (PIKE-B's brainstorm).

        One LLM call (plus retries on 429/5xx/timeouts). The request's parents, if any, are shown
        as the current state; its proposal's operator is not used. A reply without a list of ideas
        is an IdeasResult with no ideas and an ``error``; fewer than ``count`` ideas is not an error.
        """
        try:
            system, user = render_ideas_prompt(request, count, self.settings)
        except MutationError as e:
            return IdeasResult(ideas=(), error=str(e))
        client = self._choose(request.rng_seed, learn=False)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        calls, attempt, error = await self._ask(client, messages)
        reply = (attempt.reply or "") if attempt is not None else ""
        if attempt is None or error:
            return IdeasResult(ideas=(), error=error, raw_reply=reply, llm_calls=calls)
        try:
            ideas = parse_ideas(reply, count)
        except MutationError as e:
            calls = self._mark_unusable(calls, attempt, "no_ideas", str(e))
            return IdeasResult(ideas=(), error=calls[-1].error, raw_reply=reply, llm_calls=calls)
        return IdeasResult(ideas=ideas, raw_reply=reply, llm_calls=calls)

    def observe(
        self, request: MutationRequest, result: MutationResult, evaluation: Evaluation | None
    ) -> None:
        """Teach the model bandit how the proposal's candidate did (its model is in the last call)."""
        if not result.llm_calls:
            return
        gain = proposal_gain(request.parents, evaluation, request.ancestor_ms)
        self.selector.observe(result.llm_calls[-1].model, gain, sum(c.cost_usd for c in result.llm_calls))

    def model_state(self) -> dict[str, dict[str, float]]:
        return self.selector.state()

    def restore_model_state(self, state: Mapping[str, Mapping[str, float]]) -> None:
        self.selector.restore(state)

    def _mark_unusable(
        self, calls: tuple[LLMCall, ...], attempt: Attempt, outcome: str, error: str
    ) -> tuple[LLMCall, ...]:
        """The last call, re-labelled: a reply cut at max_tokens says so."""
        if attempt.finish_reason == "length":
            outcome, error = "truncated", f"{error} (reply stopped at max_tokens={self.config.max_tokens})"
        return (*calls[:-1], dataclasses.replace(calls[-1], outcome=outcome, error=error))

    def _choose(self, rng_seed: int, *, learn: bool) -> ModelClient:
        return self.clients[self.selector.choose(rng_seed, count=learn)]

    async def _ask(
        self, client: ModelClient, messages: list[dict[str, str]], *, repair: bool = False
    ) -> tuple[tuple[LLMCall, ...], Attempt | None, str]:
        """(calls, last attempt with a reply or None, error). ``error`` is set when no usable reply
        came: every attempt failed (attempt None) or the reply was empty (attempt set)."""
        if client.config.api_key_env and not os.environ.get(client.config.api_key_env):
            return (), None, f"api_key_env of {client.model}: {client.config.api_key_env} is unset"
        if repair:  # the earlier turns are the previous call's prompt and reply, recorded there
            shown = f"[repair of the previous call's reply]\n\n[user]\n{messages[-1]['content']}"
        else:
            shown = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
        # Fields shared by every attempt's record; each attempt fills in what it measured.
        blank = LLMCall(
            model=client.model,
            prompt_hash=source_hash(json.dumps(messages, sort_keys=True)),
            prompt=clip(shown, MAX_RECORD_CHARS),
        )
        calls: list[LLMCall] = []
        for i in range(self.config.max_retries + 1):
            attempt = await client.attempt(messages, blank, self.sampling)
            calls.append(attempt.call)
            if attempt.reply is not None:
                return tuple(calls), attempt, attempt.call.error if attempt.call.outcome != "ok" else ""
            if not attempt.retryable or i == self.config.max_retries:
                tries = f" after {i + 1} attempts" if i else ""
                return tuple(calls), None, f"LLM call failed{tries}: {attempt.call.error}"
            delay = min(self.backoff_cap_s, self.backoff_base_s * 2**i)
            await asyncio.sleep(max(delay, min(attempt.retry_after_s, self.backoff_cap_s)))
        raise AssertionError("unreachable: the last attempt returns")
