"""Behaviour of ``SolutionLibrary`` through its public API, on a SQLite file and on PostgreSQL:
LLM calls and usage, baselines, events.

Every test gets an empty library (``library_url``: a fresh SQLite file or a fresh PostgreSQL
database), so no test sees another's rows.
"""

from __future__ import annotations

import pytest

from evokernel.db import SolutionLibrary
from evokernel.types import LLMCall, Proposal


# ---- llm calls, baselines, events --------------------------------------------------------------------
def test_llm_calls_and_usage(lib: SolutionLibrary, run_id: str) -> None:
    other = lib.create_run("other", {})
    empty = {"calls": 0, "failed": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    assert lib.llm_usage(run_id) == empty

    proposal = lib.add_proposal(run_id, Proposal(task="relu", operator="mutate"))
    calls = [
        LLMCall(model="gpt-x", prompt_tokens=1000, completion_tokens=200, cost_usd=0.0125, latency_s=3.5,
                prompt_hash="abc", prompt="write a kernel", reply="```python\n...```"),
        LLMCall(model="gpt-x", prompt_tokens=1500, completion_tokens=0, cost_usd=0.0, outcome="rate_limited",
                error="429 Too Many Requests"),
        LLMCall(model="claude-y", prompt_tokens=500, completion_tokens=300, cost_usd=0.25),
    ]  # fmt: skip
    lib.record_llm_call(run_id, proposal.id, calls[0])
    lib.record_llm_call(run_id, proposal.id, calls[1])
    lib.record_llm_call(run_id, None, calls[2])  # e.g. an idea-generation call tied to no proposal
    lib.record_llm_call(other, None, LLMCall(model="gpt-x", prompt_tokens=7, cost_usd=9.0))

    assert lib.llm_calls(run_id) == calls
    usage = lib.llm_usage(run_id)
    assert usage["calls"] == 3
    assert usage["failed"] == 1  # the rate-limited attempt
    assert usage["prompt_tokens"] == 3000
    assert usage["completion_tokens"] == 500
    assert usage["cost_usd"] == pytest.approx(0.2625)
    assert lib.llm_usage(other)["cost_usd"] == pytest.approx(9.0)


def test_baselines_get_put_upsert(lib: SolutionLibrary) -> None:
    key = ("hash1", "NVIDIA H100", "torch 2.5.1 / triton 3.1.0 / cuda 12.4")
    assert lib.get_baseline(*key, "eager") is None

    lib.put_baseline(*key, "eager", 2.0, iqr_ms=0.1)
    lib.put_baseline(*key, "compile", 1.5)
    lib.put_baseline(*key, "eager", 3.0, variant="batch=8")
    assert lib.get_baseline(*key, "eager") == 2.0
    assert lib.get_baseline(*key, "compile") == 1.5
    assert lib.get_baseline(*key, "eager", variant="batch=8") == 3.0
    # Another device or software stack is a different baseline.
    assert lib.get_baseline("hash1", "NVIDIA H200", key[2], "eager") is None
    assert lib.get_baseline("hash1", key[1], "torch 2.6.0 / triton 3.2.0 / cuda 12.6", "eager") is None

    lib.put_baseline(*key, "eager", 1.8, iqr_ms=0.05)  # re-measured: replaced, not duplicated
    assert lib.get_baseline(*key, "eager") == 1.8


def test_events(lib: SolutionLibrary, run_id: str) -> None:
    other = lib.create_run("other", {})
    assert lib.events(run_id) == []
    lib.log_event(run_id, "start", "run started", {"resume": False})
    lib.log_event(other, "start")
    lib.log_event(run_id, "migration", "island 0 -> 1", {"from": 0, "to": 1, "candidates": [3, 5]})
    lib.log_event(run_id, "finish")
    assert lib.events(run_id) == [
        ("start", "run started", {"resume": False}),
        ("migration", "island 0 -> 1", {"from": 0, "to": 1, "candidates": [3, 5]}),
        ("finish", "", {}),
    ]
    assert lib.events(other) == [("start", "", {})]
