"""``evokernel report``: arguments and handler (the work is in the other modules here)."""

from __future__ import annotations

import argparse
from typing import Any


def add_progress_flags(p: argparse.ArgumentParser) -> None:
    """``run`` and ``sweep``: live display on a terminal, plain lines otherwise, or these."""
    group = p.add_mutually_exclusive_group()
    group.add_argument("--quiet", action="store_true", help="print only the closing summary")
    group.add_argument("--json-events", action="store_true", help="one JSON object per event on stdout")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="report a run or sweep from the library: tables, PNG plots, one HTML file",
        description="Reads the library only, so it works on a run still going and on one copied "
        "from another machine. Without an id: the latest sweep or run.",
    )
    p.add_argument("id", nargs="?", help="run id or sweep id (default: the latest)")
    p.add_argument("--library", default="evokernel.db", help="SQLAlchemy URL or SQLite file path")
    p.add_argument("--html", metavar="FILE", help="write one self-contained HTML report (plots inlined)")
    p.add_argument("--png", metavar="DIR", help="write the plots as PNG files into DIR")


def main(args: argparse.Namespace) -> int:
    from evokernel.db import SolutionLibrary
    from evokernel.db.urls import require_existing
    from evokernel.report.write import write_report

    require_existing(args.library, "report")
    library = SolutionLibrary(args.library)
    try:
        written = write_report(library, args.id, html=args.html, png_dir=args.png)
    finally:
        library.close()
    print(written.text)
    for path in written.files:
        print(f"wrote {path}")
    return 0
