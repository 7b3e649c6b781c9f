"""The live terminal display (rich): per task evaluations done / budget, best speedup so far, the
pool's health line, LLM cost so far and an ETA from the recent rate.

One :class:`LiveBoard` per process draws every run in it, so a sweep's cells share one display
(one row per cell and task); each run reports through its own :class:`LiveRun`. Messages (run
headers, SIGINT notices, the closing tables) print above the display and stay in the scrollback."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from evokernel.pool.health import health_line
from evokernel.run.progress import ProgressPrinter
from evokernel.types import Scored, Status, Task

if TYPE_CHECKING:
    from evokernel.config.schema import ExperimentConfig
    from evokernel.db import SolutionLibrary
    from evokernel.run.engine import Evaluator
    from evokernel.run.runner import RunSummary

RATE_WINDOW_S = 120.0  # the ETA follows the last two minutes, not the run's slow start
COST_EVERY_S = 2.0  # the LLM cost is read from the library at most this often per run
# The pool line is read from the pool itself at most once per redraw (4/s): the engine's
# pool_health event comes only every 30 s, and the line once stood still at "1 done, 1/min" for
# 108 redraws beside a board counting 39 evaluations.
HEALTH_EVERY_S = 0.25


@dataclass
class TaskState:
    label: str
    task: str
    budget: int
    done: int = 0
    best: str = "-"  # the best speedup with its interval (types.format_speedup)
    correct: int = 0
    last: str = ""
    finished: str = ""


@dataclass
class RunState:
    run_id: str
    library: Any
    usd: float = 0.0
    usd_read_at: float = 0.0
    tasks: list[TaskState] = field(default_factory=list)


def _fmt_s(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class LiveBoard:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.runs: dict[str, RunState] = {}
        self.health = ""
        self.health_at = float("-inf")
        self._t0 = time.monotonic()
        self._recent: deque[float] = deque()
        self._live: Live | None = None
        self._open = 0

    def print(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False)

    def add_run(self, label: str, run: RunState) -> None:
        self.runs[label] = run
        self._open += 1
        if self._live is None:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=True)
            self._live.start()

    def run_done(self) -> None:
        self._open -= 1
        if self._open <= 0:
            self.close()

    def close(self) -> None:
        """Stop drawing (idempotent): also on errors and Ctrl-C, so the cursor comes back."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def evaluated(self, now: float) -> None:
        self._recent.append(now)
        while self._recent and now - self._recent[0] > RATE_WINDOW_S:
            self._recent.popleft()

    def eta(self) -> str:
        remaining = sum(
            max(t.budget - t.done, 0) for r in self.runs.values() for t in r.tasks if not t.finished
        )
        if remaining == 0:
            return "done"
        if len(self._recent) < 2 or self._recent[-1] <= self._recent[0]:
            return "estimating"
        rate = (len(self._recent) - 1) / (self._recent[-1] - self._recent[0])
        return f"~{_fmt_s(remaining / rate)} at {rate * 60:.3g}/min"

    def __rich__(self) -> RenderableType:
        table = Table(expand=False, box=None, pad_edge=False, header_style="bold")
        many = len(self.runs) > 1
        if many:
            table.add_column("cell")
        for name in ("task", "evaluations", "", "best", "correct", "last"):
            table.add_column(name)
        for label, run in self.runs.items():
            for t in run.tasks:
                bar = ProgressBar(total=max(t.budget, 1), completed=min(t.done, t.budget), width=24)
                best = t.best
                last = t.finished or t.last
                cells: list[RenderableType] = [
                    t.task,
                    bar,
                    f"{t.done}/{t.budget}",
                    best,
                    str(t.correct),
                    last,
                ]
                table.add_row(*([label] if many else []), *cells)
        usd = sum(r.usd for r in self.runs.values())
        done = sum(t.done for r in self.runs.values() for t in r.tasks)
        footer = Text(
            f"elapsed {_fmt_s(time.monotonic() - self._t0)} · {done} evaluated · ETA {self.eta()} · "
            f"LLM ${usd:.4f}",
            style="dim",
        )
        parts: list[RenderableType] = [table, footer]
        if self.health:
            parts.append(Text(self.health, style="dim"))
        return Group(*parts)


class LiveRun(ProgressPrinter):
    """A :class:`~evokernel.report.Reporter` feeding a :class:`LiveBoard`; ``label`` names the run
    in a sweep (its cell)."""

    def __init__(self, board: LiveBoard, label: str = "") -> None:
        super().__init__()
        self.board = board
        self.label = label
        self.state: RunState | None = None
        self._tasks: dict[str, TaskState] = {}
        self._pool: Evaluator | None = None

    def say(self, message: str) -> None:
        prefix = f"[cell {self.label}] " if self.label else ""
        self.board.print("\n".join(prefix + line if line else line for line in message.split("\n")))

    def start(
        self,
        run_id: str,
        config: ExperimentConfig,
        tasks: list[Task],
        pool: Evaluator,
        library: SolutionLibrary,
    ) -> None:
        super().start(run_id, config, tasks, pool, library)
        self._pool = pool
        self._tasks = {t.name: TaskState(self.label, t.name, config.budget.evaluations) for t in tasks}
        self.state = RunState(run_id, library, tasks=list(self._tasks.values()))
        for t in tasks:  # a resumed run starts where it was
            st = self._tasks[t.name]
            st.done = library.count_evaluated(run_id, t.name)
            best = next(iter(library.top(run_id, t.name, 1)), None)
            st.best = best.speedup_text if best is not None else "-"
            st.correct = len(library.candidates(run_id, t.name, status=Status.CORRECT))
        self._read_cost(force=True)
        self.board.add_run(self.label or run_id, self.state)

    def _read_cost(self, force: bool = False) -> None:
        state, now = self.state, time.monotonic()
        if state is None or (not force and now - state.usd_read_at < COST_EVERY_S):
            return
        state.usd = float(state.library.llm_usage(state.run_id)["cost_usd"])
        state.usd_read_at = now

    def _read_health(self, force: bool = False) -> None:
        """The pool's figures now (one read per redraw for all runs of the board; ``force``: a
        task's end, so its last frame counts its last evaluation); called from the run's own
        thread, never from rich's refresh thread, which must not touch the pool."""
        now = time.monotonic()
        if self._pool is None or (not force and now - self.board.health_at < HEALTH_EVERY_S):
            return
        self.board.health_at = now
        health = self._pool.health()
        if health:
            self.board.health = health_line(health)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self._read_health(force=kind == "task_done")
        st = self._tasks.get(str(data.get("task", "")))
        if kind == "evaluated" and st is not None:
            sc: Scored = data["scored"]
            ev = sc.evaluation
            st.done = int(data["done"])
            best: Scored | None = data.get("best")
            st.best = best.speedup_text if best is not None and best.speedup else st.best
            st.correct += 1 if ev is not None and ev.ok else 0
            st.last = f"#{sc.candidate.id} {sc.candidate.operator}: " + (
                ev.speedup_text if ev and ev.ok and ev.speedup_eager else (ev.status.value if ev else "")
            )
            self.board.evaluated(time.monotonic())
            self._read_cost()
        elif kind == "task_done" and st is not None:
            st.finished = f"done: {data['reason']}"
        elif kind == "pool_health":
            self.board.health = health_line(data["health"])
            self.board.health_at = time.monotonic()
        elif kind == "stopping":
            self.say(str(data["reason"]))

    def finish(self, summary: RunSummary, tasks: list[Task]) -> None:
        self._read_cost(force=True)
        self.board.run_done()
        super().finish(summary, tasks)
