"""LLMMutator over real HTTP: litellm talks to the scripted server of ``tests/llm_server.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
import urllib.request
from typing import Any

import pytest

from evokernel.config.schema import LLMConfig
from evokernel.exceptions import ConfigError
from evokernel.mutators.base import MutationRequest, MutationResult
from evokernel.mutators.llm import LLMMutator, load_template
from evokernel.types import Candidate, Evaluation, Proposal, Scored, Status, Task, source_hash
from tests.support.llm_server import BadBody, Hang, HttpError, LLMServer, Reply

REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)  # REFERENCE_MARKER
"""

PARENT = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp(min=0)  # PARENT_MARKER
"""

CHILD = PARENT.replace("PARENT_MARKER", "CHILD_MARKER")
GOOD_REPLY = f"Clamping is one pass.\n```python\n{CHILD}```\n"
IN_PRICE, OUT_PRICE = 2.5, 10.0  # USD per million tokens


def _config(server: LLMServer, **overrides: Any) -> LLMConfig:
    base = LLMConfig(
        model="openai/test-model",
        api_base=server.url,
        # No passing test waits for this; it only bounds a stuck one (the hang test sets 1 s).
        timeout_s=5.0,
        max_retries=2,
        input_cost_per_mtok=IN_PRICE,
        output_cost_per_mtok=OUT_PRICE,
        temperature=0.3,
        max_tokens=1234,
    )
    return dataclasses.replace(base, **overrides)


def _mutator(config: LLMConfig) -> LLMMutator:
    # Small backoff so retry tests take milliseconds, not the production 0.5 s x 2^i.
    return LLMMutator(config, backoff_base_s=0.01, backoff_cap_s=2.0)


def _scored(cid: int, source: str, evaluation: Evaluation | None) -> Scored:
    cand = Candidate(cid, "run", "relu", 1, 0, 1, "seed", (), source)
    return Scored(cand, evaluation)


PARENT_EVAL = Evaluation(
    Status.CORRECT, runtime_ms=0.5, eager_ms=0.75, speedup_eager=1.5, feedback="FEEDBACK_MARKER: memory bound"
)


def _request(
    operator: str = "mutate", idea: str | None = "IDEA_MARKER: fuse the clamp", **kw: Any
) -> MutationRequest:
    task = Task(name="relu", path="relu.py", source=REFERENCE)
    parents = kw.pop("parents", (_scored(7, PARENT, PARENT_EVAL),))
    proposal = Proposal(
        task="relu", operator=operator, idea=idea, parents=tuple(p.candidate.id for p in parents)
    )
    return MutationRequest(proposal=proposal, task=task, parents=parents, **kw)


def _run(mutator: LLMMutator, request: MutationRequest) -> MutationResult:
    return asyncio.run(mutator.mutate(request))


def _user_prompt(server: LLMServer, i: int = 0) -> str:
    body = server.completions[i].body
    assert body is not None
    return str(body["messages"][-1]["content"])


def test_good_reply_becomes_source_with_tokens_and_cost(llm_server: LLMServer) -> None:
    llm_server.push(Reply(GOOD_REPLY, prompt_tokens=1234, completion_tokens=567))
    result = _run(_mutator(_config(llm_server)), _request(hardware="NVIDIA H100, sm_90"))
    assert result.ok and result.source == CHILD and result.error == ""
    (call,) = result.llm_calls
    assert (call.outcome, call.prompt_tokens, call.completion_tokens) == ("ok", 1234, 567)
    assert call.cost_usd == 1234 * IN_PRICE / 1e6 + 567 * OUT_PRICE / 1e6
    assert call.model == "openai/test-model" and call.latency_s > 0
    assert len(call.prompt_hash) == 16 and call.reply == GOOD_REPLY and "REFERENCE_MARKER" in call.prompt

    body = llm_server.completions[0].body
    assert body is not None
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("test-model", 0.3, 1234)
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "Triton" in system and "NVIDIA H100, sm_90" in system and "class ModelNew(nn.Module)" in system
    for marker in ("REFERENCE_MARKER", "PARENT_MARKER", "FEEDBACK_MARKER", "IDEA_MARKER", "1.5x vs eager"):
        assert marker in user, marker


def test_seed_prompt_has_reference_and_unknown_hardware(llm_server: LLMServer) -> None:
    llm_server.push(Reply(GOOD_REPLY))
    result = _run(_mutator(_config(llm_server)), _request("seed", idea=None, parents=()))
    assert result.ok
    body = llm_server.completions[0].body
    assert body is not None
    assert "Hardware the candidate is benchmarked on: unknown." in body["messages"][0]["content"]
    user = _user_prompt(llm_server)
    assert "REFERENCE_MARKER" in user and "PARENT_MARKER" not in user and "Idea to try" not in user


def test_fix_and_crossover_prompts_carry_every_parent(llm_server: LLMServer) -> None:
    failed = Evaluation(Status.RUNTIME_ERROR, reason="illegal memory access", feedback="Traceback: BOOM")
    other = _scored(8, PARENT.replace("PARENT_MARKER", "OTHER_MARKER"), None)
    llm_server.push(Reply(GOOD_REPLY), Reply(GOOD_REPLY))
    mutator = _mutator(_config(llm_server))
    # The request's language (set by the engine from the config) picks the guidance.
    assert _run(mutator, _request("fix", parents=(_scored(7, PARENT, failed),), language="cuda")).ok
    assert _run(mutator, _request("crossover", parents=(_scored(7, PARENT, PARENT_EVAL), other))).ok
    fix = _user_prompt(llm_server, 0)
    assert "runtime_error (illegal memory access)" in fix and "Traceback: BOOM" in fix
    crossover = _user_prompt(llm_server, 1)
    assert "PARENT_MARKER" in crossover and "OTHER_MARKER" in crossover and "Not evaluated yet" in crossover
    systems = [r.body["messages"][0]["content"] for r in llm_server.completions if r.body is not None]
    assert "load_inline" in systems[0] and "Target: Triton." in systems[1]


def test_mutate_prompt_shows_extra_parents_as_context(llm_server: LLMServer) -> None:
    """PIKE-O sends its top programs and inspirations as parents after the one to improve."""
    top = _scored(8, PARENT.replace("PARENT_MARKER", "TOP_MARKER"), PARENT_EVAL)
    inspiration = _scored(9, PARENT.replace("PARENT_MARKER", "INSPIRATION_MARKER"), None)
    llm_server.push(Reply(GOOD_REPLY), Reply(GOOD_REPLY))
    mutator = _mutator(_config(llm_server))
    assert _run(mutator, _request(parents=(_scored(7, PARENT, PARENT_EVAL), top, inspiration))).ok
    assert _run(mutator, _request()).ok
    user = _user_prompt(llm_server, 0)
    current = user.index("## Current implementation")
    context = user.index("## Other implementations, for reference")
    assert current < user.index("PARENT_MARKER") < context < user.index("TOP_MARKER")
    assert context < user.index("INSPIRATION_MARKER") and "Candidate 9" in user
    assert "Not evaluated yet" in user and user.count("1.5x vs eager") == 2  # parent's and top's
    assert "Other implementations" not in _user_prompt(llm_server, 1)  # one parent: no context section


def test_rate_limit_then_success_is_two_calls(llm_server: LLMServer) -> None:
    llm_server.push(HttpError(429, retry_after=1), Reply(GOOD_REPLY))
    start = time.monotonic()
    result = _run(_mutator(_config(llm_server)), _request())
    assert result.source == CHILD
    assert [c.outcome for c in result.llm_calls] == ["rate_limited", "ok"]
    assert len(llm_server.completions) == 2
    assert time.monotonic() - start >= 1.0  # Retry-After: 1 outweighs the 0.01 s backoff


def test_server_errors_exhaust_retries_without_raising(llm_server: LLMServer) -> None:
    llm_server.push(*[HttpError(500)] * 3, Reply(GOOD_REPLY))
    result = _run(_mutator(_config(llm_server, max_retries=2)), _request())
    assert result.source is None and "after 3 attempts" in result.error
    assert [c.outcome for c in result.llm_calls] == ["http_error"] * 3
    # Exactly our 3 requests: neither litellm nor the OpenAI client retried on its own.
    assert len(llm_server.completions) == 3 and llm_server.pending == 1


def test_hang_times_out_within_bound(llm_server: LLMServer) -> None:
    # The server holds each reply 30 times the client's timeout. Both attempts together end before
    # one hold would have: the client gave up on its own timeout (not earlier: >= 0.9 s each)
    # instead of waiting for the server, whatever the load on the machine.
    hold = 30.0
    llm_server.push(Hang(hold), Hang(hold))
    start = time.monotonic()
    result = _run(_mutator(_config(llm_server, timeout_s=1.0, max_retries=1)), _request())
    elapsed = time.monotonic() - start
    assert result.source is None
    assert [c.outcome for c in result.llm_calls] == ["timeout", "timeout"]
    assert all(c.latency_s > 0.9 for c in result.llm_calls)
    assert elapsed < hold


def test_prose_goes_back_to_the_model_with_the_reason(llm_server: LLMServer) -> None:
    prose = "You could fuse the clamp into the previous kernel to save a pass."
    llm_server.push(Reply(prose, prompt_tokens=100, completion_tokens=20), Reply(GOOD_REPLY))
    result = _run(_mutator(_config(llm_server)), _request())
    assert result.source == CHILD
    first, repair = result.llm_calls
    assert first.outcome == "no_code" and first.reply == prose and first.cost_usd > 0
    assert "ModelNew" in first.error and repair.outcome == "ok"
    # The repair continues the conversation: the model sees its own reply and why it was refused.
    body = llm_server.completions[1].body
    assert body is not None
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert body["messages"][2]["content"] == prose
    assert first.error in body["messages"][3]["content"]
    assert repair.prompt_hash != first.prompt_hash and "repair" in repair.prompt


def test_a_syntax_error_is_repaired_and_rounds_are_bounded(llm_server: LLMServer) -> None:
    broken = "```python\nclass ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n```"
    llm_server.push(Reply(broken), Reply(broken), Reply(GOOD_REPLY))
    result = _run(_mutator(_config(llm_server, repair_rounds=1)), _request())
    assert result.source is None and "syntax error in code block at line 2" in result.error
    assert [c.outcome for c in result.llm_calls] == ["no_code", "no_code"]
    assert llm_server.pending == 1  # two rounds: the reply and one repair, no more
    assert "line 2" in _user_prompt(llm_server, 1)


def test_a_duplicate_of_the_parent_is_sent_back(llm_server: LLMServer) -> None:
    llm_server.push(Reply(f"```python\n{PARENT}```"), Reply(GOOD_REPLY))
    result = _run(_mutator(_config(llm_server)), _request())
    assert result.source == CHILD
    assert [c.outcome for c in result.llm_calls] == ["duplicate", "ok"]
    assert "unchanged" in _user_prompt(llm_server, 1)


def test_a_duplicate_of_an_evaluated_candidate_names_it(llm_server: LLMServer) -> None:
    other = PARENT.replace("PARENT_MARKER", "OTHER_MARKER")
    twin = _scored(11, CHILD, Evaluation(Status.INCORRECT, reason="max abs error 3"))
    llm_server.push(Reply(GOOD_REPLY), Reply(f"```python\n{other}```"))
    request = _request(avoid=frozenset({source_hash(CHILD)}), history=(twin,))
    result = _run(_mutator(_config(llm_server)), request)
    assert result.source is not None and "OTHER_MARKER" in result.source
    assert "candidate #11: incorrect: max abs error 3" in _user_prompt(llm_server, 1)


def test_empty_and_truncated_replies(llm_server: LLMServer) -> None:
    cut = "```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return (x"
    llm_server.push(Reply(""), Reply(cut, finish_reason="length"))
    mutator = _mutator(_config(llm_server, repair_rounds=0))
    empty = _run(mutator, _request())
    assert empty.source is None and [c.outcome for c in empty.llm_calls] == ["empty"]
    truncated = _run(mutator, _request())
    assert truncated.source is None and "max_tokens=1234" in truncated.error
    assert [c.outcome for c in truncated.llm_calls] == ["truncated"]


def test_reasoning_content_is_kept_with_the_reply(llm_server: LLMServer) -> None:
    llm_server.push(Reply(GOOD_REPLY, reasoning="REASONING_MARKER: the clamp is memory bound"))
    result = _run(_mutator(_config(llm_server)), _request())
    assert result.source == CHILD
    (call,) = result.llm_calls
    assert call.reply.startswith("<think>") and "REASONING_MARKER" in call.reply and GOOD_REPLY in call.reply


def test_a_model_without_a_price_is_an_error_at_start(llm_server: LLMServer) -> None:
    unpriced = _config(llm_server, input_cost_per_mtok=None, output_cost_per_mtok=None)
    with pytest.raises(ConfigError, match=r"no price for openai/test-model.*allow_unpriced"):
        LLMMutator(unpriced)
    LLMMutator(dataclasses.replace(unpriced, allow_unpriced=True))
    LLMMutator(dataclasses.replace(unpriced, input_cost_per_mtok=0.0))  # a free local server


def test_invalid_json_body_is_not_retried(llm_server: LLMServer) -> None:
    llm_server.push(BadBody(), Reply(GOOD_REPLY))
    result = _run(_mutator(_config(llm_server)), _request())
    assert result.source is None and [c.outcome for c in result.llm_calls] == ["bad_response"]
    assert llm_server.pending == 1


def test_search_replace_reply_applies_to_parent(llm_server: LLMServer) -> None:
    edit = (
        "Use relu directly:\n<<<<<<< SEARCH\n        return x.clamp(min=0)  # PARENT_MARKER\n=======\n"
        "        return torch.relu(x)  # EDITED\n>>>>>>> REPLACE\n"
    )
    llm_server.push(Reply(edit))
    result = _run(_mutator(_config(llm_server)), _request())
    assert result.source == PARENT.replace("x.clamp(min=0)  # PARENT_MARKER", "torch.relu(x)  # EDITED")


def test_api_key_is_sent_but_never_recorded(llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-evk-test-5f2c9a1d7e"
    monkeypatch.setenv("EVK_TEST_LLM_KEY", secret)
    # The 401 body echoes the key, as some gateways do: the recorded error must not repeat it.
    llm_server.push(HttpError(401, message=f"invalid key {secret}"), Reply(GOOD_REPLY))
    mutator = _mutator(_config(llm_server, api_key_env="EVK_TEST_LLM_KEY"))
    failed = _run(mutator, _request())
    ok = _run(mutator, _request())
    assert ok.ok and failed.source is None and [c.outcome for c in failed.llm_calls] == ["http_error"]
    assert all(r.headers.get("authorization") == f"Bearer {secret}" for r in llm_server.completions)
    records = [json.dumps(dataclasses.asdict(c)) for r in (failed, ok) for c in r.llm_calls]
    texts = [*records, failed.error, ok.error, mutator.describe(), repr(mutator)]
    assert all(secret not in t for t in texts)
    assert "***" in failed.llm_calls[0].error


def test_missing_key_env_and_model_are_config_errors(llm_server: LLMServer) -> None:
    with pytest.raises(ConfigError, match="EVK_SURELY_UNSET_KEY"):
        LLMMutator(_config(llm_server, api_key_env="EVK_SURELY_UNSET_KEY"))
    with pytest.raises(ConfigError, match=r"llm\.model"):
        LLMMutator(_config(llm_server, model=None))
    with pytest.raises(ConfigError, match="language"):
        LLMMutator(_config(llm_server, language="fortran"))


def test_unserved_operator_and_missing_parent_make_no_call(llm_server: LLMServer) -> None:
    mutator = _mutator(_config(llm_server))
    tune = _run(mutator, _request("tune"))
    orphan = _run(mutator, _request("mutate", parents=()))
    assert "tune" in tune.error and "parent" in orphan.error
    assert tune.llm_calls == orphan.llm_calls == () and llm_server.completions == []


def test_known_model_is_priced_from_litellms_local_map(llm_server: LLMServer) -> None:
    llm_server.push(Reply(GOOD_REPLY, prompt_tokens=1000, completion_tokens=100))
    config = _config(llm_server, model="openai/gpt-4o", input_cost_per_mtok=None, output_cost_per_mtok=None)
    result = _run(_mutator(config), _request())
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    price = litellm.model_cost["gpt-4o"]
    expected = 1000 * price["input_cost_per_token"] + 100 * price["output_cost_per_token"]
    assert result.llm_calls[0].cost_usd == pytest.approx(expected)


def test_describe(llm_server: LLMServer) -> None:
    mutator = LLMMutator(_config(llm_server))
    assert mutator.describe() == f"openai/test-model via {llm_server.url}"
    assert LLMMutator(LLMConfig(model="openai/gpt-4o")).describe() == "openai/gpt-4o"


def test_templates_are_package_resources() -> None:
    for name in ("system", "seed", "mutate", "fix", "crossover", "language_triton"):
        assert load_template(name).template.strip()


def test_import_does_not_import_litellm() -> None:
    code = "import sys, evokernel.mutators.llm; print([m for m in ('litellm', 'openai') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


# litellm's streaming types trigger a pydantic UserWarning on first use; it is theirs, not ours.
@pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")
def test_server_streams_sse_and_lists_models(llm_server: LLMServer) -> None:
    """The server itself: litellm reassembles its SSE stream; GET /v1/models answers."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    async def stream() -> str:
        response = await litellm.acompletion(
            model="openai/test-model",
            messages=[{"role": "user", "content": "hi"}],
            api_base=llm_server.url,
            api_key="EMPTY",
            stream=True,
            max_retries=0,
        )
        return "".join([chunk.choices[0].delta.content or "" async for chunk in response if chunk.choices])

    llm_server.push(Reply("streamed reply text"))
    assert asyncio.run(stream()) == "streamed reply text"
    body = llm_server.completions[0].body
    assert body is not None and body["stream"] is True
    with urllib.request.urlopen(f"{llm_server.url}/models", timeout=5) as resp:
        assert json.load(resp)["data"][0]["id"] == "test-model"
