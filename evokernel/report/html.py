"""One self-contained HTML report: tables and every plot inlined as base64 PNG, no scripts, no
external files, so it opens offline and can be mailed or attached to a paper's artifact."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from jinja2 import Environment, PackageLoader, select_autoescape

from evokernel.analysis import RunOverview, Stat
from evokernel.report.collect import RunReport, SweepReport


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


def num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def stat(s: Stat | None, unit: str) -> str:
    if s is None or s.mean is None:
        return "-"
    if unit == "%":
        return f"{100 * s.mean:.0f}% ± {100 * s.stdev:.0f}"
    if unit == "$":
        return f"${s.mean:.4f} ± {s.stdev:.4f}"
    return f"{s.mean:.3g}{unit} ± {s.stdev:.2g} (n={s.n})"


def fast1(o: RunOverview) -> float:
    return next((share for p, share in o.fast_p if p >= 1.0), 0.0)


def render(
    report: RunReport | SweepReport,
    run_pngs: dict[str, dict[str, bytes]],
    sweep_pngs: dict[str, bytes] | None = None,
) -> str:
    """``run_pngs``: run id -> plot name -> PNG; ``sweep_pngs``: the sweep's overlaid plots."""
    env = Environment(loader=PackageLoader("evokernel.report", "templates"), autoescape=select_autoescape())
    template = env.get_template("report.html.j2")
    sweep = report if isinstance(report, SweepReport) else None
    runs: list[RunReport] = list(report.runs.values()) if isinstance(report, SweepReport) else [report]
    if sweep is not None:
        title = f"evokernel sweep {sweep.table.sweep.id} '{sweep.table.sweep.name}'"
        tasks = [t.name for t in runs[0].tasks] if runs else []
    else:
        run = runs[0].overview.run
        title = f"evokernel run {run.id} '{run.name}'"
        tasks = []
    return template.render(
        title=title,
        library=report.library,
        written=datetime.now(UTC).isoformat(timespec="seconds"),
        sweep=sweep,
        tasks=tasks,
        runs=runs,
        sweep_images=[(k, data_uri(v)) for k, v in (sweep_pngs or {}).items()],
        run_images={rid: [(k, data_uri(v)) for k, v in pngs.items()] for rid, pngs in run_pngs.items()},
        x=x,
        num=num,
        stat=stat,
        fast1=fast1,
    )
