"""One model endpoint: single HTTP attempts through litellm, each measured into an LLMCall.

litellm is imported on the first call, not with this module: it takes ~8 s to import and is absent
on GPU evaluation nodes, which import ``evokernel`` but never run an LLM operator. An attempt never
raises for what a server or network does; it returns an :class:`Attempt` whose ``call`` says what
happened (outcome, tokens, cost, latency) and whether retrying can help. Retrying is the caller's
job, so every retry is recorded. The API key is read from the environment per call and scrubbed
from every error text.
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
from types import ModuleType
from typing import Any

from evokernel.config.schema import ModelConfig
from evokernel.mutators.prompting import clip
from evokernel.types import LLMCall

# Prompts and replies are kept for inspection; 64 KiB holds a long kernel file plus reference.
MAX_RECORD_CHARS = 64 * 1024
# vLLM and SGLang accept any key unless started with --api-key; the OpenAI client insists on one.
PLACEHOLDER_KEY = "EMPTY"
_log = logging.getLogger(__name__)


@functools.cache
def import_litellm() -> ModuleType:
    """litellm, configured to stay offline and quiet (imported once, on first use)."""
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
class Attempt:
    call: LLMCall
    reply: str | None = None  # None: no usable HTTP response
    finish_reason: str = ""
    retryable: bool = False
    retry_after_s: float = 0.0


@dataclass(frozen=True)
class Sampling:
    """Request settings shared by every model of one mutator."""

    temperature: float
    max_tokens: int
    timeout_s: float
    stream: bool = False


class ModelClient:
    """Sends chat requests to one model (``ModelConfig`` with defaults already resolved)."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.model = config.model
        self._limit: asyncio.Semaphore | None = None
        self._limit_loop: asyncio.AbstractEventLoop | None = None

    def describe(self) -> str:
        """``openai/gpt-4o via http://127.0.0.1:8000/v1`` (never the key)."""
        return f"{self.model} via {self.config.api_base}" if self.config.api_base else self.model

    def api_key(self) -> str | None:
        if self.config.api_key_env:
            return os.environ.get(self.config.api_key_env)
        return PLACEHOLDER_KEY if self.config.api_base else None

    def _semaphore(self) -> asyncio.Semaphore | None:
        """The per-model limit, made per event loop: a semaphore is bound to the loop it waited on."""
        if self.config.max_concurrent <= 0:
            return None
        loop = asyncio.get_running_loop()
        if self._limit is None or self._limit_loop is not loop:
            self._limit, self._limit_loop = asyncio.Semaphore(self.config.max_concurrent), loop
        return self._limit

    async def attempt(self, messages: list[dict[str, str]], blank: LLMCall, sampling: Sampling) -> Attempt:
        """One HTTP request; every error litellm maps becomes an outcome, nothing is raised."""
        limit = self._semaphore()
        if limit is None:
            return await self._attempt(messages, blank, sampling)
        async with limit:
            return await self._attempt(messages, blank, sampling)

    async def _attempt(self, messages: list[dict[str, str]], blank: LLMCall, sampling: Sampling) -> Attempt:
        litellm = import_litellm()
        import openai  # a litellm dependency; all of litellm's mapped errors derive from its errors

        key = self.api_key()
        start = time.monotonic()
        try:
            # wait_for backs up the client's own timeout, which is per socket read: a server that
            # trickles bytes (or stream chunks) could otherwise hold the call far past timeout_s.
            response = await asyncio.wait_for(
                self._request(litellm, messages, key, sampling), timeout=sampling.timeout_s + 1.0
            )
        except (TimeoutError, litellm.Timeout) as e:
            error = self._scrub(str(e) or f"no response within timeout_s={sampling.timeout_s}", key)
            call = dataclasses.replace(
                blank, model=self.model, outcome="timeout", error=error, latency_s=time.monotonic() - start
            )
            return Attempt(call, retryable=True)
        except openai.OpenAIError as e:
            failed = dataclasses.replace(blank, model=self.model, latency_s=time.monotonic() - start)
            return self._failed(litellm, failed, e, key)
        latency = time.monotonic() - start
        choice = response.choices[0] if response.choices else None
        reply = (choice.message.content if choice is not None else None) or ""
        # Reasoning models' thoughts, which litellm moves out of the content (DeepSeek-R1, Qwen3,
        # o-series summaries): kept with the reply in the <think> form the parser skips.
        thoughts = getattr(choice.message, "reasoning_content", None) if choice is not None else None
        recorded = (
            f"<think>\n{thoughts.strip()}\n</think>\n{reply}"
            if isinstance(thoughts, str) and thoughts.strip()
            else reply
        )
        usage = getattr(response, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        call = dataclasses.replace(
            blank,
            model=self.model,
            prompt_tokens=pt,
            completion_tokens=ct,
            cost_usd=self._cost(litellm, response, pt, ct),
            latency_s=latency,
            reply=clip(recorded, MAX_RECORD_CHARS),
        )
        if not reply.strip():
            call = dataclasses.replace(call, outcome="empty", error="reply has no content")
        return Attempt(call, reply, str(getattr(choice, "finish_reason", "") or ""))

    async def _request(
        self, litellm: ModuleType, messages: list[dict[str, str]], key: str | None, sampling: Sampling
    ) -> Any:
        """A complete ModelResponse; a streamed reply is reassembled (usage from its last chunk)."""
        response = await litellm.acompletion(
            model=self.model,
            messages=messages,
            api_base=self.config.api_base,
            api_key=key,
            temperature=sampling.temperature,
            max_tokens=sampling.max_tokens,
            timeout=sampling.timeout_s,
            stream=sampling.stream,
            **({"stream_options": {"include_usage": True}} if sampling.stream else {}),
            # Retries are ours, so each one is recorded; litellm and the OpenAI client would
            # otherwise retry 429/5xx silently (2 times by default).
            max_retries=0,
            num_retries=0,
        )
        if not sampling.stream:
            return response
        chunks = [chunk async for chunk in response]
        built = litellm.stream_chunk_builder(chunks, messages=messages)
        if built is None:  # a stream with no chunks at all
            return litellm.ModelResponse(choices=[])
        return built

    def _failed(self, litellm: ModuleType, call: LLMCall, e: Exception, key: str | None) -> Attempt:
        status = getattr(e, "status_code", None)
        call = dataclasses.replace(call, error=self._scrub(str(e), key))
        mid_stream: Any = getattr(litellm.exceptions, "MidStreamFallbackError", ())  # litellm >= 1.74
        if isinstance(e, mid_stream):
            # The connection broke after the reply began: a network fault, worth another try.
            return Attempt(dataclasses.replace(call, outcome="stream_cut"), retryable=True)
        if _caused_by(e, json.JSONDecodeError):
            # litellm reports an unparsable body as a 500; it is a malformed reply, not an outage.
            return Attempt(dataclasses.replace(call, outcome="bad_response"))
        if status == 429:
            headers = getattr(e, "litellm_response_headers", None) or {}
            try:
                retry_after = float(headers.get("retry-after", 0) or 0)
            except ValueError:  # an HTTP date instead of seconds: fall back to our backoff
                retry_after = 0.0
            return Attempt(
                dataclasses.replace(call, outcome="rate_limited"), retryable=True, retry_after_s=retry_after
            )
        if isinstance(status, int):
            return Attempt(dataclasses.replace(call, outcome="http_error"), retryable=status >= 500)
        return Attempt(dataclasses.replace(call, outcome="connection_error"))

    def _cost(self, litellm: ModuleType, response: Any, prompt_tokens: int, completion_tokens: int) -> float:
        """Configured prices win (they describe the server actually used); else litellm's local map."""
        cfg = self.config
        if cfg.input_cost_per_mtok is not None or cfg.output_cost_per_mtok is not None:
            return (
                prompt_tokens * (cfg.input_cost_per_mtok or 0.0) / 1e6
                + completion_tokens * (cfg.output_cost_per_mtok or 0.0) / 1e6
            )
        try:
            return float(litellm.completion_cost(completion_response=response, model=self.model))
        except (litellm.exceptions.ModelNotMappedError, litellm.NotFoundError, ValueError, KeyError) as e:
            _log.debug("no cost for %s: %s", self.model, e)
            return 0.0

    def priced(self) -> bool:
        """Whether this model's calls have a price: configured, or in litellm's local cost map."""
        cfg = self.config
        if cfg.input_cost_per_mtok is not None or cfg.output_cost_per_mtok is not None:
            return True
        litellm = import_litellm()
        try:
            info = litellm.get_model_info(model=self.model)
        except (litellm.exceptions.ModelNotMappedError, litellm.NotFoundError, ValueError, KeyError):
            return False
        return bool(info.get("input_cost_per_token") or info.get("output_cost_per_token"))

    @staticmethod
    def _scrub(text: str, key: str | None) -> str:
        """Error text without the key (some gateways echo it back), clipped to 2,000 characters."""
        if key and key != PLACEHOLDER_KEY:
            text = text.replace(key, "***")
        return clip(text, 2000)
