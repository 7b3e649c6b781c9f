"""Which progress a command shows: live (rich) on a terminal, plain lines otherwise (CI, logs,
``| tee``), ``--quiet`` (only the closing table) or ``--json-events`` (one JSON object per line)."""

from __future__ import annotations

import sys
from typing import TextIO

from evokernel.report.events import JsonEvents, QuietPrinter, prefixed
from evokernel.run.progress import ProgressPrinter, Reporter


class CellPrinter(ProgressPrinter):
    """A run's plain progress lines, each prefixed with its cell."""

    resume_hint = False

    def __init__(self, prefix: str, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self.prefix = prefix

    def say(self, message: str) -> None:
        super().say(prefixed(self.prefix, message))


class Progress:
    """A factory of per-run reporters (``label``: a sweep's cell) and a ``close`` for the end."""

    def __init__(self, mode: str, stream: TextIO | None = None) -> None:
        self.mode = mode
        self.stream = stream or sys.stdout
        self._board = None
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
            return CellPrinter(f"[cell {label}]", self.stream)
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
