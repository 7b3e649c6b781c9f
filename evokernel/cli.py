"""``evokernel`` command line: run, resume, inspect tasks and the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from evokernel.exceptions import EvoKernelError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evokernel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run (or resume) an experiment from a YAML config")
    run.add_argument("config", help="experiment YAML, e.g. experiments/quickstart.yaml")
    run.add_argument("overrides", nargs="*", help="key=value overrides, e.g. budget.evaluations=32")
    run.add_argument("--resume", metavar="RUN_ID", help="continue a killed or interrupted run")
    run.add_argument("--ray-address", metavar="ADDR", help="join a Ray cluster (same as ray.address=ADDR)")

    db = sub.add_parser("db", help="solution library maintenance")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    up = db_sub.add_parser("upgrade", help="apply the schema migrations to a library")
    up.add_argument("--library", default="evokernel.db", help="SQLAlchemy URL or SQLite file path")

    runs = sub.add_parser("runs", help="list the runs in a library")
    runs.add_argument("--library", default="evokernel.db", help="SQLAlchemy URL or SQLite file path")

    tasks = sub.add_parser("tasks", help="task files")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    ls = tasks_sub.add_parser("list", help="load task files or folders and list them")
    ls.add_argument("paths", nargs="+")
    return parser


def _run(args: argparse.Namespace) -> int:
    from evokernel.config import load_config
    from evokernel.runner import run_experiment

    overrides = list(args.overrides)
    if args.ray_address:
        overrides.append(f"ray.address={args.ray_address}")
    config = load_config(args.config, overrides)
    run_experiment(config, resume=args.resume, overrides=overrides)
    return 0


def _db_upgrade(args: argparse.Namespace) -> int:
    from evokernel.db import upgrade
    from evokernel.db.connection import redact

    url = upgrade(args.library)
    print(f"library {redact(url)} is at the latest schema")
    return 0


def _runs(args: argparse.Namespace) -> int:
    from evokernel.db import SolutionLibrary
    from evokernel.report import format_table

    library = SolutionLibrary(args.library)
    rows = [[r.id, r.name, r.status, r.created_at, r.finished_at or "-"] for r in library.list_runs()]
    print(format_table(rows, ["run", "name", "status", "started", "finished"]) if rows else "no runs")
    return 0


def _tasks_list(args: argparse.Namespace) -> int:
    from evokernel.report import format_table
    from evokernel.tasks import load_tasks

    tasks = load_tasks(args.paths)
    rows = [
        [t.name, str(t.level or "-"), "yes" if t.seed_source else "-", str(len(t.variants)), t.path]
        for t in tasks
    ]
    print(format_table(rows, ["task", "level", "seed", "variants", "path"]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {"run": _run, "runs": _runs}
    try:
        if args.command == "db":
            return _db_upgrade(args)
        if args.command == "tasks":
            return _tasks_list(args)
        return handlers[args.command](args)
    except EvoKernelError as exc:
        print(f"evokernel: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evokernel: interrupted; resume with --resume RUN_ID (see `evokernel runs`)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
