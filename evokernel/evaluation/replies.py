"""The worker's replies, one frozen dataclass per kind, decoded once on the trusted side (issue 34:
a missing fact is an error, never a pass).

The worker (worker.py, worker_timing.py) runs candidate code, so each of its replies is a claim
from the untrusted side. Read with ``.get(key, default)``, a missing or mistyped field became a
default: no ``failed_builds`` read as none (so no fallback note), no ``entry_class`` as
``ModelNew``, no ``status`` as a runtime error. Here each reply is decoded by
:func:`~evokernel.evaluation.request_parts.checked`, the request's strict checker: a missing or
unknown key or a value of the wrong JSON type is a :class:`~evokernel.evaluation.rules.ProtocolViolation`
naming the reply's kind, the key and the valid keys, which the supervisor classifies as rule
``protocol``. The worker builds its replies with the same classes' ``to_json``, so the two sides
share one definition.

On the wire a reply is ``{"ok": true, <its fields>}``, a candidate's failure ``{"ok": false,
status, reason, feedback}`` (:class:`Failure`), and a build the worker asks for in the middle of a
command ``{"request": "build", "call": ...}`` (:class:`BuildRequest`). What the values mean is
judged elsewhere: call facts by the rule table (``Supervisor.check_facts``), tensor metadata by
``channel.decode_tensors``, a timed block's samples against the calls asked (timing_stage.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self, TypeVar

from evokernel.evaluation.request_parts import checked
from evokernel.evaluation.rules import ProtocolViolation
from evokernel.evaluation.timing_stats import TimingResult
from evokernel.exceptions import RequestError

R = TypeVar("R", bound="Reply")


def _checked(what: str, raw: Any, cls: type, optional: Collection[str] = ()) -> dict[str, Any]:
    """:func:`checked`, every field required unless named in ``optional``, its error the worker's."""
    try:
        return checked(what, raw, cls, optional)
    except RequestError as exc:
        raise ProtocolViolation(str(exc)) from exc


@dataclass(frozen=True)
class Reply:
    """An answer to one command: ``{"ok": true, <fields>}``. ``KIND`` names it in errors."""

    KIND: ClassVar[str] = "reply"

    @classmethod
    def decode(cls, raw: Any) -> Self:
        """``raw``: the reply without its ``ok``."""
        return cls(**cls._values(raw))

    @classmethod
    def _values(cls, raw: Any) -> dict[str, Any]:
        values = _checked(f"the worker's {cls.KIND} reply", raw, cls)
        for field in fields(cls):
            if field.type == "float":  # JSON writes 3.0 as 3
                values[field.name] = float(values[field.name])
        return values

    @classmethod
    def _wrong(cls, key: str, value: Any, expected: str) -> ProtocolViolation:
        """A field whose type :func:`checked` leaves to the class (a nested part)."""
        valid = ", ".join(field.name for field in fields(cls))
        return ProtocolViolation(
            f"the worker's {cls.KIND} reply.{key} must be {expected}, not {type(value).__name__} "
            f"({value!r:.80}; valid keys: {valid})"
        )

    def to_json(self) -> dict[str, Any]:
        return {"ok": True, **{field.name: getattr(self, field.name) for field in fields(self)}}


@dataclass(frozen=True)
class Failure(Reply):
    """The candidate failed the command: ``status`` is ``compile_error`` or ``runtime_error``
    (anything else is forged: the supervisor's to refuse), ``feedback`` what it is shown."""

    KIND: ClassVar[str] = "failure"
    status: str
    reason: str
    feedback: str

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "ok": False}


@dataclass(frozen=True)
class BuildRequest:
    """A ``load_inline`` build the worker asks the supervisor's object cache for in the middle of
    a command (remote_builds.py). ``call`` is decoded by ``object_cache.call_arguments``, which
    answers ``local`` to one it cannot build."""

    call: Any

    def to_json(self) -> dict[str, Any]:
        return {"request": "build", "call": self.call}

    @classmethod
    def decode(cls, raw: dict[str, Any]) -> BuildRequest:
        if raw.get("request") != "build":
            raise ProtocolViolation(f"the worker asked for {raw.get('request')!r:.80}, not a build")
        rest = {k: v for k, v in raw.items() if k != "request"}
        return cls(**_checked("the worker's build request", rest, cls))


@dataclass(frozen=True)
class ImportReply(Reply):
    """``build``: the candidate imported. ``facts``: the import's call facts (the rule table's);
    ``inline_builds`` (its load_inline counts) and ``isolation`` (its confinement) are shown,
    never trusted; ``failed_builds``: load_inline builds that failed and the candidate caught."""

    KIND: ClassVar[str] = "import"
    facts: dict[str, Any]
    inline_builds: dict[str, Any]
    entry_class: str
    failed_builds: list[str]
    isolation: dict[str, Any]


