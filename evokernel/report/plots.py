"""The report's plots as PNG bytes, drawn with matplotlib's Agg canvas (no display, no pyplot
global state, so reports can be drawn from threads and servers).

Run: convergence (best speedup so far against evaluations, active wall time and LLM USD, one line
per task) and fast_p. Sweep: the same overlaid per cell (one colour per point of the non-seed
axes, one line per seed) and the geomean per point with its spread over seeds."""

from __future__ import annotations

import io
from collections.abc import Iterable

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from evokernel.analysis import AXES, ConvergencePoint, RunOverview, fast_p
from evokernel.report.collect import RunReport, SweepReport

XLABEL = {"evaluations": "evaluations", "wall_s": "active wall time (s)", "usd": "LLM cost (USD)"}
MAX_TASK_ROWS = 6
DPI = 110


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _timing_note(overviews: Iterable[RunOverview]) -> str:
    views = list(overviews)
    if any(v.interpreter for v in views):
        return " (CPU, Triton interpreter: timings rank kernels, they are not GPU speed)"
    devices = sorted({t.device for v in views for t in v.tasks if t.device})
    return f" ({', '.join(devices)})" if devices else ""


def _curve(ax: Axes, points: list[ConvergencePoint], **style: object) -> bool:
    xs = [p.x for p in points if p.best is not None]
    ys = [p.best for p in points if p.best is not None]
    if not xs:
        return False
    ax.step(xs, ys, where="post", **style)  # type: ignore[arg-type]
    return True


def _finish_axis(ax: Axes, axis: str, drawn: bool, no_usd: bool) -> None:
    ax.set_xlabel(XLABEL[axis])
    ax.grid(True, alpha=0.3, which="both")
    if axis == "evaluations":
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if axis != "evaluations" and not (axis == "usd" and no_usd):
        ax.set_xlim(left=0)
    ys = [np.asarray(line.get_ydata(), dtype=float) for line in ax.get_lines()]
    values = np.concatenate(ys) if ys else np.zeros(0)
    if (values > 0).any():
        # Speedups are ratios: 0.5x and 2x lie as far from 1x on a log axis, and a CPU run's
        # 1e-4x interpreter figures stay readable beside a GPU run's. Always log, so a sweep's
        # rows and a run's panels read alike (the sweep's were linear while the run's were log).
        ax.set_yscale("log")
    if axis == "usd" and no_usd:
        ax.text(
            0.5,
            0.5,
            "no LLM cost recorded\n(no LLM operator ran)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="0.4",
        )
    elif not drawn:
        ax.text(
            0.5, 0.5, "no correct kernel yet", ha="center", va="center", transform=ax.transAxes, color="0.4"
        )


def run_plots(report: RunReport) -> dict[str, bytes]:
    return {name: _png(fig) for name, fig in run_figures(report).items()}


def sweep_plots(report: SweepReport) -> dict[str, bytes]:
    return {name: _png(fig) for name, fig in sweep_figures(report).items()}


def run_figures(report: RunReport) -> dict[str, Figure]:
    """The run's figures by name (``convergence``, ``fast_p``), before they become PNG bytes."""
    run = report.overview.run
    note = _timing_note([report.overview])
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    axes = fig.subplots(1, len(AXES), sharey=True)
    no_usd = run.usd == 0
    for ax, axis in zip(axes, AXES, strict=True):
        drawn = False
        for task in report.tasks:
            if not (axis == "usd" and no_usd):
                drawn |= _curve(ax, task.curves[axis], label=task.name, linewidth=1.8)
        _finish_axis(ax, axis, drawn, no_usd)
    axes[0].set_ylabel("best speedup vs eager (x)")
    if axes[0].get_lines():
        axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"run {run.id} '{run.name}': best speedup so far{note}", fontsize=10)
    out = {"convergence": fig}

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    ps = fast_p_range([report.overview])
    if ps:
        ax.step(ps, _shares(report.overview, ps), where="post", linewidth=2)
    _fast_p_axes(ax, ps)
    # Two lines: the interpreter note alone is wider than this figure.
    fig.suptitle(f"fast_p of run {run.id} ({len(report.tasks)} task(s))\n{note.strip(' ()')}", fontsize=9)
    out["fast_p"] = fig
    return out


def _speedups(overview: RunOverview) -> list[float | None]:
    """Per task the best speedup, 0.0 for a correct kernel without one, None without a correct one."""
    return [(t.speedup_eager or 0.0) if t.best_candidate is not None else None for t in overview.tasks]


