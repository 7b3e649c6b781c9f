"""The worker's replies (evaluation/replies.py): each kind decodes what the worker writes, and a
reply lacking any field or holding one of the wrong type is a protocol violation naming the kind,
the key and the valid keys (issue 34: a missing fact is an error, never a pass), through the real
sandbox too."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from evokernel.config.schema import TimingConfig
from evokernel.evaluation import replies
from evokernel.evaluation.request_parts import timing_from_json
from evokernel.evaluation.rules import ProtocolViolation
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.evaluation.timing_stats import TimingResult
from tests.core.corpus import FIXTURES, case_request, load_case

FACTS: dict[str, Any] = {
    "launches": 1,
    "failed_launches": 0,
    "last_launch_failure": "",
    "streams_left_running": 0,
    "left_running_ms": 0.0,
    "new_threads": 0,
    "new_processes": 0,
    "stream_changed": False,
    "changed_harness": [],
}
META = [{"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 16}]

# One reply of every kind, as the worker builds it.
REPLIES: list[replies.Reply] = [
    replies.ImportReply(FACTS, {"cuda": 1}, "ModelNew", ["nvcc failed"], {"mode": "off"}),
    replies.VariantReply("same seed"),
    replies.WarmReply(FACTS),
    replies.TrialReply(
        (replies.TrialRun(FACTS, [], {"aten::mm": 1}), replies.TrialRun(FACTS, [1], None)), True, META
    ),
    replies.OutputsReply(META),
    replies.SettleReply(0.25),
    replies.BlockReply([0.25, 0.5]),
    replies.FinishReply(TimingResult(median_ms=0.25, iqr_ms=0.01, cv=0.02, reps=40), FACTS, FACTS, META),
    replies.ProfileReply({"kernels": []}),
    replies.Failure("runtime_error", "ModelNew(...) raised ValueError", "Traceback ..."),
]
KINDS = [type(r) for r in REPLIES]


def wire(reply: replies.Reply) -> dict[str, Any]:
    """What the supervisor receives: the reply through JSON, as the channel sends it."""
    decoded: dict[str, Any] = json.loads(json.dumps(reply.to_json()))
    return decoded


def _raw(reply: replies.Reply) -> dict[str, Any]:
    """The reply as :meth:`replies.Reply.decode` takes it: without its ``ok``."""
    raw = wire(reply)
    raw.pop("ok")
    return raw


@pytest.mark.parametrize("reply", REPLIES, ids=lambda r: r.KIND)
def test_every_reply_decodes_what_the_worker_writes(reply: replies.Reply) -> None:
    assert replies.decode(wire(reply), type(reply) if reply.KIND != "failure" else replies.WarmReply) == reply


# (reply, key) for every top-level field of every kind; each test decodes a fresh copy.
FIELDS = [(reply, f.name) for reply in REPLIES for f in dataclasses.fields(reply)]
IDS = [f"{reply.KIND}.{key}" for reply, key in FIELDS]


def _valid(reply: replies.Reply) -> str:
    return ", ".join(f.name for f in dataclasses.fields(reply))


@pytest.mark.parametrize(("reply", "key"), FIELDS, ids=IDS)
def test_a_missing_field_names_the_kind_the_key_and_the_valid_keys(reply: replies.Reply, key: str) -> None:
    raw = _raw(reply)
    del raw[key]
    with pytest.raises(
        ProtocolViolation, match=rf"the worker's {reply.KIND} reply: missing key '{key}'"
    ) as info:
        type(reply).decode(raw)
    assert f"(valid keys: {_valid(reply)})" in str(info.value)


@pytest.mark.parametrize(("reply", "key"), FIELDS, ids=IDS)
def test_a_field_of_the_wrong_type_names_the_kind_the_key_and_the_valid_keys(
    reply: replies.Reply, key: str
) -> None:
    raw = _raw(reply)
    # A JSON value no field accepts: a string where a number, list or object belongs, and a
    # number where a string belongs.
    raw[key] = 7 if isinstance(raw[key], str) else "7"
    with pytest.raises(ProtocolViolation, match=rf"the worker's {reply.KIND} reply\.{key}\b") as info:
        type(reply).decode(raw)
    assert f"valid keys: {_valid(reply)})" in str(info.value)


def test_an_unknown_field_and_nested_parts_are_refused_by_name() -> None:
    with pytest.raises(ProtocolViolation, match=r"unknown key 'entry_klass' \(valid keys: facts, "):
        replies.ImportReply.decode({**_raw(REPLIES[0]), "entry_klass": "ModelNew"})
    trial = _raw(REPLIES[3])
    for run in trial["runs"]:
        del run["inputs_changed"]
    with pytest.raises(ProtocolViolation, match=r"trial reply\.runs\[0\]: missing key 'inputs_changed'"):
        replies.TrialReply.decode(trial)
    with pytest.raises(
        ProtocolViolation, match=r"runs must be a list of its calls, not list \(\[\]; valid keys: "
    ):
        replies.TrialReply.decode({**_raw(REPLIES[3]), "runs": []})
    with pytest.raises(ProtocolViolation, match="inputs_changed must list input positions"):
        replies.TrialReply.decode(
            {**trial, "runs": [{**_raw(REPLIES[3])["runs"][0], "inputs_changed": ["0"]}]}
        )
    finish = _raw(REPLIES[7])
    del finish["timing"]["median_ms"]
    with pytest.raises(ProtocolViolation, match=r"timing finish reply\.timing: missing key 'median_ms'"):
        replies.FinishReply.decode(finish)


def test_the_envelope_failures_and_build_requests() -> None:
    with pytest.raises(ProtocolViolation, match="no boolean 'ok'"):
        replies.decode(_raw(REPLIES[1]), replies.VariantReply)
    failure = wire(REPLIES[-1])
    assert replies.decode(failure, replies.TrialReply) == REPLIES[-1]
    del failure["feedback"]
    with pytest.raises(ProtocolViolation, match="failure reply: missing key 'feedback'"):
        replies.decode(failure, replies.TrialReply)
    build = replies.BuildRequest({"name": "ext"})
    assert replies.decode(build.to_json(), replies.ImportReply) == build
    with pytest.raises(ProtocolViolation, match="build request: missing key 'call'"):
        replies.decode({"request": "build"}, replies.ImportReply)
    with pytest.raises(ProtocolViolation, match="not a build"):
        replies.decode({"request": "exec", "call": {}}, replies.ImportReply)


def test_the_settle_command_carries_every_timing_setting() -> None:
    settings = TimingConfig(warmup_ms=3.0, same_cpu=False, call_start="idle")
    assert timing_from_json(json.loads(json.dumps(dataclasses.asdict(settings)))) == settings


@pytest.mark.slow
def test_a_worker_reply_lacking_a_field_is_refused_as_protocol_not_passed() -> None:
    """The candidate rewrites the worker's replies on their way out (a module no harness snapshot
    holds), so the import reply lacks ``failed_builds``: once read as none, now rule protocol."""
    case = load_case(FIXTURES / "hacks" / "worker_reply_field_dropped.py")
    ev = run_sandboxed(case_request(case, static_checks=False), case.timeout_s)
    assert (ev.status.value, ev.stage) == ("rejected", "integrity"), f"{ev.status.value}: {ev.reason}"
    assert "rule protocol: the worker's import reply: missing key 'failed_builds'" in ev.reason
