"""A task's eager and ``torch.compile`` baselines, measured once per pool and cached.

Without this, every candidate of a task whose baselines are not in the library yet would measure
them itself (the first ``concurrency`` candidates of a run at once, each timing under the GPU's
exclusive lock, ``torch.compile`` included). Instead the pool sends one request of its own per task
(``"mode": "baselines"``: trusted code only, see :mod:`evokernel.evaluation.harness`) before the
task's first candidate; every candidate waits for it and then carries the figures in its request.
Measured figures go to the :class:`BaselineStore` (the run's library), keyed by device and
software versions, so later runs and resumed ones start with them. If the measurement fails (the
reference itself raises), candidates measure as before and report the failure in their verdict.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from evokernel.evaluation.baselines import KINDS
from evokernel.pool.actor import Hardware
from evokernel.types import Evaluation, Status, Task

log = logging.getLogger(__name__)


class BaselineStore(Protocol):
    """Where baselines are cached across runs: :class:`evokernel.db.SolutionLibrary` is one."""

    def get_baseline(
        self, task_hash: str, device: str, versions: str, kind: str, variant: str = ""
    ) -> float | None: ...

    def put_baseline(
        self,
        task_hash: str,
        device: str,
        versions: str,
        kind: str,
        median_ms: float,
        iqr_ms: float = 0.0,
        variant: str = "",
    ) -> None: ...


class BaselineCache:
    """``measure(task, cached)`` runs a baselines request on the pool; ``hardware()`` names the
    device and software the store's entries are keyed by (``scale`` is the sizes' variant)."""

    def __init__(
        self,
        store: BaselineStore | None,
        *,
        scale: str,
        compile_on: bool,
        hardware: Callable[[], Awaitable[Hardware]],
        measure: Callable[[Task, dict[str, Any] | None], Awaitable[Evaluation]],
        profiling: str = "none",
    ) -> None:
        self.backing = store
        # evaluation.profiling: the baselines job also profiles the reference, once per task and
        # device (evaluation/profiling/stage.py); a task whose profile is stored is not re-run.
        self.profiling = profiling
        self.scale, self.compile_on = scale, compile_on
        self._hardware, self._measure = hardware, measure
        self._entries: dict[str, dict[str, Any] | None] = {}
        self._jobs: dict[str, asyncio.Future[None]] = {}

    def known(self, task: Task) -> dict[str, Any] | None:
        return self._entries.get(task.source_hash)

    async def ensure(self, task: Task) -> None:
        """Measure the task's baselines once (all its first candidates wait for that one job)."""
        digest = task.source_hash
        if digest in self._entries:
            return
        job = self._jobs.get(digest)
        if job is None:
            job = asyncio.ensure_future(self._fill(task))
            self._jobs[digest] = job
        await asyncio.shield(job)

    async def _fill(self, task: Task) -> None:
        cached = await self._from_store(task)
        needed = ("eager", "compile") if self.compile_on else ("eager",)
        if cached is None or not all(cached.get(kind) for kind in needed) or not await self._profiled(task):
            evaluation = await self._measure(task, cached)
        else:
            evaluation = None
        # Set only now: until then the task's other first candidates wait on this job (ensure()).
        self._entries[task.source_hash] = cached
        if evaluation is None:
            return
        timing = evaluation.details.get("timing") or {}
        if evaluation.status is not Status.CORRECT or not timing.get("baseline_key"):
            log.warning("baselines of task %s: %s; candidates measure them", task.name, evaluation.reason)
            return
        self.store(task, evaluation)

    async def _profiled(self, task: Task) -> bool:
        """The reference profile the run's level asks for is stored (or none is asked for)."""
        if self.profiling == "none" or self.backing is None or not hasattr(self.backing, "task_profile"):
            return True
        hw = await self._hardware()
        return self.backing.task_profile(task.source_hash, hw.label, self.profiling) is not None

    async def _from_store(self, task: Task) -> dict[str, Any] | None:
        if self.backing is None:
            return None
        hw = await self._hardware()
        out: dict[str, Any] = {"key": {"device": hw.label, "versions": hw.versions}}
        for kind in KINDS:
            median = self.backing.get_baseline(task.source_hash, hw.label, hw.versions, kind, self.scale)
            out[kind] = _entry(median) if median else None
        return out

    def store(self, task: Task, evaluation: Evaluation) -> None:
        """Keep what ``evaluation`` measured (not what it was given), in the store and for the
        task's next candidates: after a failed baselines job the first candidate that measures
        them spares every later one the exclusive GPU time."""
        timing = evaluation.details.get("timing") or {}
        key = timing.get("baseline_key")
        profile = evaluation.details.get("reference_profiling")
        if key and isinstance(profile, dict) and profile.get("status") == "ok" and self.backing is not None:
            put = getattr(self.backing, "put_task_profile", None)
            if put is not None:
                put(task.source_hash, key["device"], key["versions"], str(profile.get("level")), profile)
        fresh = {kind: timing[kind] for kind in KINDS if timing.get(kind) and not timing[kind].get("cached")}
        if not key or not fresh:
            return
        entry = {**{kind: None for kind in KINDS}, **(self._entries.get(task.source_hash) or {}), "key": key}
        for kind, measured in fresh.items():
            entry[kind] = _entry(measured["median_ms"], measured.get("iqr_ms", 0.0))
            if self.backing is not None:
                self.backing.put_baseline(
                    task.source_hash,
                    key["device"],
                    key["versions"],
                    kind,
                    measured["median_ms"],
                    measured.get("iqr_ms", 0.0),
                    self.scale,
                )
        self._entries[task.source_hash] = entry


def _entry(median_ms: float, iqr_ms: float = 0.0) -> dict[str, Any]:
    """A cached figure as the harness takes it (reps and CV are the measuring run's, not kept)."""
    return {"median_ms": median_ms, "iqr_ms": iqr_ms, "cv": 0.0, "reps": 0}
