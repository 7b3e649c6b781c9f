"""The ``llm`` mutator: renders a prompt for the proposal's operator, asks a model through litellm,
and parses the reply into a ``ModelNew`` source.

litellm is imported on the first call, not with this module: it takes ~8 s to import and is absent
on GPU evaluation nodes, which import ``evokernel`` but never run an LLM operator. Every HTTP
attempt, failed or not, becomes an :class:`~evokernel.types.LLMCall` in the result, so the library
accounts for tokens, cost and latency of retries too. The API key is read from the environment per
call and never stored in a record, an error text or a log line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import os
import time
from dataclasses import dataclass
from importlib import resources
from string import Template
from types import ModuleType
from typing import Any, ClassVar

from evokernel.config_schema import LLMConfig
from evokernel.exceptions import ConfigError, MutationError
from evokernel.mutators.base import MutationRequest, MutationResult, Mutator
from evokernel.mutators.parsing import extract_model_new
from evokernel.types import Evaluation, LLMCall, Scored, source_hash

# Prompts and replies are kept for inspection; 64 KiB holds a long kernel file plus reference.
MAX_RECORD_CHARS = 64 * 1024
# Feedback of a crashed candidate can be a long traceback; the head and tail carry the signal.
MAX_FEEDBACK_CHARS = 4000
LANGUAGES: dict[str, str] = {
    "triton": "Triton",
    "cuda": "CUDA C++ via torch.utils.cpp_extension.load_inline",
    "pytorch": "plain PyTorch",
    "any": "Triton, CUDA via torch.utils.cpp_extension.load_inline, or plain PyTorch",
}
# vLLM and SGLang accept any key unless started with --api-key; the OpenAI client insists on one.
_PLACEHOLDER_KEY = "EMPTY"
_log = logging.getLogger(__name__)


@functools.cache
def load_template(name: str) -> Template:
    """``mutators/prompts/<name>.md`` as a :class:`string.Template` (``$var``, ``$$`` for ``$``)."""
    path = resources.files("evokernel.mutators") / "prompts" / f"{name}.md"
    return Template(path.read_text(encoding="utf-8"))


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters cut ...]\n"
    half = (limit - len(marker)) // 2
    return text[:half] + marker + text[-half:]


def format_feedback(scored: Scored) -> str:
    """How a parent did, in the words the next prompt shows the model."""
    ev: Evaluation | None = scored.evaluation
    if ev is None:
        return "Not evaluated yet."
    lines = [f"Status: {ev.status.value}" + (f" ({ev.reason})" if ev.reason else "")]
    if ev.runtime_ms is not None:
        timing = f"Runtime: {ev.runtime_ms:.4g} ms"
        if ev.eager_ms is not None:
            timing += f"; PyTorch eager {ev.eager_ms:.4g} ms"
        if ev.speedup_eager is not None:
            timing += f"; speedup {ev.speedup_eager:.3g}x vs eager"
        if ev.speedup_compile is not None:
            timing += f", {ev.speedup_compile:.3g}x vs torch.compile"
        lines.append(timing)
    if ev.max_abs_error is not None:
        lines.append(f"Max abs error vs reference: {ev.max_abs_error:.3g}")
    if ev.interpreter:
        lines.append("(Timings come from Triton's CPU interpreter, not from a GPU.)")
    if ev.feedback:
        lines.append("Details:\n" + _clip(ev.feedback.strip(), MAX_FEEDBACK_CHARS))
    return "\n".join(lines)


def render_prompt(request: MutationRequest) -> tuple[str, str]:
    """(system, user) messages for ``request``; raises MutationError if the request cannot work."""
    op = request.proposal.operator
    if request.language not in LANGUAGES:
        raise MutationError(f"unknown language {request.language!r}; known: {', '.join(LANGUAGES)}")
    if op in ("mutate", "fix", "crossover") and not request.parents:
        raise MutationError(f"operator {op!r} needs at least one parent")
    task = request.task
    parents = "\n\n".join(
        f"## Implementation {i} (candidate {p.candidate.id})\n```python\n{p.candidate.source.strip()}\n```\n"
        f"How it did:\n{format_feedback(p)}"
        for i, p in enumerate(request.parents, start=1)
    )
    idea, seed = request.proposal.idea, task.seed_source
    values = {
        "language": LANGUAGES[request.language],
        "language_guidance": load_template(f"language_{request.language}").template.strip(),
        "hardware": request.hardware.strip() or "unknown",
        "task_name": task.name,
        "task_description": task.description.strip(),
        "reference_source": task.source.strip(),
        "parent_source": request.parents[0].candidate.source.strip() if request.parents else "",
        "parent_feedback": format_feedback(request.parents[0]) if request.parents else "",
        "parents": parents,
        "idea": f"\n## Idea to try\n{idea.strip()}\n" if idea else "",
        "starting_point": f"\n## Starting point (correct, maybe slow)\n```python\n{seed.strip()}\n```\n"
        if seed
        else "",
    }
    return load_template("system").substitute(values), load_template(op).substitute(values)


@functools.cache
def _litellm() -> ModuleType:
    # Must precede the first import: otherwise litellm fetches its cost map from GitHub at import,
    # which hangs for ~10 s of retries on an offline node.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner per exception
    litellm.turn_off_message_logging = True  # callbacks, if a user adds any, get no prompts
    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    try:
        # The OpenAI client imports its chat resources on first use: ~1.6 s that would otherwise
        # count into the first call's latency and its timeout.
        import openai.resources.chat.completions  # noqa: F401
    except ImportError as e:  # a future openai layout; only the first call gets slower
        _log.debug("openai chat resources not preloaded: %s", e)
    return litellm


def _caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``kind`` is in the first links of the exception chain (litellm wraps twice or thrice)."""
    link: BaseException | None = error
    for _ in range(8):
        if link is None:
            return False
        if isinstance(link, kind):
            return True
        link = link.__cause__ or link.__context__
    return False


