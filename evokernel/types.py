"""The small frozen dataclasses that parts of evokernel pass to each other.

Data flows one way: a Strategy emits :class:`Proposal` s, a Mutator turns one into candidate
source, the library records it as a :class:`Candidate`, the pool turns (task, source) into an
:class:`Evaluation`. None of these hold live objects (modules, tensors, sessions), so every one
can cross a process or Ray boundary and be rebuilt from a library row.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


def source_hash(source: str) -> str:
    """Content hash used to key tasks, candidates and build caches (16 hex chars = 64 bits)."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


class Status(StrEnum):
    """Outcome of evaluating one candidate. Every status but PENDING/CORRECT comes with a reason."""

    PENDING = "pending"
    CORRECT = "correct"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"


class Operator(StrEnum):
    """The built-in proposal operators: the one place their names are spelled. A proposal's
    ``operator`` is a plain string, so a third-party mutator may serve operators of its own."""

    SEED = "seed"  # an LLM writes a first kernel from the reference
    SEED_FILE = "seed_file"  # the task's own seed implementation, as given (no mutator)
    MUTATE = "mutate"  # an LLM rewrites one parent
    CROSSOVER = "crossover"  # an LLM combines two parents
    FIX = "fix"  # an LLM repairs a failed parent, shown its feedback
    TUNE = "tune"  # the knob search changes a Triton kernel's launch/config constants (no LLM)
    IDEAS = "ideas"  # an LLM brainstorms ideas for the next phase; makes no candidate


# Defaults from the verifier issue: fp32 1e-4, half types 1e-2; (atol, rtol).
DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float64": (1e-7, 1e-7),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}


@dataclass(frozen=True)
class Task:
    """A KernelBench-format reference program plus optional evokernel metadata.

    ``variants`` are overrides of the task module's globals (e.g. ``{"batch_size": 8}``) applied
    before ``get_inputs()``/``get_init_inputs()``; the default sizes are always variant 0.
    ``small`` is the override that scales the task down for CPU runs under Triton's interpreter.
    """

    name: str
    path: str
    source: str
    level: int | None = None
    tolerance: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))
    # The dtypes whose tolerance the task's EVOKERNEL names (they win over a verdict profile's).
    tolerance_set: tuple[str, ...] = ()
    variants: tuple[dict[str, Any], ...] = ()
    small: dict[str, Any] = field(default_factory=dict)
    seed_source: str | None = None
    seed_path: str | None = None
    nondeterministic: bool = False
    description: str = ""

    @property
    def source_hash(self) -> str:
        return source_hash(self.source)


@dataclass(frozen=True)
class Proposal:
    """What a strategy wants tried next: an operator applied to parents on an island.

    ``id`` and ``seq`` are assigned when the library records the proposal; ``seq`` numbers the
    proposals of one (run, task) from 0 in the order they were recorded. ``branch`` is the
    proposal's lane within its (island, generation) -- PIKE-B's branch, a slot index for other
    strategies; together with island, generation, operator and parents it names the proposal
    independently of recording order, which is what keys its randomness (see the engine).
    ``count`` is how many results an operator that returns several should produce (the ``ideas``
    operator's N); ``ideas`` holds them once the proposal is done. ``state`` is open, done or failed.
    """

    task: str
    operator: str
    island: int = 0
    generation: int = 0
    parents: tuple[int, ...] = ()
    idea: str | None = None
    id: int | None = None
    seq: int | None = None
    branch: int = 0
    count: int = 1
    ideas: tuple[str, ...] = ()
    state: str = "open"


@dataclass(frozen=True)
class Candidate:
    """A concrete ``ModelNew`` source produced for a proposal."""

    id: int
    run_id: str
    task: str
    proposal_id: int
    island: int
    generation: int
    operator: str
    parents: tuple[int, ...]
    source: str
    branch: int = 0

    @property
    def source_hash(self) -> str:
        return source_hash(self.source)


