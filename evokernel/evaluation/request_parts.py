"""The typed parts of an evaluation request and the strict decoding of its JSON.

:class:`~evokernel.evaluation.request.EvaluationRequest` crosses a process line as a JSON dict
(the sandbox's supervisor, the profiler's target). What arrives is decoded once, here: an
unknown key, a missing key or a value of the wrong JSON type is a :class:`RequestError` naming
the key, never a value that a later ``.get`` quietly replaces with a default.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from evokernel.config.schema import TimingConfig
from evokernel.exceptions import RequestError

# Field annotations (strings: ``from __future__ import annotations``) whose JSON type is checked
# on decoding; ``int`` is accepted for ``float`` because JSON writes 42.0 as 42.
_SCALARS: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
}


@dataclass(frozen=True)
class TaskSpec:
    """The task as the sandbox needs it: its source (loaded from the request held in memory,
    never from a file the candidate could rewrite), its tolerance under the profile
    (``{dtype: (atol, rtol)}``) and whether its own outputs vary from run to run."""

    name: str
    source: str
    tolerance: dict[str, tuple[float, float]]
    nondeterministic: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "tolerance": {k: list(v) for k, v in self.tolerance.items()},
            "nondeterministic": self.nondeterministic,
        }

    @classmethod
    def from_json(cls, data: Any) -> TaskSpec:
        values = checked("request.task", data, cls)
        tolerance = values["tolerance"]
        if not isinstance(tolerance, dict) or not all(
            isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, int | float) for x in v)
            for v in tolerance.values()
        ):
            raise RequestError(
                f"request.task.tolerance must map dtypes to [atol, rtol], not {tolerance!r:.120}",
                key="tolerance",
            )
        return cls(
            **{**values, "tolerance": {str(k): (float(v[0]), float(v[1])) for k, v in tolerance.items()}}
        )


@dataclass(frozen=True)
class GpuLockSpec:
    """The node's GPU lock (evaluation/gpulock.py) as the actor that runs the request hands it on:
    the lock files' directory, the longest wait (the pool's overload past it) and the quiet-window
    keeper's socket (evaluation/quiet.py; None: no quiet windows)."""

    dir: str
    max_wait_s: float
    quiet: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"dir": self.dir, "max_wait_s": self.max_wait_s}
        if self.quiet is not None:
            data["quiet"] = self.quiet
        return data

    @classmethod
    def from_json(cls, data: Any) -> GpuLockSpec:
        return cls(**checked("request.gpu_lock", data, cls))


def timing_from_json(data: Any) -> TimingConfig:
    """Every field of :class:`TimingConfig`, as ``to_json`` writes them: one left out would be the
    default instead of the run's setting, which is the silent pass this module exists to stop."""
    return TimingConfig(**checked("request.timing", data, TimingConfig, optional=()))


def checked(what: str, data: Any, cls: type, optional: Collection[str] | None = None) -> dict[str, Any]:
    """``data`` as keyword arguments of the dataclass ``cls``, after checking its keys and scalar
    types. ``optional``: the keys that may be left out (default: the fields with a default)."""
    if not isinstance(data, Mapping):
        raise RequestError(f"{what} must be a JSON object, not {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    valid = ", ".join(known)
    for key in data:
        if key not in known:
            raise RequestError(f"{what}: unknown key {key!r} (valid keys: {valid})", key=str(key))
    if optional is None:
        optional = [
            n for n, f in known.items() if f.default is not MISSING or f.default_factory is not MISSING
        ]
    for name in known:
        if name not in data and name not in optional:
            raise RequestError(f"{what}: missing key {name!r} (valid keys: {valid})", key=name)
    for key, value in data.items():
        kind = str(known[key].type)
        accepted = _json_types(kind.removesuffix(" | None"))
        if accepted is None or (value is None and kind.endswith(" | None")):
            continue
        # bool is an int to isinstance; a flag written where a number belongs is still wrong.
        if not isinstance(value, accepted) or (bool not in accepted and isinstance(value, bool)):
            raise RequestError(
                f"{what}.{key} must be {kind}, not {type(value).__name__} ({value!r:.80}; valid keys: "
                f"{valid})",
                key=key,
            )
    return dict(data)


def _json_types(annotation: str) -> tuple[type, ...] | None:
    """The Python types JSON decodes to for a field's annotation; None: checked elsewhere (a
    typed part such as :class:`TaskSpec`) or not at all (``Any``)."""
    if annotation.startswith("dict["):
        return (dict,)
    if annotation.startswith("list["):
        return (list,)
    return _SCALARS.get(annotation)
