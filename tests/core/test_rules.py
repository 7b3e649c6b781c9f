"""The run-time rule table (evaluation/rules.py): every rule fires for the kinds of call it names
and no other, a missing fact is a protocol violation, and every rule a CPU candidate can break
refuses it under every verdict profile alike (issue 34: checks used to vanish under one)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evokernel.evaluation import rules
from evokernel.evaluation.forkserver import ForkServer
from evokernel.evaluation.profiles import PROFILES
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.types import Evaluation
from tests.core.corpus import FIXTURES, Case, case_request, corpus, load_case

CLEAN = rules.CallFacts(
    launches=1,
    failed_launches=0,
    last_launch_failure="",
    streams_left_running=0,
    left_running_ms=0.0,
    new_threads=0,
    new_processes=0,
    stream_changed=False,
    changed_harness=(),
)
# Facts that break exactly one rule each.
BREAKING = {
    "harness-modified": replace(CLEAN, changed_harness=("time.perf_counter",)),
    "threads": replace(CLEAN, new_threads=1),
    "processes": replace(CLEAN, new_processes=2),
    "streams": replace(CLEAN, stream_changed=True),
    "side-stream": replace(CLEAN, streams_left_running=1, left_running_ms=0.5),
    "fallback": replace(CLEAN, failed_launches=1, last_launch_failure="OutOfResources"),
    "own-kernel": replace(CLEAN, launches=0),
}


def test_every_rule_of_the_table_has_breaking_facts() -> None:
    assert [rule.name for rule in rules.RULES] == list(BREAKING)


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda r: r.name)
@pytest.mark.parametrize("kind", sorted(rules.KINDS))
def test_a_rule_fires_exactly_for_the_kinds_it_judges(rule: rules.Rule, kind: str) -> None:
    broken = rules.broken_rule(BREAKING[rule.name], kind, "somewhere", allow_torch=False)
    if kind in rule.kinds:
        assert broken is not None and broken[0] == rule.name and broken[1].startswith("somewhere: ")
    else:
        assert broken is None
    assert rules.broken_rule(CLEAN, kind, "somewhere", allow_torch=False) is None


def test_the_timed_loop_needs_a_launch_per_call() -> None:
    loop = replace(CLEAN, calls=40, launches=39)
    broken = rules.broken_rule(loop, "timing", "timing", allow_torch=False)
    assert broken == (
        "own-kernel",
        "timing: 1 of 40 timed calls launched no kernel of its own (a cached result?)",
    )
    assert rules.broken_rule(replace(loop, launches=40), "timing", "timing", allow_torch=False) is None
    assert rules.broken_rule(loop, "timing", "timing", allow_torch=True) is None


def test_a_missing_or_mistyped_fact_is_a_protocol_violation() -> None:
    wire = {"launches": 1, "failed_launches": 0, "last_launch_failure": "", "streams_left_running": 0}
    with pytest.raises(rules.ProtocolViolation, match="left_running_ms"):
        rules.CallFacts.decode(wire)
    full = {**wire, "left_running_ms": 0.0, "new_threads": 0, "new_processes": 0, "stream_changed": False}
    full["changed_harness"] = []
    assert rules.CallFacts.decode(full) == CLEAN
    with pytest.raises(rules.ProtocolViolation, match="new_threads"):
        rules.CallFacts.decode({**full, "new_threads": "0"})
    with pytest.raises(rules.ProtocolViolation):
        rules.CallFacts.decode(None)


def judged(case: Case, profile: str, fork_server: ForkServer, static_checks: bool = True) -> Evaluation:
    """``case`` on the CPU under ``profile``, through the fork server (the pool's launch path)."""
    return run_sandboxed(
        case_request(case, profile, static_checks), case.timeout_s, launcher=fork_server.spawn
    )


# A CPU hack per rule a CPU candidate can break (streams and side-stream need a GPU: test_gpu.py).
CPU_HACKS = {
    "harness-modified": "monkeypatch_timer",
    "threads": "background_thread",
    "fallback": "try_except_fallback",
    "own-kernel": "torch_ops_instead_of_kernel",
    "processes": "process_left_at_import",
}


@pytest.mark.slow
@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize(("rule", "hack"), list(CPU_HACKS.items()))
def test_each_rule_refuses_its_hack_under_every_profile(
    rule: str, hack: str, profile: str, fork_server: ForkServer
) -> None:
    ev = judged(load_case(FIXTURES / "hacks" / f"{hack}.py"), profile, fork_server, static_checks=False)
    assert ev.profile == profile
    assert ev.status.value == "rejected" and f"rule {rule}" in ev.reason, f"{ev.status.value}: {ev.reason}"


ALLOWED = [(c, p) for c in corpus("hack") if c.device == "cpu" for p in c.allowed_by]


@pytest.mark.parametrize(("case", "profile"), ALLOWED, ids=[f"{c.id}-{p}" for c, p in ALLOWED])
def test_a_trick_within_a_field_profiles_contract_is_accepted_there_only(
    case: Case, profile: str, fork_server: ForkServer
) -> None:
    """What a fixture's ``allowed-by`` claims: the field's contract (default sizes only, or 1e-2)
    does not reach the trick, so that profile accepts it as the field would; strict refuses it
    (the corpus tests). experiments/bench/hack_profiles.py runs the whole corpus under all three."""
    assert profile in PROFILES and profile != "strict"
    ev = judged(case, profile, fork_server)
    assert ev.profile == profile and ev.status.value == "correct", f"{ev.status.value}: {ev.reason}"