@dataclass(frozen=True)
class _Attempt:
    call: LLMCall
    reply: str | None = None  # None: no usable HTTP response
    finish_reason: str = ""
    retryable: bool = False
    retry_after_s: float = 0.0


class LLMMutator(Mutator):
    """Serves seed/mutate/fix/crossover with one litellm model. Construct from :class:`LLMConfig`.

    ``request.language`` (which the engine fills from ``llm.language``) picks the prompt guidance.
    """

    name: ClassVar[str] = "llm"
    operators: ClassVar[tuple[str, ...]] = ("seed", "mutate", "fix", "crossover")

    def __init__(self, config: LLMConfig, *, backoff_base_s: float = 0.5, backoff_cap_s: float = 8.0) -> None:
        if not config.model:
            raise ConfigError("llm.model is not set: name a litellm model or drop the LLM operators")
        if config.language not in LANGUAGES:
            raise ConfigError(f"llm.language {config.language!r} is not one of {', '.join(LANGUAGES)}")
        if config.api_key_env and config.api_key_env not in os.environ:
            raise ConfigError(f"llm.api_key_env names {config.api_key_env}, which is not set")
        if config.max_retries < 0 or config.timeout_s <= 0:
            raise ConfigError("llm.max_retries must be >= 0 and llm.timeout_s > 0")
        self.config = config
        self.model: str = config.model
        # Retry i waits base * 2^i, capped: 0.5, 1, 2, 4 s for the default max_retries=3.
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s

    def describe(self) -> str:
        """One line for logs, e.g. ``openai/gpt-4o via http://127.0.0.1:8000/v1`` (never the key)."""
        return f"{self.model} via {self.config.api_base}" if self.config.api_base else self.model

    def __repr__(self) -> str:
        return f"LLMMutator({self.describe()})"

    async def mutate(self, request: MutationRequest) -> MutationResult:
        op = request.proposal.operator
        if op not in self.operators:
            return MutationResult(source=None, error=f"llm mutator does not serve operator {op!r}")
        try:
            system, user = render_prompt(request)
        except MutationError as e:
            return MutationResult(source=None, error=str(e))
        if self.config.api_key_env and not os.environ.get(self.config.api_key_env):
            return MutationResult(source=None, error=f"llm.api_key_env: {self.config.api_key_env} is unset")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        # Fields shared by every attempt's record; each attempt fills in what it measured.
        blank = LLMCall(
            model=self.model,
            prompt_hash=source_hash(json.dumps(messages, sort_keys=True)),
            prompt=_clip(f"[system]\n{system}\n\n[user]\n{user}", MAX_RECORD_CHARS),
        )
        calls: list[LLMCall] = []
        for i in range(self.config.max_retries + 1):
            attempt = await self._attempt(messages, blank)
            calls.append(attempt.call)
            if attempt.reply is not None:
                break
            if not attempt.retryable or i == self.config.max_retries:
                tries = f" after {i + 1} attempts" if i else ""
                error = f"LLM call failed{tries}: {attempt.call.error}"
                return MutationResult(source=None, error=error, llm_calls=tuple(calls))
            delay = min(self.backoff_cap_s, self.backoff_base_s * 2**i)
            await asyncio.sleep(max(delay, min(attempt.retry_after_s, self.backoff_cap_s)))
        reply = attempt.reply or ""
        if attempt.call.outcome != "ok":  # an empty reply: recorded, not retried
            return MutationResult(None, error=attempt.call.error, raw_reply=reply, llm_calls=tuple(calls))
        parent = request.parents[0].candidate.source if request.parents else None
        try:
            source = extract_model_new(reply, parent)
        except MutationError as e:
            outcome, error = "no_code", str(e)
            if attempt.finish_reason == "length":
                outcome, error = (
                    "truncated",
                    f"{error} (reply stopped at max_tokens={self.config.max_tokens})",
                )
            calls[-1] = dataclasses.replace(calls[-1], outcome=outcome, error=error)
            return MutationResult(source=None, error=error, raw_reply=reply, llm_calls=tuple(calls))
        return MutationResult(source=source, raw_reply=reply, llm_calls=tuple(calls))

    def _api_key(self) -> str | None:
        if self.config.api_key_env:
            return os.environ.get(self.config.api_key_env)
        return _PLACEHOLDER_KEY if self.config.api_base else None

    async def _attempt(self, messages: list[dict[str, str]], blank: LLMCall) -> _Attempt:
        """One HTTP request; every error litellm maps becomes an outcome, nothing is raised."""
        litellm = _litellm()
        import openai  # a litellm dependency; all of litellm's mapped errors derive from its errors

        cfg = self.config
        key = self._api_key()
        start = time.monotonic()
        try:
            # wait_for backs up the client's own timeout, which is per socket read: a server that
            # trickles bytes could otherwise hold the call far longer than timeout_s.
            response = await asyncio.wait_for(
                litellm.acompletion(
                    model=self.model,
                    messages=messages,
                    api_base=cfg.api_base,
                    api_key=key,
                    temperature=cfg.temperature,
                    max_tokens=cfg.max_tokens,
                    timeout=cfg.timeout_s,
                    # Retries are ours, so each one is recorded; litellm and the OpenAI client
                    # would otherwise retry 429/5xx silently (2 times by default).
                    max_retries=0,
                    num_retries=0,
                ),
                timeout=cfg.timeout_s + 1.0,
            )
        except (TimeoutError, litellm.Timeout) as e:
            error = self._scrub(str(e) or f"no response within timeout_s={cfg.timeout_s}", key)
            call = dataclasses.replace(
                blank, outcome="timeout", error=error, latency_s=time.monotonic() - start
            )
            return _Attempt(call, retryable=True)
        except openai.OpenAIError as e:
            return self._failed(dataclasses.replace(blank, latency_s=time.monotonic() - start), e, key)
        latency = time.monotonic() - start
        choice = response.choices[0] if response.choices else None
        reply = (choice.message.content if choice is not None else None) or ""
        usage = getattr(response, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        call = dataclasses.replace(
            blank,
            prompt_tokens=pt,
            completion_tokens=ct,
            cost_usd=self._cost(litellm, response, pt, ct),
            latency_s=latency,
            reply=_clip(reply, MAX_RECORD_CHARS),
        )
        if not reply.strip():
            call = dataclasses.replace(call, outcome="empty", error="reply has no content")
        return _Attempt(call, reply, str(getattr(choice, "finish_reason", "") or ""))

    def _failed(self, call: LLMCall, e: Exception, key: str | None) -> _Attempt:
        status = getattr(e, "status_code", None)
        call = dataclasses.replace(call, error=self._scrub(str(e), key))
        if _caused_by(e, json.JSONDecodeError):
            # litellm reports an unparsable body as a 500; it is a malformed reply, not an outage.
            return _Attempt(dataclasses.replace(call, outcome="bad_response"))
        if status == 429:
            headers = getattr(e, "litellm_response_headers", None) or {}
            try:
                retry_after = float(headers.get("retry-after", 0) or 0)
            except ValueError:  # an HTTP date instead of seconds: fall back to our backoff
                retry_after = 0.0
            return _Attempt(
                dataclasses.replace(call, outcome="rate_limited"), retryable=True, retry_after_s=retry_after
            )
        if isinstance(status, int):
            return _Attempt(dataclasses.replace(call, outcome="http_error"), retryable=status >= 500)
        return _Attempt(dataclasses.replace(call, outcome="connection_error"))

    def _cost(self, litellm: ModuleType, response: Any, prompt_tokens: int, completion_tokens: int) -> float:
        """Configured prices win (they describe the server actually used); else litellm's local map."""
        cfg = self.config
        if cfg.input_cost_per_mtok or cfg.output_cost_per_mtok:
            return (
                prompt_tokens * cfg.input_cost_per_mtok / 1e6
                + completion_tokens * cfg.output_cost_per_mtok / 1e6
            )
        try:
            return float(litellm.completion_cost(completion_response=response, model=self.model))
        except (litellm.exceptions.ModelNotMappedError, litellm.NotFoundError, ValueError, KeyError) as e:
            _log.debug("no cost for %s: %s", self.model, e)
            return 0.0

    @staticmethod
    def _scrub(text: str, key: str | None) -> str:
        """Error text without the key (some gateways echo it back), clipped to 2,000 characters."""
        if key and key != _PLACEHOLDER_KEY:
            text = text.replace(key, "***")
        return _clip(text, 2000)
