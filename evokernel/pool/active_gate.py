"""How many of an evaluator actor's evaluations are active on its node at once (issue 37).

Why: under ``evaluation.builds=pool`` a candidate spends most of its life waiting for a build
that runs on another node (63 s of a ~78 s evaluation in session 23's split-cluster run), and
while it waits it uses none of the GPU node's cores. Counted against the actor's
``concurrency`` for that wait, 16 in flight capped the split cluster at ~12 candidates/min however
many build nodes it had. So the actor admits ``concurrency + builds_ahead`` evaluations, and this
gate keeps at most ``concurrency`` of them *active*: an evaluation enters before its sandbox
starts and leaves when it ends; a supervisor's pooled build steps out of the gate for the wait
(:meth:`step_out`) and back in when its object is back, ahead of evaluations not yet started
(they have not used the cluster's cores yet; the returning one has). A returning build waits at
most its own deadline, then enters over the limit rather than lose the build.

The count is per build, not per evaluation (the build service cannot tell which evaluation sent
a job): an import that sends two builds at once steps out twice and back in twice, so the count
can be one low for the overlap, never wrong after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evokernel.config.schema import EvaluationConfig


class ActiveGate:
    """At most ``limit`` active evaluations (0: no limit, the gate only counts)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = self.out = self.peak_active = self.peak_out = 0
        self.over_limit = 0  # returning builds that entered over the limit at their deadline
        self._returning = 0
        self._cond = threading.Condition()

    def _room(self, returning: bool) -> bool:
        if self.limit <= 0:
            return True
        return self.active < self.limit and (returning or self._returning == 0)

    def _enter(self, returning: bool, timeout_s: float | None) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            if returning:
                self._returning += 1
            try:
                while not self._room(returning):
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        self.over_limit += 1
                        break
                    self._cond.wait(left)
            finally:
                if returning:
                    self._returning -= 1
            self.active += 1
            self.peak_active = max(self.peak_active, self.active)
            self._cond.notify_all()  # a waiting new evaluation may now see no returning build

    def _leave(self) -> None:
        with self._cond:
            self.active -= 1
            self._cond.notify_all()

    @contextmanager
    def evaluation(self) -> Iterator[float]:
        """Held for one evaluation; yields the seconds it waited to start."""
        started = time.monotonic()
        self._enter(returning=False, timeout_s=None)
        try:
            yield time.monotonic() - started
        finally:
            self._leave()

    @contextmanager
    def step_out(self, until: float) -> Iterator[None]:
        """Around a wait on a build elsewhere; back in by ``until`` (``time.monotonic()``), over
        the limit if need be."""
        with self._cond:
            self.out += 1
            self.peak_out = max(self.peak_out, self.out)
        self._leave()
        try:
            yield
        finally:
            with self._cond:
                self.out -= 1
            self._enter(returning=True, timeout_s=max(0.0, until - time.monotonic()))

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {
                "limit": self.limit,
                "active": self.active,
                "waiting_on_builds": self.out,
                "peak_active": self.peak_active,
                "peak_waiting_on_builds": self.peak_out,
                "over_limit": self.over_limit,
            }


def builds_ahead(config: EvaluationConfig, device: str, concurrency: int) -> int:
    """Evaluations an actor admits beyond the ``concurrency`` it keeps active. Builds step out
    through the node's object cache, so none without it; ``evaluation.builds_ahead`` when set;
    automatically as many again where a build is not the active evaluations' kind of work (on
    the pool, or on a GPU node's cores while the active ones check and time on the GPU), and none
    for local builds on a CPU device, whose evaluations use the same cores."""
    if not config.object_cache:
        return 0
    if config.builds_ahead >= 0:
        return config.builds_ahead
    return concurrency if config.builds == "pool" or device == "cuda" else 0
