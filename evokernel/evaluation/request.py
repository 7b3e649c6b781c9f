"""The request a sandboxed evaluation receives: plain JSON, so it can cross Ray and process lines."""

from __future__ import annotations

import ast
from dataclasses import asdict
from typing import Any

from evokernel.config.schema import EvaluationConfig, TimingConfig
from evokernel.evaluation.profiles import get_profile, profile_tolerance
from evokernel.tasks import task_globals_overrides
from evokernel.types import Task


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
    """Everything the harness needs; the task travels as source, the variants as global overrides.

    ``evaluation`` supplies the verifier settings (``allow_torch``, ``compile_baseline``,
    ``host_memory_mb``, ``profile``); ``seeds`` and ``timing`` win over it when given. The
    profile (evaluation/profiles.py) decides the size variants, the least number of seeds and the
    tolerance. ``baselines`` is a cache entry from :mod:`evokernel.evaluation.baselines`.
    ``static_checks=False`` is for tests of the run-time layers only.
    """
    config = evaluation or EvaluationConfig()
    profile = get_profile(config.profile)
    variants = 1 + len(task.variants) if profile.all_sizes else 1
    overrides = [task_globals_overrides(task, scale, v) for v in range(variants)]
    tolerance = profile_tolerance(profile, task.tolerance, frozenset(task.tolerance_set))
    return {
        "task": {
            "name": task.name,
            "source": task.source,
            "tolerance": {k: list(v) for k, v in tolerance.items()},
            "nondeterministic": task.nondeterministic,
        },
        "profile": profile.name,
        "overrides": overrides,
        "unseen": unseen_variant(task, overrides[0]) if profile.all_sizes else None,
        "candidate_source": source,
        "device": device,
        "seeds": max(seeds, profile.min_seeds),
        "timing": asdict(timing or config.timing),
        "allow_torch": config.allow_torch,
        "compile_baseline": config.compile_baseline,
        "host_memory_mb": config.host_memory_mb,
        "isolation": config.isolation,
        "baselines": baselines,
        "static_checks": static_checks,
    }


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
