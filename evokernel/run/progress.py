"""What a run prints: a header, one line per evaluation, and a closing table per task."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from evokernel.db.connection import redact
from evokernel.pool.health import health_line
from evokernel.types import Scored, Task

if TYPE_CHECKING:
    from evokernel.config.schema import ExperimentConfig
    from evokernel.db import SolutionLibrary
    from evokernel.run.evaluator import Evaluator
    from evokernel.run.summary import RunSummary


class Reporter(Protocol):
    def say(self, message: str) -> None: ...
    def start(
        self,
        run_id: str,
        config: ExperimentConfig,
        tasks: list[Task],
        pool: Evaluator,
        library: SolutionLibrary,
    ) -> None: ...
    def event(self, kind: str, data: dict[str, Any]) -> None: ...
    def finish(self, summary: RunSummary, tasks: list[Task]) -> None: ...


def _speed(sc: Scored | None) -> str:
    """The speedup with its 95 % interval where it has one (types.format_speedup)."""
    return "-" if sc is None else sc.speedup_text


def format_table(rows: list[list[str]], header: list[str]) -> str:
    # Plain aligned columns, kept by hand: they must read the same in logs, pipes and CI consoles,
    # where rich's Table (used by the live board) would add box characters or nothing at all.
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), line]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def sol_cells(best: Scored | None) -> tuple[str, str]:
    """The best kernel's speed-of-light share and bottleneck (evaluation/profiling/), or dashes."""
    profile = best.evaluation.details.get("profiling") if best is not None and best.evaluation else None
    if not isinstance(profile, dict) or profile.get("status") != "ok":
        return "-", "-"
    share = (profile.get("sol") or {}).get("share")
    device = str(profile.get("device") or "the device").removeprefix("NVIDIA ")
    if share is None:
        return "-", str(profile.get("bottleneck", "-"))
    # above 100 %: past the dtype's limit (profiling/verdict.py says why that happens)
    beyond = " (beyond its limit)" if share > 1 else ""
    return f"{share:.0%} of {device}{beyond}", str(profile.get("bottleneck", "-"))


class ProgressPrinter:
    """Plain lines (they survive log files and CI consoles better than a live display)."""

    # How to resume, after an interrupted run's table; a sweep's cells leave it to the sweep, whose
    # resume covers them all.
    resume_hint = True

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._t0 = time.monotonic()
        self._interpreter = False

    def say(self, message: str) -> None:
        print(message, file=self.stream, flush=True)

    def start(
        self,
        run_id: str,
        config: ExperimentConfig,
        tasks: list[Task],
        pool: Evaluator,
        library: SolutionLibrary,
    ) -> None:
        self._t0 = time.monotonic()
        device = getattr(pool, "device", "in-process")
        self._interpreter = device == "cpu"
        self._profile = config.evaluation.profile
        where = {"cpu": "CPU, Triton interpreter", "cuda": "GPU"}.get(device, device)
        budget = config.budget
        limits = [f"{budget.evaluations} evaluations per task"]
        limits += [f"{budget.llm_calls} LLM calls"] if budget.llm_calls is not None else []
        limits += [f"{budget.usd:g} USD"] if budget.usd is not None else []
        limits += [f"{budget.wall_time_s:g} s"] if budget.wall_time_s is not None else []
        self.say(
            f"run {run_id} '{config.name}': {len(tasks)} task(s), strategy {config.strategy.name}, "
            + ", ".join(limits)
        )
        self.say(
            f"  pool: {pool.size} evaluator(s) on {where}, {getattr(pool, 'scale', 'given')} task sizes, "
            f"verdict profile {config.evaluation.profile}; library: {redact(library.url)}"
        )
        from evokernel.evaluation.profiling.availability import describe

        self.say(f"  {describe(config.evaluation.profiling, device)}")
        if self._interpreter:
            self.say(
                "  note: no GPU, so Triton runs under TRITON_INTERPRET=1 and timings are interpreter "
                "timings, not GPU performance"
            )

    def event(self, kind: str, data: dict[str, Any]) -> None:
        elapsed = time.monotonic() - self._t0
        if kind == "evaluated":
            sc: Scored = data["scored"]
            ev = sc.evaluation
            assert ev is not None
            parents = ",".join(f"#{p}" for p in sc.candidate.parents)
            op = f"{sc.candidate.operator}({parents})" if parents else sc.candidate.operator
            verdict = f"{_speed(sc)} vs eager" if ev.ok else f"{ev.status.value}: {ev.reason[:90]}"
            self.say(
                f"[{elapsed:6.1f}s] {data['task']:<22} {data['done']:>3}/{data['budget']:<3} "
                f"#{sc.candidate.id:<5} gen {sc.candidate.generation:<2} {op:<18} {verdict}   "
                f"best {_speed(data['best'])}"
            )
        elif kind == "mutation_failed":
            self.say(f"[{elapsed:6.1f}s] {data['task']:<22} mutation failed: {str(data['error'])[:120]}")
        elif kind == "task_done":
            self.say(f"[{elapsed:6.1f}s] {data['task']:<22} done: {data['reason']}")
        elif kind == "stopping":
            self.say(f"[{elapsed:6.1f}s] {data['reason']}")
        elif kind == "pool_health":
            self.say(f"[{elapsed:6.1f}s] {health_line(data['health'])}")

    def finish(self, summary: RunSummary, tasks: list[Task]) -> None:
        rows = []
        for task in tasks:
            best = summary.best.get(task.name)
            seed = summary.seeds.get(task.name)
            vs_seed = "-"
            if best is not None and seed is not None and best.speedup and seed.speedup:
                vs_seed = f"{best.speedup / seed.speedup:.3g}x"
            status = best.evaluation.status.value if best and best.evaluation else "no correct candidate"
            row = [task.name, f"#{best.candidate.id}" if best else "-", status, _speed(best), vs_seed]
            rows.append(row + list(sol_cells(best)))
        self.say("")
        header = f"speedup vs eager ({getattr(self, '_profile', 'strict')})"
        columns = ["task", "best", "status", header, "vs seed", "speed of light", "bottleneck"]
        if all(row[-2:] == ["-", "-"] for row in rows):  # no profile taken: no empty columns
            rows, columns = [row[:-2] for row in rows], columns[:-2]
        self.say(format_table(rows, columns))
        if self._interpreter:
            self.say("(interpreter timings on CPU: they rank candidates but say nothing about GPU speed)")
        verb = "was interrupted after" if summary.interrupted else "finished in"
        self.say(
            f"run {summary.run_id} {verb} {time.monotonic() - self._t0:.0f} s; "
            f"library: {redact(summary.library_url)}"
        )
        if summary.interrupted and self.resume_hint:
            self.say(f"continue it with: evokernel run CONFIG --resume {summary.run_id}")