@dataclass(frozen=True)
class IslandEvent:
    """A change of island membership, recorded at the start of ``generation``.

    ``migrate``: ``candidate`` (living on ``from_island``) joins ``island`` as a migrant; migrants
    never migrate again. ``reset``: ``island`` forgets every member from before ``generation``.
    ``reseed``: after a reset, ``candidate`` (the best of a surviving island) joins ``island``.
    """

    kind: str
    generation: int
    island: int
    candidate: int | None = None
    from_island: int | None = None


@dataclass(frozen=True)
class Evaluation:
    """The verdict on one candidate. Runtimes are medians in milliseconds.

    ``interpreter`` is True when Triton ran under ``TRITON_INTERPRET=1`` on a CPU: the timings are
    then interpreter timings and say nothing about GPU performance.

    ``speedup_low``/``speedup_high`` bound the 95 % confidence interval of ``speedup_eager`` when it
    was measured paired (candidate and eager interleaved; ``details["timing"]["paired"]`` says how);
    None for a figure taken otherwise (rows from before issue 35). ``confirmed``: a paired re-timing
    against the task's incumbent confirmed the figure before promotion (``details["confirmation"]``).
    """

    status: Status
    reason: str = ""
    stage: str = ""
    device: str = ""
    interpreter: bool = False
    max_abs_error: float | None = None
    runtime_ms: float | None = None
    runtime_iqr_ms: float | None = None
    runtime_cv: float | None = None
    eager_ms: float | None = None
    speedup_eager: float | None = None
    compile_ms: float | None = None
    speedup_compile: float | None = None
    feedback: str = ""
    duration_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    # The verdict profile (evaluation/profiles.py) the verdict and figures were reached under.
    profile: str = "strict"
    speedup_low: float | None = None
    speedup_high: float | None = None
    confirmed: bool = False

    @property
    def ok(self) -> bool:
        return self.status is Status.CORRECT

    @property
    def speedup_text(self) -> str:
        """:func:`format_speedup` of the speedup vs eager with its interval (``-`` unless correct)."""
        if not self.ok:
            return "-"
        return format_speedup(self.speedup_eager, self.speedup_low, self.speedup_high)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["status"] = self.status.value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["status"] = Status(known["status"])
        return cls(**known)


def format_speedup(speedup: float | None, low: float | None = None, high: float | None = None) -> str:
    """A speedup as every report, table and export shows it: ``2.05x [1.98-2.11]`` with its 95 %
    interval, the bare ``2.05x`` when it has none (not measured paired: never an invented one),
    ``-`` without a figure. Three significant digits, as the figures always had."""
    if speedup is None:
        return "-"
    if low is None or high is None:
        return f"{speedup:.3g}x"
    return f"{speedup:.3g}x [{low:.3g}-{high:.3g}]"


@dataclass(frozen=True)
class Scored:
    """A candidate together with its evaluation (None while pending)."""

    candidate: Candidate
    evaluation: Evaluation | None

    @property
    def speedup(self) -> float:
        """Speedup vs eager for correct candidates, 0.0 otherwise: the fitness used for ranking."""
        ev = self.evaluation
        if ev is None or not ev.ok or ev.speedup_eager is None:
            return 0.0
        return ev.speedup_eager

    @property
    def speedup_text(self) -> str:
        """The speedup vs eager with its interval (:func:`format_speedup`); ``-`` unless correct."""
        return "-" if self.evaluation is None else self.evaluation.speedup_text


@dataclass(frozen=True)
class LLMCall:
    """Accounting for one LLM request (never contains an API key)."""

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    outcome: str = "ok"
    error: str = ""
    prompt_hash: str = ""
    prompt: str = ""
    reply: str = ""


@dataclass(frozen=True)
class RunInfo:
    id: str
    name: str
    config: dict[str, Any]
    seed: int
    status: str
    created_at: str
    finished_at: str | None = None
