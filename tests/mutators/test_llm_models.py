"""LLMMutator with several models, streaming replies and per-model concurrency, over real HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from typing import Any

import pytest

from evokernel.config.schema import LLMConfig, ModelConfig
from evokernel.exceptions import ConfigError
from evokernel.mutators.base import MutationRequest, MutationResult
from evokernel.mutators.llm import LLMMutator, resolve_models
from evokernel.mutators.selection import ModelSelector, proposal_gain
from evokernel.types import Candidate, Evaluation, Proposal, Scored, Status, Task
from tests.support.llm_server import CutStream, Hang, LLMServer, Reply

PARENT = (
    "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
)
GOOD = f"```python\n{PARENT.replace('return x', 'return x * 1')}```"
PARENT_EVAL = Evaluation(Status.CORRECT, runtime_ms=2.0)


def _request(seed: int = 0) -> MutationRequest:
    task = Task(name="ident", path="ident.py", source="class Model: ...\n")
    parent = Scored(Candidate(1, "run", "ident", 1, 0, 0, "seed", (), PARENT), PARENT_EVAL)
    proposal = Proposal(task="ident", operator="mutate", parents=(1,))
    return MutationRequest(proposal=proposal, task=task, parents=(parent,), rng_seed=seed)


def _ensemble(server: LLMServer, selection: str, *models: ModelConfig, **kw: Any) -> LLMMutator:
    kw.setdefault("allow_unpriced", True)  # these tests price what they count
    config = LLMConfig(
        api_base=server.url, timeout_s=5.0, max_retries=0, selection=selection, models=list(models), **kw
    )
    return LLMMutator(config, backoff_base_s=0.01)


def _sent_models(server: LLMServer) -> list[str]:
    return [str(r.body["model"]) for r in server.completions if r.body is not None]


def test_weighted_ensemble_uses_each_model_by_weight_and_prices_each(llm_server: LLMServer) -> None:
    mutator = _ensemble(
        llm_server,
        "weighted",
        ModelConfig("openai/alpha", weight=3.0, input_cost_per_mtok=1.0),
        ModelConfig("openai/beta", weight=1.0, input_cost_per_mtok=100.0),
        ModelConfig("openai/never", weight=0.0),
    )
    n = 40
    llm_server.push(*[Reply(GOOD, prompt_tokens=1000, completion_tokens=0)] * n)
    results = [asyncio.run(mutator.mutate(_request(seed))) for seed in range(n)]
    assert all(r.ok for r in results)
    used = [r.llm_calls[0].model for r in results]
    # Each record names the model that was actually asked, and its price is that model's.
    assert [f"openai/{m}" for m in _sent_models(llm_server)] == used
    for r in results:
        call = r.llm_calls[0]
        assert call.cost_usd == pytest.approx(1000 * (1.0 if call.model == "openai/alpha" else 100.0) / 1e6)
    counts = Counter(used)
    assert (
        counts["openai/never"] == 0
        and counts["openai/beta"] >= 3
        and counts["openai/alpha"] > counts["openai/beta"]
    )
    # The same rng_seed (a resumed proposal) draws the same model.
    llm_server.push(Reply(GOOD))
    assert asyncio.run(mutator.mutate(_request(5))).llm_calls[0].model == used[5]


def _drive_bandit(server: LLMServer, mutator: LLMMutator, gains: dict[str, float], n: int) -> list[str]:
    """n proposals in a row, each observed with a candidate whose speed depends on its model."""
    used = []
    for seed in range(n):
        server.push(Reply(GOOD, prompt_tokens=1000, completion_tokens=100))
        request = _request(seed)
        result: MutationResult = asyncio.run(mutator.mutate(request))
        model = result.llm_calls[-1].model
        used.append(model)
        speedup = gains[model]
        evaluation = (
            Evaluation(Status.CORRECT, runtime_ms=2.0 / speedup) if speedup else Evaluation(Status.INCORRECT)
        )
        mutator.observe(request, result, evaluation)
    return used


def test_bandit_prefers_the_cheaper_of_two_equally_good_models(llm_server: LLMServer) -> None:
    mutator = _ensemble(
        llm_server,
        "bandit",
        ModelConfig("openai/cheap", input_cost_per_mtok=1.0, output_cost_per_mtok=2.0),
        ModelConfig("openai/dear", input_cost_per_mtok=4.0, output_cost_per_mtok=8.0),
    )
    used = _drive_bandit(llm_server, mutator, {"openai/cheap": 1.2, "openai/dear": 1.2}, 16)
    assert set(used[:2]) == {"openai/cheap", "openai/dear"}  # each tried once first
    assert used[-8:].count("openai/cheap") >= 7
    stats = mutator.selector.summary()
    assert stats["openai/dear"]["mean_cost"] == pytest.approx(4.0 * 1000 / 1e6 + 8.0 * 100 / 1e6)


def test_bandit_leaves_a_cheap_model_that_never_writes_correct_code(llm_server: LLMServer) -> None:
    mutator = _ensemble(
        llm_server,
        "bandit",
        ModelConfig("openai/cheap", input_cost_per_mtok=1.0),
        ModelConfig("openai/dear", input_cost_per_mtok=3.0),
    )
    used = _drive_bandit(llm_server, mutator, {"openai/cheap": 0.0, "openai/dear": 1.3}, 16)
    assert used[-8:].count("openai/dear") >= 7


def test_bandit_without_observations_goes_round_robin() -> None:
    selector = ModelSelector(["a", "b", "c"], [1.0, 1.0, 1.0], "bandit")
    assert [selector.choose(seed) for seed in range(6)] == ["a", "b", "c", "a", "b", "c"]
    assert selector.choose(0, count=False) == "a" and selector.stats["a"].pulls == 2


def test_gain_is_log_speedup_over_fastest_correct_parent() -> None:
    fast = Scored(Candidate(1, "r", "t", 1, 0, 0, "seed", (), ""), Evaluation(Status.CORRECT, runtime_ms=1.0))
    slow = Scored(Candidate(2, "r", "t", 2, 0, 0, "seed", (), ""), Evaluation(Status.CORRECT, runtime_ms=4.0))
    assert proposal_gain((slow, fast), Evaluation(Status.CORRECT, runtime_ms=0.5)) == pytest.approx(
        0.05 + 0.6931, abs=1e-4
    )
    assert proposal_gain((fast,), Evaluation(Status.CORRECT, runtime_ms=2.0)) == pytest.approx(0.05)
    assert proposal_gain((), Evaluation(Status.CORRECT, runtime_ms=1.0, eager_ms=2.0)) == pytest.approx(
        0.05 + 0.6931, abs=1e-4
    )
    assert proposal_gain((fast,), Evaluation(Status.INCORRECT)) == proposal_gain((fast,), None) == 0.0


def test_model_config_errors_are_clear(llm_server: LLMServer) -> None:
    with pytest.raises(ConfigError, match=r"either llm\.model"):
        resolve_models(LLMConfig(model="openai/a", models=[ModelConfig("openai/b")]))
    with pytest.raises(ConfigError, match=r"models\[1\]\.model is empty"):
        resolve_models(LLMConfig(models=[ModelConfig("openai/a"), ModelConfig()]))
    with pytest.raises(ConfigError, match="twice"):
        _ensemble(llm_server, "weighted", ModelConfig("openai/a"), ModelConfig("openai/a"))
    with pytest.raises(ConfigError, match="selection"):
        _ensemble(llm_server, "greedy", ModelConfig("openai/a"))
    with pytest.raises(ConfigError, match="weights"):
        _ensemble(llm_server, "weighted", ModelConfig("openai/a", weight=0.0))
    # Entries inherit the section's endpoint; their own wins.
    resolved = resolve_models(
        LLMConfig(
            api_base="http://x/v1",
            models=[ModelConfig("openai/a"), ModelConfig("openai/b", api_base="http://y")],
        )
    )
    assert [m.api_base for m in resolved] == ["http://x/v1", "http://y"]


# litellm's streaming types trigger a pydantic UserWarning on first use; it is theirs, not ours.
@pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")
def test_streamed_replies_are_reassembled_with_usage_and_truncation(llm_server: LLMServer) -> None:
    cut = "```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return (x"
    llm_server.push(Reply(GOOD, prompt_tokens=700, completion_tokens=90), Reply(cut, finish_reason="length"))
    config = LLMConfig(
        model="openai/test-model",
        api_base=llm_server.url,
        timeout_s=5.0,
        max_retries=0,
        stream=True,
        input_cost_per_mtok=1.0,
        output_cost_per_mtok=10.0,
        repair_rounds=0,
    )
    mutator = LLMMutator(config)
    ok = asyncio.run(mutator.mutate(_request()))
    assert ok.source is not None and "return x * 1" in ok.source
    (call,) = ok.llm_calls
    assert (call.prompt_tokens, call.completion_tokens, call.outcome) == (700, 90, "ok")
    assert call.cost_usd == pytest.approx(700e-6 + 900e-6) and call.reply == GOOD
    truncated = asyncio.run(mutator.mutate(_request()))
    assert [c.outcome for c in truncated.llm_calls] == ["truncated"]
    bodies = [r.body for r in llm_server.completions if r.body is not None]
    assert all(b["stream"] is True and b["stream_options"] == {"include_usage": True} for b in bodies)


@pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")
def test_a_stream_cut_mid_reply_is_a_recorded_failure(llm_server: LLMServer) -> None:
    llm_server.push(CutStream(GOOD), Reply(GOOD))
    config = LLMConfig(
        model="openai/test-model", api_base=llm_server.url, timeout_s=5.0, stream=True, allow_unpriced=True
    )
    result = asyncio.run(
        LLMMutator(dataclasses.replace(config, max_retries=1), backoff_base_s=0.01).mutate(_request())
    )
    # evokernel's classification, retry and cost row; the error text is litellm's and changes with it.
    cut, retried = result.llm_calls
    assert (cut.outcome, retried.outcome) == ("stream_cut", "ok")
    assert cut.error and cut.cost_usd == 0.0 and cut.completion_tokens == 0
    assert result.source is not None and "return x * 1" in result.source


def test_per_model_limit_serialises_requests(llm_server: LLMServer) -> None:
    async def two(mutator: LLMMutator) -> list[MutationResult]:
        return list(await asyncio.gather(mutator.mutate(_request(0)), mutator.mutate(_request(1))))

    # Each reply is held until both requests are at the server, or for at most ``hold`` seconds:
    # under a limit of 1 the second never arrives while the first is held, so each waits its 0.6 s;
    # without a limit both are released when the second arrives, however slow the machine. The
    # server's count of requests held at once is the evidence.
    for limit, hold, held_at_once in ((1, 0.6, 1), (0, 4.0, 2)):
        llm_server.reset()
        gate = Hang(hold, then=Reply(GOOD), until_in_flight=2)
        llm_server.push(gate, gate)
        mutator = _ensemble(llm_server, "weighted", ModelConfig("openai/solo", max_concurrent=limit))
        assert all(r.ok for r in asyncio.run(two(mutator)))
        assert len(llm_server.completions) == 2 and llm_server.max_in_flight == held_at_once, limit


def test_a_fix_is_credited_against_its_last_correct_ancestor() -> None:
    broken = Scored(Candidate(3, "r", "t", 3, 0, 1, "mutate", (1,), ""), Evaluation(Status.INCORRECT))
    fixed = Evaluation(Status.CORRECT, runtime_ms=1.0, eager_ms=8.0)
    # Against the ancestor at 2 ms the fix gained log 2, not the log 8 it gains over eager.
    assert proposal_gain((broken,), fixed, ancestor_ms=2.0) == pytest.approx(0.05 + 0.6931, abs=1e-4)
    assert proposal_gain((broken,), fixed) == pytest.approx(0.05 + 2.0794, abs=1e-4)


def test_bandit_state_round_trips() -> None:
    selector = ModelSelector(["a", "b"], [1.0, 1.0], "bandit")
    selector.choose(0)
    selector.observe("a", 0.3, 0.01)
    again = ModelSelector(["a", "b", "c"], [1.0, 1.0, 1.0], "bandit")
    again.restore({**selector.state(), "gone": {"pulls": 5}})
    assert again.state()["a"] == {"pulls": 1, "observed": 1, "gain": 0.3, "cost_usd": 0.01}
    assert again.state()["c"]["pulls"] == 0 and "gone" not in again.state()


def test_a_two_model_bandit_run_keeps_its_state_in_the_library_and_the_report(
    tmp_path: Any, llm_server: LLMServer
) -> None:
    from evokernel.analysis import learning_lines, model_learning
    from evokernel.conformance import instant_config, instant_task, run_instant
    from evokernel.db import SolutionLibrary

    replies = [f"```python\n{PARENT.replace('return x', f'return x * {i}')}```" for i in range(2, 12)]
    llm_server.push(*(Reply(r, prompt_tokens=1000, completion_tokens=100) for r in replies))
    task = instant_task("t0")
    config = instant_config("greedy", {"batch": 2}, tmp_path / "lib.db", [task], evaluations=5)
    config.concurrency.llm = 1
    mutator = _ensemble(
        llm_server,
        "bandit",
        ModelConfig("openai/cheap", input_cost_per_mtok=1.0),
        ModelConfig("openai/dear", input_cost_per_mtok=3.0),
    )
    run = run_instant(config, [task], mutator=mutator)
    lib = SolutionLibrary(tmp_path / "lib.db")
    stored = lib.model_stats(run)
    assert stored == mutator.selector.state()
    assert sum(int(v["pulls"]) for v in stored.values()) == 4 == len(llm_server.completions)
    sent = Counter(_sent_models(llm_server))
    assert stored["openai/dear"]["cost_usd"] == pytest.approx(sent["dear"] * 3.0 * 1000 / 1e6)
    lines = learning_lines(model_learning(lib, run))
    cheap = int(stored["openai/cheap"]["pulls"])
    assert len(lines) == 2 and f"openai/cheap: chosen {cheap}x, {cheap} observed" in lines[0]
    # A new mutator on the same run (a resume) starts from what the library kept.
    fresh = _ensemble(
        llm_server, "bandit", ModelConfig("openai/cheap", input_cost_per_mtok=1.0), ModelConfig("openai/dear")
    )
    from evokernel.run.job import ProposalJobs

    ProposalJobs(config, lib, None, run, [fresh], None, lambda p: None, lambda k, d: None)  # type: ignore[arg-type]
    assert fresh.selector.state() == stored