def fast_p_range(overviews: Iterable[RunOverview], steps: int = 120) -> list[float]:
    """The p at which to draw fast_p: log-spaced over the speedups the runs reached (half the
    smallest to twice the largest) plus each speedup itself, so every step of the curve is seen.
    A fixed 0-2 range drew a CPU run's 1e-4x speedups as a flat line at 0. Empty without any."""
    seen = [s for o in overviews for s in _speedups(o) if s]
    if not seen:
        return []
    grid = np.geomspace(min(seen) / 2, max(seen) * 2, steps)
    return sorted({float(p) for p in grid} | set(seen))


def _shares(overview: RunOverview, ps: list[float]) -> list[float]:
    return [share for _p, share in fast_p(_speedups(overview), ps)]


def _fast_p_axes(ax: Axes, ps: list[float]) -> None:
    ax.set_ylabel("fast_p: share of tasks correct and > p x eager")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(True, alpha=0.3, which="both")
    if not ps:
        ax.set_xlabel("p (speedup over eager)")
        ax.text(
            0.5,
            0.5,
            "no task has a correct kernel with a speedup yet:\nfast_p is 0 for every p > 0",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="0.4",
        )
        return
    ax.set_xscale("log")
    ax.set_xlim(ps[0], ps[-1])
    ax.set_xlabel("p (speedup over eager, log scale; the range the kernels reached)")
    if ps[0] <= 1.0 <= ps[-1]:
        ax.axvline(1.0, color="0.5", linestyle="--", linewidth=1)


def sweep_figures(report: SweepReport) -> dict[str, Figure]:
    """The sweep's figures by name (``sweep_convergence``, ``sweep_cells``)."""
    table = report.table
    note = _timing_note(table.overviews.values())
    colors = [f"C{i % 10}" for i in range(len(table.groups))]
    labels = [" ".join(f"{k}={v}" for k, v in g.point.items()) or "all cells" for g in table.groups]
    tasks = [t.name for t in next(iter(report.runs.values())).tasks][:MAX_TASK_ROWS]
    fig = Figure(figsize=(13, 3.4 * len(tasks) + 0.6), layout="constrained")
    grid = fig.subplots(len(tasks), len(AXES), squeeze=False, sharey="row")
    no_usd = all(r.overview.run.usd == 0 for r in report.runs.values())
    for row, task in enumerate(tasks):
        for col, axis in enumerate(AXES):
            ax, drawn = grid[row][col], False
            for group, color, label in zip(table.groups, colors, labels, strict=True):
                if axis == "usd" and no_usd:
                    break
                for n, run_id in enumerate(group.runs):
                    curves = next(t for t in report.runs[run_id].tasks if t.name == task).curves
                    style = {"color": color, "alpha": 0.85, "linewidth": 1.5}
                    drawn |= _curve(ax, curves[axis], label=label if n == 0 else None, **style)
            _finish_axis(ax, axis, drawn, no_usd)
        grid[row][0].set_ylabel(f"{task}\nbest speedup vs eager (x)")
    grid[0][0].legend(fontsize=8, loc="lower right", title="one line per seed", title_fontsize=7)
    fig.suptitle(
        f"sweep {table.sweep.id} '{table.sweep.name}': best speedup so far per cell{note}", fontsize=10
    )
    out = {"sweep_convergence": fig}

    fig = Figure(figsize=(12, 4.2), layout="constrained")
    ax_p, ax_g = fig.subplots(1, 2)
    ps = fast_p_range(table.overviews.values())
    for group, color, label in zip(table.groups, colors, labels, strict=True):
        for n, run_id in enumerate(group.runs):
            if not ps:
                break
            shares = _shares(table.overviews[run_id], ps)
            ax_p.step(ps, shares, where="post", color=color, alpha=0.85, label=label if n == 0 else None)
    _fast_p_axes(ax_p, ps)
    if ps:
        ax_p.legend(fontsize=8, loc="upper right")
    means = [g.geomean.mean or 0.0 for g in table.groups]
    spread = [g.geomean.stdev for g in table.groups]
    ax_g.bar(range(len(means)), means, yerr=spread, color=colors, capsize=4)
    for i, g in enumerate(table.groups):
        ax_g.text(i, means[i], f" n={g.geomean.n}", ha="center", va="bottom", fontsize=8)
    ax_g.set_xticks(range(len(means)), labels, rotation=20, ha="right", fontsize=8)
    ax_g.set_ylabel("geomean speedup vs eager\n(mean ± sd over seeds)")
    ax_g.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"sweep {table.sweep.id}: fast_p per cell and geomean per point{note}", fontsize=10)
    out["sweep_cells"] = fig
    return out
