"""A reader/writer lock per GPU across processes, so no GPU work overlaps a timing.

Several candidates of one evaluator actor are in flight at once, each in its own supervisor and
worker processes (separate CUDA contexts, which the GPU time-slices). Building and correctness
checking may overlap; a timing may not: another context's kernels running during a timed loop
stretch it. So the trusted supervisor holds this lock around GPU work:

* **shared** around work that may overlap other work (model set-up at a variant's sizes, a
  correctness trial and the supervisor's own reference run),
* **exclusive** around timing (the candidate's timed loop, and eager/``torch.compile`` baselines).

Two steps take no lock although they touch the GPU, because they are mostly CPU work that, held
shared, stalled every timing behind them: creating the two CUDA contexts (~0.3 s each) and the
candidate's warm-up call at a variant's sizes, in which Triton compiles its kernels (1-4 s of CPU
per candidate). On the H100 with 8 candidates in flight, the first trial of each variant (JIT builds
inside) took a median 3.3 s under the shared lock, and a candidate waited a median 14.9 s (up to 26
s) for the lock (2026-11-23, docs/benchmarks.md). What a timing may now overlap is another
candidate's warm-up call, or a trial whose hold was released early (below), and a slow
candidate's call runs for seconds, through a whole window (the H200 runs of 2026-11-26: 9 of 41
windows, the eager reference a median 2.15x slow); so the window first drains the GPU and gives
itself up when it will not drain (timing_window.quiet_window).

Two ``flock`` files in the actor's lock directory implement it with writer preference: a timing
first takes the *turnstile* exclusively and keeps it until it holds the *gate* exclusively, while
shared holders pass through the turnstile on their way in; so once a timing waits, no new shared
holder starts and the timing waits at most for the trials already running (each well under a
second on a GPU), never for whole evaluations. ``flock`` locks die with their process, so a
killed supervisor never leaves the GPU locked.

Waits poll with non-blocking ``flock`` (1 ms, backing off to 10 ms) so they can respect a deadline.
Waiting is the pool's doing, not the candidate's: the supervisor adds its waits to the
candidate's deadline and records them as ``queue`` time rather than in the stage it waited in. The
total wait per evaluation is bounded by ``max_wait_s`` (the pool sets the evaluation timeout);
past that the evaluation ends as a ``timeout`` that says the GPU was busy.

**A stuck holder must not stall the GPU.** A candidate that hangs inside a trial (an infinite
loop, a hung kernel) would hold its shared lock until its own timeout, and every timing behind it
would wait that long. So a hold is released early, by a timer in the supervisor, after
``SHARED_PATIENCE_S`` (trials take well under a second on a GPU) or ``EXCLUSIVE_PATIENCE_S``
(a timing is capped near 1.5 s; a baseline with ``torch.compile`` of a level-3 model takes up to
~60 s); the candidate keeps running until its timeout, no longer protected, and
``details["gpu_lock"]["released_early"]`` counts it. A stall then costs the GPU at most the
patience once, not once per waiting timing.

The lock is not a security boundary: a hostile worker running as the same user could take the
gate itself and stall other candidates' timings until its own timeout kills it (the lock is then
released). It cannot change any verdict, because the verdict is computed by the supervisor.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evokernel.evaluation.quiet_link import QuietLink
from evokernel.exceptions import EvaluationError

if TYPE_CHECKING:
    from evokernel.evaluation.request import EvaluationRequest

# Which lock a supervisor command needs: GPU work that may overlap (shared) or a timing (exclusive).
SHARED_OPS = frozenset({"variant", "trial", "reference", "profile"})
EXCLUSIVE_OPS = frozenset({"time", "baselines", "counters"})
POLL_S = (0.001, 0.010)
SHARED_PATIENCE_S = 5.0
EXCLUSIVE_PATIENCE_S = 60.0


class LockWaitExceeded(EvaluationError):
    """The evaluation waited longer than its ``max_wait_s`` for the GPU in total."""


class GpuLock:
    """One supervisor's handle on its actor's GPU lock. ``directory`` None: a no-op (the cold
    path and ``evokernel verify``, where nothing else runs beside the evaluation)."""

    def __init__(
        self, directory: Path | None, max_wait_s: float = float("inf"), quiet: str | None = None
    ) -> None:
        self.directory = directory
        self.max_wait_s = max_wait_s
        # The node's quiet-window keeper (quiet.py): the rest of the node is stopped while this
        # holds exclusively; connected now, so this evaluation is one the others' windows stop.
        self.quiet = QuietLink(quiet)
        self.waited_s = 0.0
        self.exclusive_s = 0.0
        self.shared_s = 0.0
        self.released_early = 0
        self._fds: tuple[int, int] | None = None
        self._generation = 0
        self._guard = threading.Lock()

    @classmethod
    def from_request(cls, request: EvaluationRequest) -> GpuLock:
        spec = request.gpu_lock
        if spec is None:
            return cls(None)
        return cls(Path(spec.dir), spec.max_wait_s, spec.quiet)

    def _files(self) -> tuple[int, int]:
        if self._fds is None:
            assert self.directory is not None
            flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
            turnstile = os.open(self.directory / "turnstile.lock", flags, 0o600)
            gate = os.open(self.directory / "gate.lock", flags, 0o600)
            self._fds = (turnstile, gate)
        return self._fds

    @contextlib.contextmanager
    def hold(self, op: str) -> Iterator[None]:
        """Hold the lock ``op`` needs for the duration of the block (no lock for other ops)."""
        exclusive = op in EXCLUSIVE_OPS
        if self.directory is None or not (exclusive or op in SHARED_OPS):
            yield
            return
        turnstile, gate = self._files()
        start = time.monotonic()
        if exclusive:
            self._acquire(turnstile, fcntl.LOCK_EX, start)
            try:
                self._acquire(gate, fcntl.LOCK_EX, start)
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        else:
            self._acquire(turnstile, fcntl.LOCK_EX, start)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            self._acquire(gate, fcntl.LOCK_SH, start)
        acquired = time.monotonic()
        self.waited_s += acquired - start
        generation = self._generation
        patience = EXCLUSIVE_PATIENCE_S if exclusive else SHARED_PATIENCE_S
        timer = threading.Timer(patience, self._release_early, (gate, generation))
        timer.daemon = True
        timer.start()
        try:
            with self.quiet.window() if exclusive else contextlib.nullcontext():
                yield
        finally:
            timer.cancel()
            with self._guard:
                self._generation += 1
                fcntl.flock(gate, fcntl.LOCK_UN)
            held = time.monotonic() - acquired
            if exclusive:
                self.exclusive_s += held
            else:
                self.shared_s += held

    def wait(self, seconds: float) -> None:
        """Wait for the GPU without holding it (a timing window given up, timing_window.quiet_window):
        the pool's wait, not the candidate's, so it counts in ``waited_s`` as a lock wait does."""
        time.sleep(seconds)
        self.waited_s += seconds

    def _release_early(self, gate: int, generation: int) -> None:
        with self._guard:
            if generation == self._generation:  # still the same hold
                fcntl.flock(gate, fcntl.LOCK_UN)
                self._generation += 1
                self.released_early += 1

    def _acquire(self, fd: int, mode: int, start: float) -> None:
        pause = POLL_S[0]
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if self.waited_s + time.monotonic() - start > self.max_wait_s:
                    self.waited_s += time.monotonic() - start
                    raise LockWaitExceeded(
                        f"waited {self.waited_s:.0f} s for the GPU (other candidates' timings); "
                        "the evaluator is overloaded"
                    ) from None
                time.sleep(pause)
                pause = min(POLL_S[1], pause * 2)

    def summary(self) -> dict[str, Any]:
        return {
            "wait_s": round(self.waited_s, 4),
            "exclusive_s": round(self.exclusive_s, 4),
            "shared_s": round(self.shared_s, 4),
            "released_early": self.released_early,
            **({"quiet": self.quiet.record} if self.quiet.record else {}),
        }
