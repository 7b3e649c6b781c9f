"""Progress for machines and for quiet runs: ``--json-events`` and ``--quiet``.

``--json-events`` writes one JSON object per line for every reporter call, so other tools (a
scheduler, a notebook, ``jq``) can follow a run: ``{"event": kind, "run": id, "t": seconds, ...}``
with kinds ``message``, ``start``, ``evaluated``, ``mutation_failed``, ``task_done``, ``stopping``,
``pool_health`` and ``finish``. Candidates appear as ids, operator, parents and verdict, never source."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from evokernel.run.progress import ProgressPrinter
from evokernel.types import Scored, Task

if TYPE_CHECKING:
    from evokernel.config.schema import ExperimentConfig
    from evokernel.db import SolutionLibrary
    from evokernel.run.engine import Evaluator
    from evokernel.run.runner import RunSummary


def scored_dict(sc: Scored | None) -> dict[str, Any] | None:
    if sc is None:
        return None
    ev = sc.evaluation
    return {
        "candidate": sc.candidate.id,
        "operator": sc.candidate.operator,
        "parents": list(sc.candidate.parents),
        "generation": sc.candidate.generation,
        "island": sc.candidate.island,
        "status": ev.status.value if ev else "pending",
        "reason": ev.reason if ev else "",
        "stage": ev.stage if ev else "",
        "speedup_eager": ev.speedup_eager if ev and ev.ok else None,
        # Its 95 % interval (None: not measured paired) and whether it was confirmed before promotion.
        "speedup_low": ev.speedup_low if ev and ev.ok else None,
        "speedup_high": ev.speedup_high if ev and ev.ok else None,
        "confirmed": bool(ev and ev.ok and ev.confirmed),
        "speedup_compile": ev.speedup_compile if ev and ev.ok else None,
        "runtime_ms": ev.runtime_ms if ev else None,
    }


def _plain(value: Any) -> Any:
    if isinstance(value, Scored):
        return scored_dict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


class JsonEvents:
    """A :class:`~evokernel.report.Reporter` writing JSON lines."""

    def __init__(self, stream: TextIO | None = None, label: dict[str, Any] | None = None) -> None:
        self.stream = stream or sys.stdout
        self.label = label or {}
        self.run_id = ""
        self._t0 = time.monotonic()

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        record = {"event": kind, "run": self.run_id, "t": round(time.monotonic() - self._t0, 3), **self.label}
        record.update(_plain(data))
        print(json.dumps(record), file=self.stream, flush=True)

    def say(self, message: str) -> None:
        self._emit("message", {"text": message})

    def start(
        self,
        run_id: str,
        config: ExperimentConfig,
        tasks: list[Task],
        pool: Evaluator,
        library: SolutionLibrary,
    ) -> None:
        self.run_id = run_id
        self._emit(
            "start",
            {
                "name": config.name,
                "strategy": config.strategy.name,
                "tasks": [t.name for t in tasks],
                "budget": {"evaluations": config.budget.evaluations, "usd": config.budget.usd},
                "pool": {"size": pool.size, "device": getattr(pool, "device", "in-process")},
            },
        )

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "mutation_failed":
            data = {"task": data.get("task"), "error": str(data.get("error"))}
        self._emit(kind, data)

    def finish(self, summary: RunSummary, tasks: list[Task]) -> None:
        self._emit(
            "finish",
            {"interrupted": summary.interrupted, "stopped": summary.stopped, "best": summary.best},
        )


def prefixed(prefix: str, message: str) -> str:
    """Every non-empty line of ``message`` after ``prefix`` (a sweep's cell); as is without one."""
    if not prefix:
        return message
    return "\n".join(f"{prefix} {line}" if line else line for line in message.split("\n"))


class QuietPrinter(ProgressPrinter):
    """``--quiet``: nothing while the run goes, the closing table at the end."""

    def __init__(self, stream: TextIO | None = None, prefix: str = "") -> None:
        super().__init__(stream)
        self._closing = False
        self.prefix = prefix  # a sweep's cell: its lines say which, and the sweep says how to resume
        self.resume_hint = not prefix

    def say(self, message: str) -> None:
        if self._closing:
            super().say(prefixed(self.prefix, message))

    def event(self, kind: str, data: dict[str, Any]) -> None:
        pass

    def finish(self, summary: RunSummary, tasks: list[Task]) -> None:
        self._closing = True
        super().finish(summary, tasks)
