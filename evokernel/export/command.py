"""``evokernel export`` and ``evokernel seed import``: arguments and handlers."""

from __future__ import annotations

import argparse
from typing import Any


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="the best kernels as standalone KernelBench files (+ manifest), or every candidate as a dataset",
        description="Without an id: the latest sweep or run. Kernel files go to --out DIR with "
        "manifest.json; --dataset FILE writes one row per evaluated candidate (JSONL, or Parquet for "
        "*.parquet when pyarrow is installed).",
    )
    p.add_argument("id", nargs="?", help="run id or sweep id (default: the latest)")
    p.add_argument("--library", default="evokernel.db", help="SQLAlchemy URL or SQLite file path")
    p.add_argument("--task", help="only this task")
    p.add_argument("--top", type=int, default=1, metavar="K", help="kernels per task and run (fastest first)")
    p.add_argument("--out", metavar="DIR", help="folder for the kernel files and manifest.json")
    p.add_argument(
        "--verify", action="store_true", help="re-verify each file in a fresh process (into the manifest)"
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="device for --verify")
    p.add_argument(
        "--dataset", metavar="FILE", help="write every evaluated candidate as one row (see docs/export.md)"
    )

    seed = sub.add_parser("seed", help="published kernels as starting kernels")
    seed_sub = seed.add_subparsers(dest="seed_command", required=True)
    imp = seed_sub.add_parser(
        "import",
        help="match a folder of solution files (task_<N>.py or <task>.py) to tasks and check them",
        description="Shows which file seeds which task; run with seed_kernels=[DIR] to start from them.",
    )
    imp.add_argument("folder", help="folder of KernelBench/PIKE solution files")
    imp.add_argument("tasks", nargs="+", help="task files or folders the run will use")


def export(args: argparse.Namespace) -> int:
    from evokernel.db import SolutionLibrary
    from evokernel.db.urls import require_existing
    from evokernel.exceptions import ExportError

    if not args.out and not args.dataset:
        raise ExportError("give --out DIR (kernel files) and/or --dataset FILE (one row per candidate)")
    require_existing(args.library, "export")
    library = SolutionLibrary(args.library)
    try:
        if args.out:
            _kernels(library, args)
        if args.dataset:
            from evokernel.export.dataset import export_dataset

            rows = export_dataset(library, args.id, args.dataset, task=args.task)
            print(f"wrote {rows} row(s) to {args.dataset}")
    finally:
        library.close()
    return 0


def _kernels(library: Any, args: argparse.Namespace) -> None:
    from evokernel.export.kernels import export_kernels
    from evokernel.export.verify import verify_export
    from evokernel.run.progress import format_table
    from evokernel.types import format_speedup

    exported = export_kernels(library, args.id, args.out, task=args.task, top=args.top)
    entries = verify_export(args.out, args.device, say=_say) if args.verify else exported.entries
    rows = []
    for e in entries:
        check = e.get("verified") or {}
        now = check.get("speedup_eager")
        recorded = format_speedup(e["speedup_eager"] or None, e.get("speedup_low"), e.get("speedup_high"))
        verified = format_speedup(now or None, check.get("speedup_low"), check.get("speedup_high"))
        rows.append(
            [e["task"], e["file"], recorded] + ([str(check.get("status")), verified] if args.verify else [])
        )
    header = ["task", "file", "recorded"] + (["verified", "now"] if args.verify else [])
    print(format_table(rows, header))
    print(f"manifest: {exported.manifest}")


def _say(line: str) -> None:
    print(line, flush=True)


def seed_import(args: argparse.Namespace) -> int:
    from evokernel.run.progress import format_table
    from evokernel.run.seed_kernels import match_seed_files
    from evokernel.tasks import load_tasks

    matches = match_seed_files(args.folder, load_tasks(args.tasks))
    rows = [[m.file.name, m.task or "(no task)", m.problem or ("ok" if m.task else "-")] for m in matches]
    print(format_table(rows, ["file", "task", "check"]) if rows else f"no .py files in {args.folder}")
    usable = [m for m in matches if m.task and not m.problem]
    print(f"{len(usable)} file(s) can seed a task; start from them with: seed_kernels=[{args.folder}]")
    return 0 if usable else 1
