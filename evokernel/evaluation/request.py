"""The request a sandboxed evaluation receives.

:class:`EvaluationRequest` is built in one place (:meth:`EvaluationRequest.build`) and travels
typed from the pool through the Ray actor, which adds its machine's parts (GPU lock, precompiled
headers); it becomes plain JSON (:meth:`EvaluationRequest.to_json`) only at a process line (the
sandbox's supervisor, the profiler's target), where :meth:`EvaluationRequest.from_json` decodes it
once and strictly (request_parts.py): every stage then reads typed attributes, so a misspelt or
missing key is an error at the line, never a default taken somewhere inside. ``timeout_s``
travels inside it.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from evokernel.config.schema import EvaluationConfig, TimingConfig
from evokernel.evaluation.profiles import DEFAULT_PROFILE, get_profile, profile_tolerance
from evokernel.evaluation.request_parts import GpuLockSpec, TaskSpec, checked, timing_from_json
from evokernel.exceptions import RequestError
from evokernel.tasks import task_globals_overrides
from evokernel.types import Task

__all__ = ["EvaluationRequest", "GpuLockSpec", "RequestError", "TaskSpec", "build_request", "unseen_variant"]

MODES = ("candidate", "baselines")


@dataclass(frozen=True)
class EvaluationRequest:
    """Everything one sandboxed evaluation needs: the task as source, its variants as global
    overrides, the candidate, and the verifier's settings."""

    task: TaskSpec
    overrides: list[dict[str, Any]]  # per variant: globals of the task to override
    unseen: dict[str, Any] | None  # a variant the candidate was never shown (None: none found)
    candidate_source: str
    device: str
    seeds: int
    timing: TimingConfig
    allow_torch: bool
    compile_baseline: str  # evaluation.compile_baseline (EvaluationConfig)
    host_memory_mb: int
    timeout_s: float
    profile: str = DEFAULT_PROFILE  # the verdict profile (evaluation/profiles.py) it is judged under
    isolation: str = "required"  # evaluation.isolation (evaluation/isolation.py)
    baselines: dict[str, Any] | None = None  # a cache entry of evokernel.evaluation.baselines
    static_checks: bool = True
    light_cuda_headers: bool = True  # evaluation.light_cuda_headers (evaluation/inline_builds.py)
    profiling: str = "none"  # evaluation.profiling (evaluation/profiling/stage.py)
    # "baselines": measure the task's eager/compile baselines (trusted code only), no candidate.
    mode: Literal["candidate", "baselines"] = "candidate"
    # A confirmation (run/confirm.py): the task's current best, timed in the candidate's window
    # by a second worker (evaluation/confirmation.py); None: an ordinary evaluation.
    incumbent_source: str | None = None
    # Where it runs, not what it asks (compare=False), each left out of the JSON while unset.
    # Added by the actor that runs it: its GPU lock and precompiled headers.
    gpu_lock: GpuLockSpec | None = field(default=None, compare=False)
    torch_pch: str | None = field(default=None, compare=False)
    # The node's compiled-extension cache (evaluation/object_cache.py), added by the actor.
    object_cache: str | None = field(default=None, compare=False)
    # The actor's build-service socket (evaluation.builds=pool: evaluation/build_client.py), added by
    # the actor; None: the supervisor compiles the object cache's misses itself.
    build_pool: str | None = field(default=None, compare=False)
    # The same socket when the actor keeps fewer evaluations active than it admits
    # (evaluation.builds_ahead): a build made here steps out of its gate (build_client.stepped_out).
    build_gate: str | None = field(default=None, compare=False)
    # Added at the process line: the candidate's directory (workspace.py), when the sandbox
    # launched the supervisor (CLOCK_MONOTONIC, for details["start_s"]), and Nsight Compute's
    # lock directory for the profiler's target (profiling/stage.py).
    workdir: str | None = field(default=None, compare=False)
    launched_at: float | None = field(default=None, compare=False)
    ncu_tmp: str | None = field(default=None, compare=False)

    @property
    def training(self) -> bool:
        """The models are called in training mode (the profile's: evaluation/profiles.py)."""
        return get_profile(self.profile).training

    @classmethod
    def build(
        cls,
        task: Task,
        source: str,
        *,
        device: str,
        scale: str,
        seeds: int | None = None,
        timing: TimingConfig | None = None,
        evaluation: EvaluationConfig | None = None,
        baselines: dict[str, Any] | None = None,
        static_checks: bool = True,
    ) -> EvaluationRequest:
        """``evaluation`` supplies the verifier settings (``allow_torch``, ``compile_baseline``,
        ``host_memory_mb``, ``timeout_s``, ``profile``, ``isolation``); ``seeds`` and ``timing``
        win over it when given. The profile (evaluation/profiles.py) decides the size variants,
        the least number of seeds and the tolerance. ``static_checks=False`` is for tests of the
        run-time layers only."""
        config = evaluation or EvaluationConfig()
        profile = get_profile(config.profile)
        variants = 1 + len(task.variants) if profile.all_sizes else 1
        overrides = [task_globals_overrides(task, scale, v) for v in range(variants)]
        tolerance = profile_tolerance(profile, task.tolerance, frozenset(task.tolerance_set))
        return cls(
            task=TaskSpec(
                name=task.name,
                source=task.source,
                tolerance={k: (float(v[0]), float(v[1])) for k, v in tolerance.items()},
                nondeterministic=task.nondeterministic,
            ),
            overrides=overrides,
            unseen=unseen_variant(task, overrides[0]) if profile.all_sizes else None,
            candidate_source=source,
            device=device,
            seeds=max(config.seeds if seeds is None else seeds, profile.min_seeds),
            # A copy: the config's own object is mutable and stays with the caller.
            timing=replace(timing or config.timing),
            allow_torch=config.allow_torch,
            compile_baseline=config.compile_baseline,
            host_memory_mb=config.host_memory_mb,
            timeout_s=config.timeout_s,
            profile=profile.name,
            isolation=config.isolation,
            baselines=baselines,
            static_checks=static_checks,
            light_cuda_headers=config.light_cuda_headers,
            profiling=config.profiling,
        )

    def for_baselines(self) -> EvaluationRequest:
        """The task's baselines request (no candidate, no static checks: trusted code only)."""
        return replace(self, candidate_source="", mode="baselines", static_checks=False)

    def candidate_directory(self) -> Path:
        """The candidate's directory the process line named (``workdir``); a process started
        without one has nowhere safe to write the candidate, so that is an error, not the cwd."""
        if self.workdir is None:
            raise RequestError("request: missing key 'workdir' (the sandbox adds it)", key="workdir")
        return Path(self.workdir)

    def to_json(self) -> dict[str, Any]:
        """The plain dict that crosses a process line; :meth:`from_json` is its inverse. The parts
        of where it runs are left out while unset, and ``mode`` while it is ``candidate``."""
        data: dict[str, Any] = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        data["task"] = self.task.to_json()
        data["timing"] = {f.name: getattr(self.timing, f.name) for f in fields(self.timing)}
        data["gpu_lock"] = self.gpu_lock.to_json() if self.gpu_lock is not None else None
        for name in _UNSET_LEFT_OUT:
            if data[name] is None:
                del data[name]
        if self.mode == "candidate":
            del data["mode"]
        return data

    @classmethod
    def from_json(cls, data: Any) -> EvaluationRequest:
        """The request :meth:`to_json` wrote, decoded once where it crosses into a process.
        Strict: an unknown key, a missing one or a value of the wrong JSON type raises
        :class:`~evokernel.exceptions.RequestError` naming the key (and the valid ones)."""
        values = checked("request", data, cls, optional=(*_UNSET_LEFT_OUT, "mode"))
        values["task"] = TaskSpec.from_json(values["task"])
        values["timing"] = timing_from_json(values["timing"])
        if values.get("gpu_lock") is not None:
            values["gpu_lock"] = GpuLockSpec.from_json(values["gpu_lock"])
        if values.get("mode", "candidate") not in MODES:
            raise RequestError(
                f"request.mode must be one of {', '.join(MODES)}, not {values['mode']!r}", key="mode"
            )
        if not all(isinstance(o, dict) for o in values["overrides"]) or not values["overrides"]:
            raise RequestError("request.overrides must be a non-empty list of JSON objects", key="overrides")
        return cls(**values)


