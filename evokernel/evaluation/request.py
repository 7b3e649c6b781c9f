"""The request a sandboxed evaluation receives: plain JSON, so it can cross Ray and process lines."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from evokernel.config_schema import TimingConfig
from evokernel.tasks import task_globals_overrides
from evokernel.types import Task


def build_request(
    task: Task,
    source: str,
    *,
    device: str,
    scale: str,
    seeds: int = 2,
    timing: TimingConfig | None = None,
) -> dict[str, Any]:
    """Everything the harness needs; the task travels as source, the variants as global overrides."""
    return {
        "task": {
            "name": task.name,
            "source": task.source,
            "tolerance": {k: list(v) for k, v in task.tolerance.items()},
            "nondeterministic": task.nondeterministic,
        },
        "overrides": [task_globals_overrides(task, scale, v) for v in range(1 + len(task.variants))],
        "candidate_source": source,
        "device": device,
        "seeds": seeds,
        "timing": asdict(timing or TimingConfig()),
    }
