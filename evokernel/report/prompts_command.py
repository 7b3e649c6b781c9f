"""``evokernel prompts RUN_ID``: the prompts a run sent, with their lengths, to be read."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "prompts",
        help="print the prompts a run sent to its LLMs, with their lengths",
        description="Reads the library only. Each prompt is printed as recorded with its LLM call "
        "(system and user messages; a repair round shows the turn it added), after a header naming "
        "its proposal, kind, model and length; a table of lengths per kind closes the output.",
    )
    p.add_argument("run_id", help="the run's id (evokernel runs lists them)")
    p.add_argument("--library", default="evokernel.db", help="SQLAlchemy URL or SQLite file path")
    p.add_argument(
        "--kind", action="append", help="only this kind (seed, mutate, crossover, fix, ideas, repair)"
    )
    p.add_argument("--lengths", action="store_true", help="only the table of lengths per kind")


def main(args: argparse.Namespace) -> int:
    from evokernel.analysis.prompts import lengths_by_kind, run_prompts
    from evokernel.db import SolutionLibrary
    from evokernel.db.urls import require_existing
    from evokernel.run.progress import format_table

    require_existing(args.library, "prompts")
    library = SolutionLibrary(args.library)
    try:
        library.get_run(args.run_id)  # an unknown id is an error, not an empty listing
        prompts = run_prompts(library, args.run_id)
    finally:
        library.close()
    if args.kind:
        prompts = [sp for sp in prompts if sp.kind in args.kind]
    if not prompts:
        print(f"run {args.run_id} recorded no LLM prompts" + (" of that kind" if args.kind else ""))
        return 0
    if not args.lengths:
        for sp in prompts:
            where = f"generation {sp.generation}, island {sp.island}, branch {sp.branch}"
            print(
                f"===== call {sp.call}: {sp.kind} (proposal {sp.proposal}, {sp.task}, {where}) "
                f"{sp.model}, {sp.chars} chars, {sp.prompt_tokens} prompt tokens, {sp.outcome}"
            )
            print(sp.prompt.rstrip())
            print()
    rows = [
        [k.kind, str(k.count), str(k.median_chars), str(k.max_chars), str(k.identical)]
        for k in lengths_by_kind(prompts)
    ]
    print(format_table(rows, ["kind", "prompts", "median chars", "max chars", "with an identical twin"]))
    return 0
