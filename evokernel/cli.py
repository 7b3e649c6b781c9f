"""``evokernel`` command line: run, resume, inspect tasks and the library."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from evokernel.exceptions import EvoKernelError, Terminated
from evokernel.export import command as export_command
from evokernel.report import command as report_command
from evokernel.report import prompts_command
from evokernel.report.command import add_progress_flags
from evokernel.sweep import command as sweep_command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evokernel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run (or resume) an experiment from a YAML config")
    run.add_argument("config", help="experiment YAML, e.g. experiments/quickstart.yaml")
    run.add_argument("overrides", nargs="*", help="key=value overrides, e.g. budget.evaluations=32")
    run.add_argument("--resume", metavar="RUN_ID", help="continue a killed or interrupted run")
    run.add_argument("--ray-address", metavar="ADDR", help="join a Ray cluster (same as ray.address=ADDR)")
    add_progress_flags(run)

    sweep_command.add_parser(sub)
    report_command.add_parser(sub)
    prompts_command.add_parser(sub)
    export_command.add_parsers(sub)

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
    check = tasks_sub.add_parser(
        "check", help="flag degenerate tasks (zero/constant/input-independent outputs)"
    )
    check.add_argument("paths", nargs="+")
    check.add_argument("--scale", default="small", choices=["small", "full"], help="task sizes to screen at")
    check.add_argument("--device", default="cpu", choices=["cpu", "cuda"])

    dash = sub.add_parser("dashboard", help="serve a live, read-only web dashboard over a library")
    dash.add_argument("--library", default="evokernel.db", help="SQLAlchemy URL or SQLite file path")
    dash.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: every one)")
    dash.add_argument("--port", type=int, default=8765)

    verify = sub.add_parser("verify", help="run every verifier stage on one candidate file")
    verify.add_argument("task", help="task file (KernelBench format)")
    verify.add_argument("candidate", help="candidate file defining ModelNew (or its own Model class)")
    verify.add_argument("--json", action="store_true", help="print one JSON object")
    verify.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    verify.add_argument("--timeout", type=float, default=180.0, help="seconds before the candidate is killed")
    verify.add_argument(
        "--profile",
        default="strict",
        choices=["strict", "kernelbench", "kernelbench-v0"],
        help="verdict profile: strict (all sizes, fp32 1e-4), kernelbench (default sizes, 5 seeds, "
        "fp32 1e-4, half 1e-2), kernelbench-v0 (the same at 1e-2 for all dtypes, as PIKE)",
    )
    verify.add_argument("--isolation", default="required", choices=["required", "best-effort"])
    verify.add_argument(
        "--profiling",
        default="timeline",
        choices=["none", "timeline", "counters"],
        help="after timing, where the time goes: timeline (torch.profiler) or counters (also Nsight Compute)",
    )

    sub.add_parser("doctor", help="what this machine allows for isolating candidates")
    return parser


def _doctor(args: argparse.Namespace) -> int:
    from evokernel.evaluation.isolation import doctor_report

    text, ok = doctor_report()
    print(text)
    return 0 if ok else 1


def _verify(args: argparse.Namespace) -> int:
    from evokernel.config.schema import EvaluationConfig
    from evokernel.evaluation.verify import format_report, to_json, verify

    config = EvaluationConfig(
        timeout_s=args.timeout, profile=args.profile, isolation=args.isolation, profiling=args.profiling
    )
    evaluation = verify(args.task, args.candidate, args.device, config)
    print(to_json(evaluation) if args.json else format_report(evaluation))
    return 0 if evaluation.ok else 1


def _tasks_check(args: argparse.Namespace) -> int:
    from evokernel.evaluation.screening import screen_tasks
    from evokernel.tasks import load_tasks

    tasks = load_tasks(args.paths)
    flags = screen_tasks(tasks, args.scale, args.device)
    for flag in flags:
        print(f"FLAGGED {flag.describe()}")
    flagged = {f.task for f in flags}
    print(f"{len(tasks) - len(flagged)}/{len(tasks)} tasks pass; {len(flagged)} flagged")
    return 1 if flags else 0


def _run(args: argparse.Namespace) -> int:
    from evokernel.config.loading import load_config
    from evokernel.report.progress import progress_for
    from evokernel.run.runner import run_experiment

    overrides = list(args.overrides)
    if args.ray_address:
        overrides.append(f"ray.address={args.ray_address}")
    config = load_config(args.config, overrides)
    progress = progress_for(args.quiet, args.json_events)
    try:
        summary = run_experiment(
            config, resume=args.resume, overrides=overrides, reporter=progress.reporter()
        )
    finally:
        progress.close()
    if summary.interrupted:
        return 130  # 128 + SIGINT, as a shell reports Ctrl-C
    if summary.llm_all_failed:
        print(
            f"evokernel: error: all {summary.llm_calls} LLM calls of run {summary.run_id} failed, so no "
            f"LLM operator ran; their errors: evokernel report {summary.run_id}",
            file=sys.stderr,
        )
        return 1
    return 0


def _db_upgrade(args: argparse.Namespace) -> int:
    from evokernel.db import upgrade
    from evokernel.db.connection import redact
    from evokernel.db.urls import check_url

    check_url(args.library)
    url = upgrade(args.library)
    print(f"library {redact(url)} is at the latest schema")
    return 0


def _runs(args: argparse.Namespace) -> int:
    from evokernel.analysis import list_runs, list_sweeps
    from evokernel.db import SolutionLibrary
    from evokernel.db.urls import require_existing
    from evokernel.run.progress import format_table

    require_existing(args.library, "runs")
    library = SolutionLibrary(args.library)
    runs = list_runs(library)
    header = ["run", "name", "status", "started", "finished", "evaluated", "best"]
    rows = [
        [
            r.id,
            r.name,
            r.status,
            r.started,
            r.finished or "-",
            f"{r.evaluations}/{r.budget}",
            r.best_text,
        ]
        for r in runs
        if r.sweep_id is None
    ]
    print(format_table(rows, header) if rows else "no runs" if not runs else "no runs outside sweeps")
    for sweep in list_sweeps(library, runs):
        print(
            f"\nsweep {sweep.id} '{sweep.name}': {sweep.status}, {len(sweep.cells)} cells, axes {sweep.axes}"
        )
        sweep_command.print_cells(sweep.cells)
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    from evokernel.dashboard import serve

    serve(args.library, args.host, args.port)
    return 0


def _tasks_list(args: argparse.Namespace) -> int:
    from evokernel.run.progress import format_table
    from evokernel.tasks import load_tasks

    tasks = load_tasks(args.paths)
    rows = [
        [t.name, str(t.level or "-"), "yes" if t.seed_source else "-", str(len(t.variants)), t.path]
        for t in tasks
    ]
    print(format_table(rows, ["task", "level", "seed", "variants", "path"]))
    return 0


def _resume_hint(command: str) -> str:
    """Only a run has something to resume; other commands (the dashboard, a report) just stop."""
    return "; resume with --resume RUN_ID (see `evokernel runs`)" if command == "run" else ""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {
        "run": _run,
        "runs": _runs,
        "verify": _verify,
        "doctor": _doctor,
        "sweep": sweep_command.main,
        "report": report_command.main,
        "prompts": prompts_command.main,
        "export": export_command.export,
        "dashboard": _dashboard,
    }
    try:
        if args.command == "db":
            return _db_upgrade(args)
        if args.command == "seed":
            return export_command.seed_import(args)
        if args.command == "tasks":
            return _tasks_check(args) if args.tasks_command == "check" else _tasks_list(args)
        return handlers[args.command](args)
    except EvoKernelError as exc:
        print(f"evokernel: error: {exc}", file=sys.stderr)
        return 2
    except Terminated:
        print(f"evokernel: stopped by SIGTERM{_resume_hint(args.command)}", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"evokernel: interrupted{_resume_hint(args.command)}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`evokernel runs | head -2`): stop quietly with 0, so a script under
        # `set -o pipefail` does not fail because it read less. stdout now points at /dev/null, or
        # the interpreter's last flush at exit would print a second traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
