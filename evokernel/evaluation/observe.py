"""The worker's side of the run-time rules: the facts around one stretch of its work (a call, the
timed loop, the candidate's import), every field of :class:`evokernel.evaluation.rules.CallFacts`
measured, none filled in (rules.py says which rule judges which kind of call)."""

from __future__ import annotations

import time
from typing import Any

import torch

from evokernel.evaluation import integrity

# A judged call's own stream is held by a GPU sleep queued just before the call, so work the call
# forks onto a stream that waits for its own (``side.wait_stream(current)``, the usual fork) starts
# only once the hold ends, after the call has returned: left unjoined, it is still running when its
# own stream finishes, every time. Without the hold, a side stream's short work often ended before
# the call returned and the check saw it only by chance (session 29, H200: the side-stream hack
# caught at seed 0 under one profile, seed 4 under another, in no trial under strict). The hold is
# twice the previous call's host time, so it outlasts the call's issuing, within these bounds (ms).
HOLD_MS_MIN, HOLD_MS_MAX = 1.0, 50.0
CYCLES_PER_MS = 2_000_000  # 2 GHz, above H100/H200 SM clocks: a hold lasts at least its ms


class Observation:
    """Started before the work; :meth:`facts` after it. ``snapshot``: the harness objects as
    they were before the candidate was imported (integrity.harness_snapshot)."""

    def __init__(self, snapshot: dict[str, Any], device: torch.device, hold_ms: float = 0.0) -> None:
        cuda = device.type == "cuda" and torch.cuda.is_initialized()
        if cuda and hold_ms > 0:
            torch.cuda._sleep(int(hold_ms * CYCLES_PER_MS))  # on the current stream: the call's own
        self.snapshot = snapshot
        self.threads, self.children = integrity.python_threads(), integrity.child_processes()
        self.launches, self.failed = integrity.launches(), integrity.failed_launches()
        self.device = device
        self.stream = torch.cuda.current_stream(device) if cuda else None
        self.left_running: tuple[int, float] = (0, 0.0)
        self.started, self.host_ms = time.perf_counter(), 0.0

    def work_left(self, pool_streams: list[torch.cuda.Stream]) -> None:
        """Right after the work returns, before anything synchronizes: work forked onto other
        streams and not joined back ends after the work's own stream, unseen by a timer on it."""
        self.host_ms = (time.perf_counter() - self.started) * 1e3
        if self.stream is not None:
            self.left_running = integrity.streams_left_running(pool_streams, self.stream)

    def next_hold_ms(self) -> float:
        """The hold for the next judged call: twice this one's host time, within the bounds."""
        return min(max(2 * self.host_ms, HOLD_MS_MIN), HOLD_MS_MAX)

    def facts(self, calls: int = 1) -> dict[str, Any]:
        stream_now = torch.cuda.current_stream(self.device) if self.stream is not None else None
        return {
            "launches": integrity.launches() - self.launches,
            "failed_launches": integrity.failed_launches() - self.failed,
            "last_launch_failure": integrity.last_launch_failure(),
            "streams_left_running": self.left_running[0],
            "left_running_ms": self.left_running[1],
            "new_threads": len(integrity.python_threads() - self.threads),
            "new_processes": len(integrity.child_processes() - self.children),
            "stream_changed": stream_now is not None and stream_now != self.stream,
            "changed_harness": integrity.changed_harness(self.snapshot),
            "calls": calls,
        }
