"""``evokernel sweep``: the command's arguments and handler (the work is in :mod:`.runner`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from evokernel.report.command import add_progress_flags


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a grid of runs (key=v1,v2 axes or a sweep: section) concurrently on one pool",
        description="Every combination of the axes is a cell: a run in the config's library, grouped "
        "under one sweep id. Items without a comma are plain overrides for every cell.",
    )
    p.add_argument("config", nargs="?", help="experiment YAML (optional with --resume and --library)")
    p.add_argument("items", nargs="*", help="axes key=v1,v2 (e.g. seed=0,1) and plain key=value overrides")
    p.add_argument("--resume", metavar="SWEEP_ID", help="finish the unfinished cells of a sweep")
    p.add_argument("--library", help="library of the sweep to resume when no CONFIG is given")
    p.add_argument("--parallel", type=int, default=0, metavar="N", help="cells running at once (0: all)")
    p.add_argument("--ray-address", metavar="ADDR", help="join a Ray cluster (same as ray.address=ADDR)")
    add_progress_flags(p)


def main(args: argparse.Namespace) -> int:
    from evokernel.analysis import get_sweep
    from evokernel.db import SolutionLibrary
    from evokernel.exceptions import ConfigError, Terminated
    from evokernel.report.progress import progress_for
    from evokernel.sweep.runner import run_sweep

    if args.config is None and not args.resume:
        raise ConfigError("give a CONFIG to start a sweep, or --resume SWEEP_ID")
    items = list(args.items) + ([f"ray.address={args.ray_address}"] if args.ray_address else [])
    progress = progress_for(args.quiet, args.json_events)
    again = "evokernel sweep <same command line> --resume SWEEP_ID (the id the sweep printed first)"
    try:
        try:
            summary = run_sweep(
                args.config,
                items,
                resume=args.resume,
                library=args.library,
                parallel=args.parallel,
                reporter_for=lambda index, _run_id: progress.reporter(str(index)),
                announce=not args.json_events,
            )
        finally:
            progress.close()
    except Terminated:
        print(f"evokernel: sweep stopped by SIGTERM; continue it with: {again}", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"evokernel: sweep stopped at once; continue it with: {again}", file=sys.stderr)
        return 130
    library = SolutionLibrary(summary.library_url)
    try:
        cells = get_sweep(library, summary.sweep_id).cells
    finally:
        library.close()
    if args.json_events:
        done = {"event": "sweep_finish", "sweep": summary.sweep_id, "interrupted": summary.interrupted}
        print(json.dumps({**done, "cells": {str(c.cell): c.id for c in cells}}))
        return 130 if summary.interrupted else 0
    print_cells(cells)
    if summary.interrupted:
        print(f"continue it with: evokernel sweep <same command line> --resume {summary.sweep_id}")
        return 130
    from evokernel.db.connection import redact

    where = redact(summary.library_url)
    print(f"report: evokernel report {summary.sweep_id} --library {where} --html report.html --png plots")
    failed = sorted(index for index, run in summary.summaries.items() if run.llm_all_failed)
    if failed:  # as for a run: a cell whose every LLM call failed did not do what it was asked
        cells_text = ", ".join(str(i) for i in failed)
        print(f"evokernel: error: every LLM call of cell(s) {cells_text} failed", file=sys.stderr)
        return 1
    return 0


def print_cells(cells: Any) -> None:
    from evokernel.run.progress import format_table

    rows = [
        [
            str(c.cell),
            c.id,
            " ".join(f"{k}={v}" for k, v in c.point.items()),
            c.status,
            f"{c.evaluations}/{c.budget}",
            c.best_text,
        ]
        for c in cells
    ]
    print(format_table(rows, ["cell", "run", "point", "status", "evaluated", "best"]))
