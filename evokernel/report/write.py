"""Collect, draw and write a report: the Python API behind ``evokernel report``::

from evokernel.db import SolutionLibrary
from evokernel.report.write import write_report
write_report(SolutionLibrary("evokernel.db"), None, html="report.html", png_dir="plots")
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evokernel.db import SolutionLibrary
from evokernel.report.collect import SweepReport, collect
from evokernel.report.html import render
from evokernel.report.plots import run_plots, sweep_plots
from evokernel.report.text import text


@dataclass(frozen=True)
class WrittenReport:
    text: str
    files: tuple[Path, ...]


def write_report(
    library: SolutionLibrary,
    target: str | None,
    *,
    html: str | Path | None = None,
    png_dir: str | Path | None = None,
    library_name: str | None = None,
) -> WrittenReport:
    """Report run or sweep ``target`` (None: the latest). PNGs are drawn only when asked for.
    ``library_name``: how the report names the library (default: its URL without password)."""
    from evokernel.db.connection import redact

    report = collect(library, target, redact(library.url) if library_name is None else library_name)
    files: list[Path] = []
    if html is None and png_dir is None:
        return WrittenReport(text(report), ())
    runs = report.runs if isinstance(report, SweepReport) else {report.overview.run.id: report}
    run_pngs = {run_id: run_plots(r) for run_id, r in runs.items()}
    sweep_pngs = sweep_plots(report) if isinstance(report, SweepReport) else {}
    if png_dir is not None:
        out = Path(png_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name, png in sweep_pngs.items():
            files.append(out / f"{name}.png")
            files[-1].write_bytes(png)
        for run_id, pngs in run_pngs.items():
            for name, png in pngs.items():
                stem = name if len(run_pngs) == 1 else f"{run_id}_{name}"
                files.append(out / f"{stem}.png")
                files[-1].write_bytes(png)
    if html is not None:
        path = Path(html)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(report, run_pngs, sweep_pngs), encoding="utf-8")
        files.append(path)
    return WrittenReport(text(report), tuple(files))
