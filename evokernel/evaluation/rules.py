"""The run-time rules: one ordered table, applied to every judged call under every profile.

What enters: the facts the worker reports about one call (:class:`CallFacts`, decoded from its
reply; a missing or mistyped fact is a protocol violation, never a pass) and which kind of call
it was. What leaves: the first rule the call breaks, as ``(rule, reason)``, or None.

Kinds of call: ``import`` (the candidate's module import), ``warm`` (the JIT call outside the GPU
lock), ``trial`` (each correctness call), ``timing`` (the timed loop as a whole: its launches are
counted against its calls) and ``check`` (the call after the timed ones). A rule names the kinds
it judges; nothing else decides where it runs, so no profile, stage or code path can skip one
(issue 34: the launch count and side-stream facts used to be patched on the way, a missing fact
read as 0, and the rules lived in four places).

Adding a run-time check: a field on :class:`CallFacts` (the worker measures it in
``worker._call``), a :class:`Rule` here, a fixture under ``tests/fixtures/hacks/``; the table test
(``tests/core/test_rules.py``) proves every rule fires for its kinds under every profile.

Checks that judge figures rather than one call's facts stay beside their figures, also under every
profile: the side-stream tail of the timed loop (``integrity.side_stream_work``), the
pytorch-recompute rule (``integrity.recomputed_reference``) and the timed result
(``Supervisor._check_timed_result``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from evokernel.exceptions import EvaluationError

KINDS = frozenset({"import", "warm", "trial", "timing", "check"})
CALLS = frozenset({"warm", "trial", "check"})


class ProtocolViolation(EvaluationError):
    """The worker's reply lacks a fact or holds one of the wrong type (rule ``protocol``)."""


@dataclass(frozen=True)
class CallFacts:
    """What the worker observed around one call (or the timed loop, or the import)."""

    launches: int
    failed_launches: int
    last_launch_failure: str
    streams_left_running: int
    left_running_ms: float
    new_threads: int
    new_processes: int
    stream_changed: bool
    changed_harness: tuple[str, ...]
    calls: int = 1  # the timed loop's calls; 1 for a single call

    @classmethod
    def decode(cls, raw: Any) -> CallFacts:
        if not isinstance(raw, dict):
            raise ProtocolViolation(f"call facts are a {type(raw).__name__}, not a mapping")
        values: dict[str, Any] = {}
        for field in fields(cls):
            if field.name not in raw:
                if field.name == "calls":
                    continue
                raise ProtocolViolation(f"the worker did not report the fact {field.name!r}")
            value = raw[field.name]
            if field.name == "changed_harness":
                if not isinstance(value, list | tuple):
                    raise ProtocolViolation("changed_harness is not a list")
                value = tuple(str(v) for v in value)
            elif field.type in ("int", "float") and not _number(value):
                raise ProtocolViolation(f"the fact {field.name!r} is not a number: {value!r}")
            elif field.type == "bool" and not isinstance(value, bool):
                raise ProtocolViolation(f"the fact {field.name!r} is not a boolean: {value!r}")
            elif field.type == "str":
                value = str(value)
            values[field.name] = value
        return cls(**values)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Rule:
    name: str
    kinds: frozenset[str]
    # (facts, allow_torch) -> the reason, or None when the call keeps the rule.
    broken: Callable[[CallFacts, bool], str | None]


def _own_kernel(f: CallFacts, allow_torch: bool) -> str | None:
    if allow_torch or f.launches >= f.calls:
        return None
    if f.calls > 1:
        missing = f.calls - f.launches
        return f"{missing} of {f.calls} timed calls launched no kernel of its own (a cached result?)"
    return (
        "the call launched no Triton or CUDA kernel of its own (computed with PyTorch ops, called the "
        "reference, or returned a cached result)"
    )


RULES: tuple[Rule, ...] = (
    Rule(
        "harness-modified",
        KINDS,
        lambda f, _: f"replaced {', '.join(f.changed_harness)}" if f.changed_harness else None,
    ),
    Rule(
        "threads",
        KINDS,
        lambda f, _: f"{f.new_threads} thread(s) still alive after the call" if f.new_threads else None,
    ),
    Rule(
        "processes",
        KINDS,
        lambda f, _: f"{f.new_processes} child process(es) left running" if f.new_processes else None,
    ),
    Rule(
        "streams",
        CALLS,
        lambda f, _: "the call left a different current stream" if f.stream_changed else None,
    ),
    Rule(
        "side-stream",
        CALLS,
        lambda f, _: (
            f"work on {f.streams_left_running} other stream(s) was still running after the call's own "
            f"stream had finished (the GPU stayed busy {f.left_running_ms:.4g} ms more): the call forked "
            "work it did not join back, which a timer on its stream never sees"
            if f.streams_left_running
            else None
        ),
    ),
    Rule(
        "fallback",
        CALLS | {"timing"},
        lambda f, _: (
            f"a kernel launch raised ({f.last_launch_failure or 'an error'}) and the call returned "
            "anyway: its try/except fallback ran instead of the kernel"
            if f.failed_launches
            else None
        ),
    ),
    Rule("own-kernel", CALLS | {"timing"}, _own_kernel),
)


def broken_rule(
    facts: CallFacts, kind: str, where: str, allow_torch: bool, own_kernel_note: str = ""
) -> tuple[str, str] | None:
    """The first rule of :data:`RULES` that ``facts`` of a ``kind`` call break, as
    ``(rule, reason)``; ``own_kernel_note`` is appended when own-kernel breaks (why a caught build
    made the PyTorch fallback run)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of call {kind!r}")
    for rule in RULES:
        if kind in rule.kinds and (why := rule.broken(facts, allow_torch)):
            note = own_kernel_note if rule.name == "own-kernel" else ""
            return rule.name, f"{where}: {why}{note}"
    return None
