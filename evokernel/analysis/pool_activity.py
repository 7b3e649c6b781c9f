"""The evaluation pool's health as the library records it: throughput, where evaluation time
goes (queue, start, build, correctness, timing), the GPU lock's share, devices seen, and the
work waiting (pending candidates, proposals still being written).

The pool's live counters (in flight, queued) live in the driver process; what every evaluation
leaves behind -- ``details["stages"]`` and ``details["gpu_lock"]`` -- is enough to tell a viewer
whether the pool keeps up, without a channel into the driver.

Figures are over the run's ``window`` newest evaluations, found per task through
ix_candidates_run_task_generation_status walked backwards, then ix_evaluations_candidate_id; pending and
open counts use ix_candidates_run_task_status and ix_proposals_run_task_state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, EvaluationRow, ProposalRow, RunTaskRow
from evokernel.pool.health import BREAKDOWN

DEFAULT_WINDOW = 500


@dataclass(frozen=True)
class PoolActivity:
    evaluations: int  # in the window
    per_min: float | None  # over the window's time span
    window_start: str | None
    window_end: str | None
    stage_mean_s: dict[str, float | None]
    mean_duration_s: float | None
    # Of the evaluations' summed duration: share spent holding the GPU lock (exclusive + shared)
    # and share spent waiting for it; None when no evaluation used a lock (CPU runs).
    gpu_lock_held_share: float | None
    gpu_lock_wait_share: float | None
    devices: dict[str, int]
    pending_candidates: int
    open_proposals: int


def pool_activity(lib: SolutionLibrary, run_id: str, window: int = DEFAULT_WINDOW) -> PoolActivity:
    c, ev, p = CandidateRow, EvaluationRow, ProposalRow

    def fn(s: Session) -> PoolActivity:
        task_ids = list(s.scalars(select(RunTaskRow.task_id).where(RunTaskRow.run_id == run_id)))
        cand_ids: list[int] = []
        for tid in task_ids:
            cand_ids += s.scalars(
                select(c.id)
                .where(c.run_id == run_id, c.task_id == tid, c.status != "pending")
                .order_by(c.generation.desc(), c.id.desc())
                .limit(window)
            ).all()
        rows: list[Any] = []
        for i in range(0, len(cand_ids), 500):
            rows += s.execute(
                select(ev.id, ev.created_at, ev.duration_s, ev.device, ev.details).where(
                    ev.candidate_id.in_(cand_ids[i : i + 500])
                )
            ).all()
        rows = sorted(rows, key=lambda r: r[0])[-window:]
        pending = open_ = 0
        for tid in task_ids:  # equality on every index column: no scan of the run's other rows
            pending += (
                s.scalar(
                    select(func.count()).where(c.run_id == run_id, c.task_id == tid, c.status == "pending")
                )
                or 0
            )
            open_ += (
                s.scalar(select(func.count()).where(p.run_id == run_id, p.task_id == tid, p.state == "open"))
                or 0
            )
        return _fold(rows, int(pending), int(open_))

    return lib.read(fn)


def _fold(rows: list, pending: int, open_: int) -> PoolActivity:
    sums = dict.fromkeys(BREAKDOWN, 0.0)
    counts = dict.fromkeys(BREAKDOWN, 0)
    devices: dict[str, int] = {}
    held = wait = total = 0.0
    locked = False
    times: list[datetime] = []
    for _id, created, duration, device, details in rows:
        times.append(created)
        total += float(duration or 0.0)
        devices[device or "?"] = devices.get(device or "?", 0) + 1
        details = details or {}
        for entry in details.get("stages", []):
            stage = entry.get("stage")
            if stage in sums:
                sums[stage] += float(entry.get("seconds", 0.0))
                counts[stage] += 1
        lock = details.get("gpu_lock")
        if lock:
            locked = True
            held += float(lock.get("exclusive_s", 0.0)) + float(lock.get("shared_s", 0.0))
            wait += float(lock.get("wait_s", 0.0))
    span = (max(times) - min(times)).total_seconds() if len(times) > 1 else 0.0
    return PoolActivity(
        evaluations=len(rows),
        per_min=(len(rows) - 1) / span * 60 if span > 0 else None,
        window_start=min(times).isoformat(timespec="seconds") if times else None,
        window_end=max(times).isoformat(timespec="seconds") if times else None,
        stage_mean_s={k: round(sums[k] / counts[k], 4) if counts[k] else None for k in BREAKDOWN},
        mean_duration_s=total / len(rows) if rows else None,
        gpu_lock_held_share=held / total if locked and total > 0 else None,
        gpu_lock_wait_share=wait / total if locked and total > 0 else None,
        devices=devices,
        pending_candidates=pending,
        open_proposals=open_,
    )
