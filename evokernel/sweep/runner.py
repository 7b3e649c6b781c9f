"""Run a sweep's cells concurrently on one evaluator pool, each with its own budget; resume one.

The pool's fair queue serves waiting evaluations round robin per run, so cells share the GPUs
evenly whatever their proposal rates. SIGINT is the sweep's: the first stops new work in every
cell (each finishes what it has in flight, then is ``interrupted``), the second stops at once, and
so does SIGTERM (what a batch scheduler sends before it kills the job)."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evokernel.analysis import RunRow, get_sweep
from evokernel.config.schema import ExperimentConfig
from evokernel.db import SolutionLibrary
from evokernel.exceptions import ConfigError, Terminated
from evokernel.report.progress import CellPrinter, PoolLine
from evokernel.run.credentials import check_credentials
from evokernel.run.engine import Engine, Evaluator
from evokernel.run.progress import Reporter
from evokernel.run.runner import RunSummary, ray_notice, run_experiment_async
from evokernel.sweep.plan import Cell, check_same_sweep, create_cells, new_sweep_id, plan_cells


@dataclass(frozen=True)
class SweepSummary:
    sweep_id: str
    library_url: str
    runs: dict[int, str]
    summaries: dict[int, RunSummary]
    interrupted: bool


ReporterFactory = Callable[[int, str], Reporter]


def run_sweep(
    config_path: str | Path | None,
    items: list[str],
    *,
    resume: str | None = None,
    library: str | None = None,
    parallel: int = 0,
    reporter_for: ReporterFactory | None = None,
    pool: Evaluator | None = None,
    announce: bool = True,
) -> SweepSummary:
    """Start a sweep of ``config_path`` with axes in ``items`` (``key=v1,v2``), or resume sweep
    ``resume`` (with the command line that started it, or with ``config_path`` None and
    ``library``). ``parallel``: cells running at once (0: all)."""
    return asyncio.run(
        run_sweep_async(
            config_path,
            items,
            resume=resume,
            library=library,
            parallel=parallel,
            reporter_for=reporter_for,
            pool=pool,
            announce=announce,
        )
    )


async def run_sweep_async(
    config_path: str | Path | None,
    items: list[str],
    *,
    resume: str | None = None,
    library: str | None = None,
    parallel: int = 0,
    reporter_for: ReporterFactory | None = None,
    pool: Evaluator | None = None,
    announce: bool = True,
) -> SweepSummary:
    cells = plan_cells(config_path, items) if config_path is not None else []
    if pool is None:
        for cell in cells:  # a missing key stops the sweep before its library or Ray
            check_credentials(cell.config)
    url = cells[0].config.library if cells else library
    if url is None:
        raise ConfigError("resuming a sweep without its CONFIG needs --library")
    lib = SolutionLibrary(url)
    url = lib.url
    try:
        sweep_id = resume or new_sweep_id()
        have: dict[int, RunRow] = {}
        if resume:
            sweep = get_sweep(lib, resume)
            have = {c.cell: c for c in sweep.cells if c.cell is not None}
            check_same_sweep(resume, cells, {i: r.point for i, r in have.items()})
        runs = {i: r.id for i, r in have.items()}
        runs.update(create_cells(lib, sweep_id, cells, set(have)))
        todo = sorted(i for i in runs if i not in have or have[i].status != "finished")
        first = cells[0].config if cells else None
        pool_line = PoolLine()  # the cells share the pool: its line is printed once, not per cell
        factory = reporter_for or (lambda index, run_id: CellPrinter(f"[cell {index}]", pool_line=pool_line))
        if announce:
            print_header(sweep_id, runs, todo, resume)
    finally:
        lib.close()
    by_index = {c.index: c for c in cells}
    own_pool = pool is None
    baselines = SolutionLibrary(url)  # the pool's cache of eager/compile timings
    if pool is None:
        from evokernel.pool import EvaluatorPool  # Ray and torch: only when a real pool is needed

        base = first or _stored_config(url, runs[min(runs)])
        notice = ray_notice(base.ray)
        if notice and announce:
            print(notice, flush=True)
        pool = EvaluatorPool(base.evaluation, base.ray, baselines=baselines)
    engines: list[Engine] = []
    stopping = asyncio.Event()
    limit = asyncio.Semaphore(parallel or len(todo) or 1)

    async def one(index: int) -> RunSummary | None:
        async with limit:
            if stopping.is_set():
                return None
            cell = by_index.get(index)
            config = cell.config if cell else ExperimentConfig(library=url)
            try:
                return await run_experiment_async(
                    config,
                    resume=runs[index],
                    overrides=cell.overrides if cell else (),
                    reporter=factory(index, runs[index]),
                    pool=pool,
                    handle_sigint=False,
                    on_engine=engines.append,
                )
            except KeyboardInterrupt as exc:  # Terminated too: the cell stopped at once
                # The signal that stopped it reached every cell's engine (on_sigint/on_sigterm);
                # kept here and raised once all have stopped (below): out of a task, asyncio
                # would tear the loop down under the other cells mid-way.
                stopped_at_once.append(exc)
                return None

    stopped_at_once: list[KeyboardInterrupt] = []

    def on_sigint() -> None:
        stopping.set()
        for engine in engines:
            engine.interrupt()

    def on_sigterm() -> None:
        stopping.set()
        for engine in engines:
            engine.terminate()

    loop = asyncio.get_running_loop()
    handled = threading.current_thread() is threading.main_thread()
    if handled:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        results = await asyncio.gather(*(one(i) for i in todo))
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
            loop.remove_signal_handler(signal.SIGTERM)
        if own_pool:
            pool.shutdown()  # type: ignore[attr-defined]
        baselines.close()
    if stopped_at_once:
        raise next((e for e in stopped_at_once if isinstance(e, Terminated)), stopped_at_once[0])
    summaries = {i: r for i, r in zip(todo, results, strict=True) if r is not None}
    interrupted = stopping.is_set() or any(s.interrupted for s in summaries.values())
    return SweepSummary(sweep_id, url, runs, summaries, interrupted)


def _stored_config(url: str, run_id: str) -> ExperimentConfig:
    from evokernel.config.loading import from_dict

    lib = SolutionLibrary(url)
    url = lib.url
    try:
        return from_dict(lib.get_run(run_id).config)
    finally:
        lib.close()


def print_header(sweep_id: str, runs: dict[int, str], todo: list[int], resume: str | None) -> None:
    verb = "resuming sweep" if resume else "sweep"
    print(f"{verb} {sweep_id}: {len(runs)} cell(s), {len(todo)} to run", flush=True)


__all__ = ["Cell", "CellPrinter", "SweepSummary", "run_sweep", "run_sweep_async"]
