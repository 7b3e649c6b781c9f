"""The run's LLM-call budget bounds what LLM jobs can spend, retries included, through the real
engine, the real LLM mutator and the scripted HTTP server."""

from __future__ import annotations

from pathlib import Path

from evokernel.config.schema import LLMConfig
from evokernel.conformance import instant_config, instant_task, run_instant
from evokernel.db import SolutionLibrary
from evokernel.mutators.llm import LLMMutator
from tests.support.llm_server import HttpError, LLMServer


def test_call_budget_reserves_the_mutators_own_retries(tmp_path: Path, llm_server: LLMServer) -> None:
    """The experiment config says 0 retries, the mutator passed in retries twice: every job may
    make 3 calls, and the budget must reserve 3 -- reserving 1 let 4 jobs start and make 12."""
    llm_server.push(*[HttpError(500)] * 20)
    task = instant_task("relu")
    config = instant_config("greedy", {"batch": 4}, tmp_path / "lib.db", [task], evaluations=50, llm_calls=7)
    config.mutators.llm.max_retries = 0
    mutator = LLMMutator(
        LLMConfig(
            model="openai/test-model",
            api_base=llm_server.url,
            max_retries=2,
            timeout_s=5.0,
            repair_rounds=0,
            allow_unpriced=True,
        ),
        backoff_base_s=0.01,
    )
    run = run_instant(config, [task], mutator=mutator)
    lib = SolutionLibrary(tmp_path / "lib.db")
    calls = lib.llm_calls(run)
    # Two jobs fit 7 calls at 3 each; each job failed after exactly 3 attempts (500, 500, 500).
    assert len(calls) == len(llm_server.completions) == 6
    assert {c.outcome for c in calls} == {"http_error"}
    stopped = next(e[2]["stopped"] for e in lib.events(run) if e[0] == "finished")
    assert "LLM call budget of 7 reached" in stopped["relu"]