# The parts of where it runs (compare=False): absent from the JSON until someone sets them.
_UNSET_LEFT_OUT = tuple(f.name for f in fields(EvaluationRequest) if not f.compare)


def build_request(
    task: Task,
    source: str,
    *,
    device: str,
    scale: str,
    seeds: int = 3,
    timing: TimingConfig | None = None,
    evaluation: EvaluationConfig | None = None,
    baselines: dict[str, Any] | None = None,
    static_checks: bool = True,
) -> dict[str, Any]:
    """:meth:`EvaluationRequest.build` as the plain dict :func:`run_sandboxed` takes (kept for
    callers that run the sandbox directly: ``verify``, tests).

    ``evaluation`` supplies the verifier settings (``allow_torch``, ``compile_baseline``,
    ``host_memory_mb``, ``profile``); ``seeds`` and ``timing`` win over it when given. The
    profile (evaluation/profiles.py) decides the size variants, the least number of seeds and the
    tolerance. ``baselines`` is a cache entry from :mod:`evokernel.evaluation.baselines`.
    ``static_checks=False`` is for tests of the run-time layers only.
    """
    request = EvaluationRequest.build(
        task,
        source,
        device=device,
        scale=scale,
        seeds=seeds,
        timing=timing,
        evaluation=evaluation,
        baselines=baselines,
        static_checks=static_checks,
    )
    return request.to_json()


# Globals that size a batch, in order of preference; an unseen variant changes the first found.
_BATCH_NAMES = ("batch_size", "batch", "B", "N", "M", "n", "num_rows", "rows")


def unseen_variant(task: Task, base: dict[str, Any]) -> dict[str, Any] | None:
    """A variant the candidate was never shown: the batch-like global (or else the first integer
    global) of the scale's sizes plus 3, e.g. batch 8 -> 11, so that no declared size repeats and
    a kernel hard-coded to the shown shapes or to multiples of its block fails."""
    ints: dict[str, int] = {}
    for node in ast.parse(task.source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant) and type(value.value) is int:
                ints[node.targets[0].id] = value.value
    sizes = {**ints, **{k: v for k, v in base.items() if type(v) is int}}
    sizes = {k: v for k, v in sizes.items() if v >= 1}
    if not sizes:
        return None
    batchy = [n for n in sizes if "batch" in n.lower()] + [n for n in _BATCH_NAMES if n in sizes]
    name = batchy[0] if batchy else next(iter(sizes))
    return {**base, name: sizes[name] + 3}
