"""The worker's side of the timing stage: the candidate's blocks of a paired timing
(:mod:`evokernel.evaluation.pairing`), in three phases the supervisor drives.

* ``settle``: the timed inputs (buffers refilled from the ``rotation`` seeds' values before every
  call, outside the timed window) and the warm-up; answers one call's milliseconds.
* ``block``: ``calls`` timed calls; answers their milliseconds. The supervisor times the eager
  reference's block in its own process between two of these.
* ``finish``: the host-clock and CUDA-graph figures (timing.finish_cuda), the facts of every timed
  call, then one call on the ``check_seed``'s values in the same buffers, whose output the
  supervisor compares with its reference: a result cached by the inputs' identity (object,
  pointer, shape) was timed as nearly free and comes out stale there (issue 33); a version-keyed
  cache recomputes every call, since each refill bumps the tensors' version counters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from evokernel.evaluation.block_timer import BlockTimer
from evokernel.evaluation.feedback import trim_traceback
from evokernel.evaluation.loading import clone, make_inputs
from evokernel.evaluation.observe import Observation
from evokernel.evaluation.request_parts import timing_from_json
from evokernel.evaluation.timing import TimingResult, TimingSettings, finish_cuda


class TimingFailure(Exception):
    """The candidate raised while being timed: ``reason`` and ``feedback`` for its verdict."""

    def __init__(self, reason: str, feedback: str) -> None:
        super().__init__(reason)
        self.reason, self.feedback = reason, feedback


@dataclass
class CandidateTiming:
    run: Callable[[], Any]
    buffers: list[Any]
    observed: Observation
    calls: list[int]
    settings: TimingSettings
    timer: BlockTimer

    @classmethod
    def start(
        cls, model: Any, task: Any, device: torch.device, snapshot: dict[str, Any], command: dict[str, Any]
    ) -> CandidateTiming:
        sets = [make_inputs(task, int(seed), device) for seed in command["rotation"]]
        buffers = clone(sets[0])
        calls, turn = [0], [0]

        def refill() -> None:
            turn[0] += 1
            copy_values(buffers, sets[turn[0] % len(sets)])

        def run() -> Any:
            out = model(*buffers)
            # A call counts once it returned: one that raised inside the harness's own graph
            # capture (timing._time_graph; replaying the model's graph there is refused by CUDA)
            # produced nothing, and a legit per-shape graph model was refused for it (issue 34).
            calls[0] += 1
            return out

        settings = timing_from_json(command["settings"])  # every field, or an error naming it
        observed = Observation(snapshot, device)
        return cls(run, buffers, observed, calls, settings, BlockTimer(run, device, settings, refill))

    def settle(self) -> float:
        """One call's milliseconds, after the warm-up."""
        return self._guarded(self.timer.settle, "while warming up for timing")

    def block(self, calls: int) -> list[float]:
        return self._guarded(lambda: self.timer.block(calls), "while timing")

    def finish(
        self, device: torch.device, pool_streams: list[torch.cuda.Stream]
    ) -> tuple[TimingResult, dict[str, Any]]:
        """The timing's figures and the facts of its calls (the check call is the worker's)."""

        def figures() -> Any:
            result = self.timer.result()
            return finish_cuda(self.run, device, self.settings, result) if device.type == "cuda" else result

        result = self._guarded(figures, "while timing")
        self.timer.close()
        self.observed.work_left(pool_streams)
        return result, self.observed.facts(self.calls[0])

    def _guarded(self, step: Callable[[], Any], during: str) -> Any:
        with torch.no_grad():
            try:
                return step()
            except Exception as exc:
                raise TimingFailure(f"{type(exc).__name__} {during}", trim_traceback(exc)) from exc


def copy_values(buffers: list[Any], values: list[Any]) -> None:
    for buffer, value in zip(buffers, values, strict=True):
        if isinstance(buffer, torch.Tensor):
            buffer.copy_(value)