@dataclass(frozen=True)
class VariantReply(Reply):
    """``variant``: both models made; ``weights``: how the candidate got the reference's."""

    KIND: ClassVar[str] = "variant"
    weights: str


@dataclass(frozen=True)
class WarmReply(Reply):
    """``warm``: the facts of the one warm-up call."""

    KIND: ClassVar[str] = "warm"
    facts: dict[str, Any]


@dataclass(frozen=True)
class TrialRun:
    """One call of a trial: its facts, the inputs it changed in place and, when the command asked
    (the pytorch-recompute rule), its ATen compute ops; None when not asked."""

    facts: dict[str, Any]
    inputs_changed: list[int]
    aten_ops: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {"facts": self.facts, "inputs_changed": self.inputs_changed, "aten_ops": self.aten_ops}

    @classmethod
    def decode(cls, raw: Any, what: str) -> TrialRun:
        values = _checked(what, raw, cls)
        changed = values["inputs_changed"]
        if not all(type(i) is int for i in changed):
            raise ProtocolViolation(f"{what}.inputs_changed must list input positions, not {changed!r:.80}")
        return cls(**values)


@dataclass(frozen=True)
class TrialReply(Reply):
    """``trial``: each run's facts (one per run asked), whether the runs' outputs agreed bit for
    bit, and the first run's outputs (``channel`` metadata; the blob holds their bytes)."""

    KIND: ClassVar[str] = "trial"
    runs: tuple[TrialRun, ...]
    deterministic: bool
    outputs: list[dict[str, Any]]

    @classmethod
    def decode(cls, raw: Any) -> Self:
        values = cls._values(raw)
        runs = values["runs"]
        if not isinstance(runs, list) or not runs:
            raise cls._wrong("runs", runs, "a list of its calls")
        what = "the worker's trial reply.runs"
        values["runs"] = tuple(TrialRun.decode(run, f"{what}[{n}]") for n, run in enumerate(runs))
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "runs": [run.to_json() for run in self.runs]}


@dataclass(frozen=True)
class OutputsReply(Reply):
    """``outputs``: a trial's outputs again, as bytes (``channel`` metadata; the blob)."""

    KIND: ClassVar[str] = "outputs"
    outputs: list[dict[str, Any]]


@dataclass(frozen=True)
class SettleReply(Reply):
    """``time``, phase ``settle``: the candidate warmed up; one call's milliseconds."""

    KIND: ClassVar[str] = "timing settle"
    call_ms: float


@dataclass(frozen=True)
class BlockReply(Reply):
    """``time``, phase ``block``: the milliseconds of each timed call of the block."""

    KIND: ClassVar[str] = "timing block"
    samples: list[float]


@dataclass(frozen=True)
class FinishReply(Reply):
    """``time``, phase ``finish``: the timing's figures, the facts of its timed calls (``facts``)
    and of the check call after them (``check``), and the check call's outputs (``channel``
    metadata; the blob holds their bytes)."""

    KIND: ClassVar[str] = "timing finish"
    timing: TimingResult
    facts: dict[str, Any]
    check: dict[str, Any]
    check_outputs: list[dict[str, Any]]

    @classmethod
    def decode(cls, raw: Any) -> Self:
        values = cls._values(raw)
        if not isinstance(values["timing"], dict):
            raise cls._wrong("timing", values["timing"], "a JSON object of figures")
        # Every figure, as to_dict writes them: one left out would be read as its default.
        figures = _checked("the worker's timing finish reply.timing", values["timing"], TimingResult)
        return cls(**{**values, "timing": TimingResult(**figures)})

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "timing": self.timing.to_dict()}


@dataclass(frozen=True)
class ProfileReply(Reply):
    """``profile``: the call's timeline (profiling/timeline.py; ``error`` in it when the profiler
    failed, which is advice lost, never the candidate's failure)."""

    KIND: ClassVar[str] = "profile"
    timeline: dict[str, Any]


def decode(raw: dict[str, Any], kind: type[R]) -> R | Failure | BuildRequest:
    """The worker's answer to a command whose reply is a ``kind``: that reply, the candidate's
    :class:`Failure`, or a :class:`BuildRequest` before the answer. Raises
    :class:`ProtocolViolation` for anything else."""
    if "request" in raw:
        return BuildRequest.decode(raw)
    ok = raw.get("ok")
    if not isinstance(ok, bool):
        raise ProtocolViolation(f"the worker's {kind.KIND} reply has no boolean 'ok', but {ok!r:.40}")
    rest = {k: v for k, v in raw.items() if k != "ok"}
    return kind.decode(rest) if ok else Failure.decode(rest)
