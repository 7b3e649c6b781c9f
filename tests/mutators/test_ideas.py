"""PIKE-B's brainstorm: parsing idea lists in the shapes models really write, and the ideas call."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from evokernel.config.schema import LLMConfig
from evokernel.exceptions import MutationError
from evokernel.mutators.base import MutationRequest
from evokernel.mutators.ideas import MAX_IDEA_CHARS, parse_ideas
from evokernel.mutators.llm import LLMMutator
from evokernel.types import Candidate, Evaluation, Proposal, Scored, Status, Task
from tests.support.llm_server import HttpError, LLMServer, Reply

REFERENCE = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.softmax(-1)\n"
)
SEED = "class ModelNew: ...  # SEED_MARKER\n"


def test_json_array_in_a_fence_after_prose() -> None:
    reply = 'Ideas:\n```json\n["Fuse the passes", "Use an online softmax", "Vectorise loads"]\n```'
    assert parse_ideas(reply, 5) == ("Fuse the passes", "Use an online softmax", "Vectorise loads")


def test_json_objects_and_wrapping_object() -> None:
    reply = (
        '{"ideas": [{"title": "Online softmax", "description": "one pass with running max"},'
        ' {"title": "Whole-row block", "rationale": "rows fit in registers"}]}'
    )
    assert parse_ideas(reply) == (
        "Online softmax: one pass with running max",
        "Whole-row block: rows fit in registers",
    )


def test_numbered_list_with_wrapped_lines_sub_bullets_and_outro() -> None:
    reply = """<think>maybe 1. use cuBLAS</think>Some options:

1. **Online softmax**: compute max and sum in one pass,
   halving reads.
2) Whole-row tile:
   - BLOCK_SIZE = next power of two of the row
   - one program per row
### 3. Autotune `num_warps`

These should all help.
"""
    assert parse_ideas(reply) == (
        "Online softmax: compute max and sum in one pass, halving reads.",
        "Whole-row tile: BLOCK_SIZE = next power of two of the row one program per row",
        "Autotune num_warps",
    )


def test_bullets_duplicates_and_count() -> None:
    reply = "- Fuse the three passes.\n- fuse the three passes\n* Use fp16 loads\n• Persistent kernel\n"
    assert parse_ideas(reply) == ("Fuse the three passes.", "Use fp16 loads", "Persistent kernel")
    assert parse_ideas(reply, 2) == ("Fuse the three passes.", "Use fp16 loads")


def test_long_idea_is_capped_and_prose_or_empty_is_an_error() -> None:
    (idea,) = parse_ideas("1. " + "tile " * 1000)
    assert len(idea) == MAX_IDEA_CHARS and idea.endswith("...")
    with pytest.raises(MutationError, match="no list of ideas"):
        parse_ideas("I would fuse the passes and use an online softmax.")
    with pytest.raises(MutationError, match="empty"):
        parse_ideas("<think>still thinking")


def _request(parents: tuple[Scored, ...] = ()) -> MutationRequest:
    task = Task(name="softmax", path="softmax.py", source=REFERENCE, seed_source=SEED)
    proposal = Proposal(task="softmax", operator="ideas", parents=tuple(p.candidate.id for p in parents))
    return MutationRequest(proposal=proposal, task=task, parents=parents, hardware="NVIDIA H100, sm_90")


def _mutator(server: LLMServer, **overrides: Any) -> LLMMutator:
    config = LLMConfig(
        model="openai/test-model",
        api_base=server.url,
        timeout_s=5.0,
        max_retries=1,
        input_cost_per_mtok=1.0,
        output_cost_per_mtok=4.0,
    )
    return LLMMutator(dataclasses.replace(config, **overrides), backoff_base_s=0.01)


def test_ideas_call_records_tokens_and_shows_the_seed(llm_server: LLMServer) -> None:
    reply = '```json\n["Online softmax", "Whole-row block", "Online softmax", "num_warps=8"]\n```'
    llm_server.push(Reply(reply, prompt_tokens=300, completion_tokens=50))
    result = asyncio.run(_mutator(llm_server).ideas(_request(), 3))
    assert result.ideas == ("Online softmax", "Whole-row block", "num_warps=8") and result.error == ""
    (call,) = result.llm_calls
    assert call.outcome == "ok" and call.cost_usd == pytest.approx(300e-6 + 200e-6)
    assert result.raw_reply == reply
    body = llm_server.completions[0].body
    assert body is not None
    user = body["messages"][1]["content"]
    assert "3 distinct ways" in user and "SEED_MARKER" in user and "JSON array of exactly 3" in user
    assert "NVIDIA H100, sm_90" in body["messages"][0]["content"]


def test_ideas_show_parents_when_given(llm_server: LLMServer) -> None:
    best = Scored(
        Candidate(4, "run", "softmax", 1, 0, 1, "mutate", (), "class ModelNew: ...  # BEST_MARKER\n"),
        Evaluation(Status.CORRECT, runtime_ms=1.0, speedup_eager=2.0),
    )
    llm_server.push(Reply("1. Persistent kernel\n2. Vectorised loads\n"))
    result = asyncio.run(_mutator(llm_server).ideas(_request((best,)), 2))
    assert result.ideas == ("Persistent kernel", "Vectorised loads")
    body = llm_server.completions[0].body
    assert body is not None
    user = body["messages"][1]["content"]
    assert "BEST_MARKER" in user and "2x vs eager" in user and "SEED_MARKER" not in user


def test_ideas_prose_is_recorded_failure_and_errors_retry(llm_server: LLMServer) -> None:
    llm_server.push(Reply("Just make it faster."), HttpError(503), Reply("- one idea"))
    mutator = _mutator(llm_server)
    prose = asyncio.run(mutator.ideas(_request(), 4))
    assert prose.ideas == () and "no list of ideas" in prose.error
    assert prose.raw_reply == "Just make it faster."
    assert [c.outcome for c in prose.llm_calls] == ["no_ideas"]
    retried = asyncio.run(mutator.ideas(_request(), 4))
    assert retried.ideas == ("one idea",) and [c.outcome for c in retried.llm_calls] == ["http_error", "ok"]
    bad = asyncio.run(mutator.ideas(_request(), 0))
    assert bad.ideas == () and "count >= 1" in bad.error and bad.llm_calls == ()
