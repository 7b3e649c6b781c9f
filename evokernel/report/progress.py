"""Which progress a command shows: live (rich) on a terminal, plain lines otherwise (CI, logs,
``| tee``), ``--quiet`` (only the closing table) or ``--json-events`` (one JSON object per line)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from evokernel.pool.health import health_line
from evokernel.report.events import JsonEvents, QuietPrinter, prefixed
from evokernel.run.job import HEALTH_EVERY_S
from evokernel.run.progress import ProgressPrinter, Reporter


class PoolLine:
    """The pool line of a sweep's cells, which share one pool: every cell's engine reports the pool
    every ``HEALTH_EVERY_S``, and a piped sweep printed the same line once per cell each time. One
    print per interval, for the whole sweep and without a cell prefix, is what it says."""

    def __init__(self, every_s: float = HEALTH_EVERY_S * 0.9) -> None:
        # 0.9: the cells' timers drift apart; a full interval would skip every other one.
        self.every_s = every_s
        self._printed_at = float("-inf")

    def due(self) -> bool:
        now = time.monotonic()
        if now - self._printed_at < self.every_s:
            return False
        self._printed_at = now
        return True


class CellPrinter(ProgressPrinter):
    """A run's plain progress lines, each prefixed with its cell; the pool line once per sweep
    (``pool_line``, shared by the cells)."""

    resume_hint = False

    def __init__(self, prefix: str, stream: TextIO | None = None, pool_line: PoolLine | None = None) -> None:
        super().__init__(stream)
        self.prefix = prefix
        self.pool_line = pool_line or PoolLine()

    def say(self, message: str) -> None:
        super().say(prefixed(self.prefix, message))

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "pool_health":
            if self.pool_line.due():
                ProgressPrinter.say(
                    self, f"[{time.monotonic() - self._t0:6.1f}s] {health_line(data['health'])}"
                )
            return
        super().event(kind, data)


class Progress:
    """A factory of per-run reporters (``label``: a sweep's cell) and a ``close`` for the end."""

    def __init__(self, mode: str, stream: TextIO | None = None) -> None:
        self.mode = mode
        self.stream = stream or sys.stdout
        self._board = None
        self._pool_line = PoolLine()  # a sweep's cells share the pool, so its line too
        if mode == "live":
            from rich.console import Console

            from evokernel.report.live import LiveBoard

            self._board = LiveBoard(Console(file=self.stream))

    def reporter(self, label: str = "") -> Reporter:
        if self.mode == "json":
            return JsonEvents(self.stream, {"cell": label} if label else None)
        if self.mode == "quiet":
            return QuietPrinter(self.stream, f"[cell {label}]" if label else "")
        if self._board is not None:
            from evokernel.report.live import LiveRun

            return LiveRun(self._board, label)
        if label:
            return CellPrinter(f"[cell {label}]", self.stream, self._pool_line)
        return ProgressPrinter(self.stream)

    def close(self) -> None:
        if self._board is not None:
            self._board.close()


def progress_for(quiet: bool = False, json_events: bool = False, stream: TextIO | None = None) -> Progress:
    stream = stream or sys.stdout
    if json_events:
        return Progress("json", stream)
    if quiet:
        return Progress("quiet", stream)
    return Progress("live" if stream.isatty() else "plain", stream)
