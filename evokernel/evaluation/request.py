"""The request a sandboxed evaluation receives.

:class:`EvaluationRequest` is built in one place (:meth:`EvaluationRequest.build`) and travels
typed from the pool through the Ray actor, which adds its machine's parts (GPU lock, precompiled
headers); it becomes plain JSON (:meth:`EvaluationRequest.to_json`) only at the sandbox's process
line, where the supervisor reads it. ``timeout_s`` travels inside it.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from evokernel.config.schema import EvaluationConfig, TimingConfig
from evokernel.evaluation.profiles import get_profile, profile_tolerance
from evokernel.tasks import task_globals_overrides
from evokernel.types import Task


@dataclass(frozen=True)
class EvaluationRequest:
    """Everything one sandboxed evaluation needs: the task as source, its variants as global
    overrides, the candidate, and the verifier's settings."""

    task: dict[str, Any]  # name, source, tolerance ({dtype: [atol, rtol]}), nondeterministic
    overrides: list[dict[str, Any]]  # per variant: globals of the task to override
    unseen: dict[str, Any] | None  # a variant the candidate was never shown (None: none found)
    candidate_source: str
    device: str
    seeds: int
    timing: dict[str, Any]  # TimingConfig's fields
    allow_torch: bool
    compile_baseline: str  # evaluation.compile_baseline (EvaluationConfig)
    host_memory_mb: int
    timeout_s: float
    profile: str = "strict"  # the verdict profile (evaluation/profiles.py) it is judged under
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
    # Added by the actor that runs it: its GPU lock ({dir, max_wait_s}) and precompiled headers.
    gpu_lock: dict[str, Any] | None = field(default=None, compare=False)
    torch_pch: str | None = field(default=None, compare=False)
    # The node's compiled-extension cache (evaluation/object_cache.py), added by the actor.
    object_cache: str | None = field(default=None, compare=False)
    # The actor's build-service socket (evaluation.builds=pool: evaluation/build_client.py), added by
    # the actor; None: the supervisor compiles the object cache's misses itself.
    build_pool: str | None = field(default=None, compare=False)

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
            task={
                "name": task.name,
                "source": task.source,
                "tolerance": {k: list(v) for k, v in tolerance.items()},
                "nondeterministic": task.nondeterministic,
            },
            overrides=overrides,
            unseen=unseen_variant(task, overrides[0]) if profile.all_sizes else None,
            candidate_source=source,
            device=device,
            seeds=max(config.seeds if seeds is None else seeds, profile.min_seeds),
            timing=asdict(timing or config.timing),
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

    def to_json(self) -> dict[str, Any]:
        """The plain dict the sandboxed supervisor reads (without ``timeout_s``, which
        :func:`~evokernel.evaluation.sandbox.run_sandboxed` takes beside it and adds)."""
        data = asdict(self)
        data.pop("timeout_s")
        for key in ("gpu_lock", "torch_pch", "object_cache"):
            if data[key] is None:
                data.pop(key)
        if self.mode == "candidate":
            data.pop("mode")
        return data


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
