"""The worker's side of the run-time rules: the facts around one stretch of its work (a call, the
timed loop, the candidate's import), every field of :class:`evokernel.evaluation.rules.CallFacts`
measured, none filled in (rules.py says which rule judges which kind of call)."""

from __future__ import annotations

from typing import Any

import torch

from evokernel.evaluation import integrity


class Observation:
    """Started before the work; :meth:`facts` after it. ``snapshot``: the harness objects as
    they were before the candidate was imported (integrity.harness_snapshot)."""

    def __init__(self, snapshot: dict[str, Any], device: torch.device) -> None:
        self.snapshot = snapshot
        self.threads, self.children = integrity.python_threads(), integrity.child_processes()
        self.launches, self.failed = integrity.launches(), integrity.failed_launches()
        cuda = device.type == "cuda" and torch.cuda.is_initialized()
        self.device = device
        self.stream = torch.cuda.current_stream(device) if cuda else None
        self.left_running: tuple[int, float] = (0, 0.0)

    def work_left(self, pool_streams: list[torch.cuda.Stream]) -> None:
        """Right after the work returns, before anything synchronizes: work forked onto other
        streams and not joined back ends after the work's own stream, unseen by a timer on it."""
        if self.stream is not None:
            self.left_running = integrity.streams_left_running(pool_streams, self.stream)

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
