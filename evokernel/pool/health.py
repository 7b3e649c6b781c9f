"""What the evaluation pool reports about itself: throughput, queueing and where time goes.

``EvaluatorPool.health()`` returns :meth:`PoolStats.snapshot` plus the pool's own figures; the
engine passes it to the reporter every ``HEALTH_EVERY_S``, which prints :func:`health_line`.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from evokernel.types import Evaluation

# The stages of the breakdown, in the order an evaluation passes them.
BREAKDOWN = ("queue", "start", "build", "correctness", "timing")
RATE_WINDOW_S = 60.0


class PoolStats:
    def __init__(self) -> None:
        self.completed = 0
        self.deduplicated = 0
        # Evaluations the harness itself failed (out of GPU memory), run again alone.
        self.harness_faults = 0
        self._finished_at: deque[float] = deque()
        self._stage_sum = dict.fromkeys(BREAKDOWN, 0.0)
        self._stage_count = dict.fromkeys(BREAKDOWN, 0)

    def record(self, evaluation: Evaluation) -> None:
        now = time.monotonic()
        self.completed += 1
        self._finished_at.append(now)
        for stage, seconds in stage_seconds(evaluation).items():
            self._stage_sum[stage] += seconds
            self._stage_count[stage] += 1

    def per_minute(self) -> float:
        """Evaluations finished in the last minute."""
        now = time.monotonic()
        while self._finished_at and now - self._finished_at[0] > RATE_WINDOW_S:
            self._finished_at.popleft()
        return float(len(self._finished_at))

    def snapshot(self) -> dict[str, Any]:
        means = {
            s: round(self._stage_sum[s] / self._stage_count[s], 3) if self._stage_count[s] else None
            for s in BREAKDOWN
        }
        return {
            "completed": self.completed,
            "per_min": self.per_minute(),
            "stage_mean_s": means,
            "deduplicated": self.deduplicated,
            "harness_faults": self.harness_faults,
        }


def stage_seconds(evaluation: Evaluation, key: str = "seconds") -> dict[str, float]:
    """Seconds per breakdown stage from ``details["stages"]`` (stages an evaluation never reached
    are absent, so means are over the evaluations that reached them); ``key="cpu_s"``: the
    core-seconds the supervisor recorded instead (stages without them are absent)."""
    out: dict[str, float] = {}
    for entry in evaluation.details.get("stages", []):
        stage = entry.get("stage")
        if stage in BREAKDOWN and key in entry:
            out[stage] = out.get(stage, 0.0) + float(entry[key])
    return out


def health_line(health: dict[str, Any]) -> str:
    means = health.get("stage_mean_s", {})
    stages = " ".join(f"{s} {means[s]:.2g}s" for s in BREAKDOWN if means.get(s) is not None)
    extra = []
    if health.get("nodes", 1) > 1:
        extra.append(f"{health['nodes']} nodes")
    if health.get("actors_added"):
        extra.append(f"{health['actors_added']} actor(s) on joining nodes")
    if health.get("replacements"):
        extra.append(f"{health['replacements']} actor(s) lost")
    if health.get("deduplicated"):
        extra.append(f"{health['deduplicated']} deduplicated")
    return (
        f"pool: {health['workers']} worker(s) on {health['device']} x {health['concurrency_per_worker']}, "
        f"{health['in_flight']}/{health['capacity']} busy, {health['queued']} queued, "
        f"{health['completed']} done, {health['per_min']:.0f}/min"
        + (f"; mean {stages}" if stages else "")
        + (f"; {', '.join(extra)}" if extra else "")
    )
