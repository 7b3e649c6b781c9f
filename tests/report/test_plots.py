"""The report's figures choose their axes from the data (issue 38): speedups on log axes, fast_p
over the range the kernels reached, and a figure with nothing to draw says why. Libraries are
written through the public API as a run writes them; the figures are matplotlib's own objects,
the ones the PNGs are drawn from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from evokernel.conformance import InstantEvaluator
from evokernel.db import SolutionLibrary
from evokernel.report.collect import RunReport, SweepReport, collect
from evokernel.report.events import QuietPrinter
from evokernel.report.plots import run_figures, sweep_figures
from evokernel.sweep.runner import run_sweep
from evokernel.types import Evaluation, Proposal, Status, Task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _cpu_run(lib: SolutionLibrary, speedups: dict[str, list[float | None]]) -> str:
    """A run whose tasks' candidates got these interpreter speedups (None: incorrect)."""
    run_id = lib.create_run("cpu", {"budget": {"evaluations": 4}})
    for position, (task, figures) in enumerate(speedups.items()):
        lib.register_task(run_id, Task(name=task, path=f"/{task}.py", source=f"# {task}\n"), position)
        for n, speedup in enumerate(figures):
            proposal = lib.add_proposal(run_id, Proposal(task=task, operator="tune"))
            cand = lib.add_candidate(run_id, proposal, f"# {task} {n}\n")
            if speedup is None:
                evaluation = Evaluation(Status.INCORRECT, "wrong", stage="correctness", device="cpu")
            else:
                evaluation = Evaluation(
                    Status.CORRECT,
                    stage="timing",
                    device="cpu (Triton interpreter)",
                    interpreter=True,
                    runtime_ms=1.0 / speedup,
                    eager_ms=1.0,
                    speedup_eager=speedup,
                )
            lib.record_evaluation(cand.id, evaluation)
    return run_id


def _texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_a_cpu_runs_fast_p_spans_its_speedups_on_a_log_axis(tmp_path: Path) -> None:
    lib = SolutionLibrary(tmp_path / "lib.db")
    try:
        run_id = _cpu_run(lib, {"softmax": [6e-5, 1.6e-4], "rmsnorm": [3e-4, 7.6e-4]})
        report = collect(lib, run_id, "lib.db")
    finally:
        lib.close()
    assert isinstance(report, RunReport)
    figures = run_figures(report)
    (ax,) = figures["fast_p"].axes
    low, high = ax.get_xlim()
    # Before: a fixed 0-2 linear axis, on which 1e-4 speedups were a flat line at 0.
    assert ax.get_xscale() == "log" and low <= 1.6e-4 / 1.5 and 7.6e-4 * 1.5 <= high < 0.1
    (line,) = ax.get_lines()
    shares = {float(y) for y in np.asarray(line.get_ydata(), dtype=float)}
    assert shares == {1.0, 0.5, 0.0}  # both tasks, then rmsnorm alone, then none: every step seen
    for panel in figures["convergence"].axes[:2]:
        assert panel.get_yscale() == "log"


def test_a_run_without_a_correct_kernel_says_why_its_fast_p_is_empty(tmp_path: Path) -> None:
    lib = SolutionLibrary(tmp_path / "lib.db")
    try:
        run_id = _cpu_run(lib, {"softmax": [None, None]})
        report = collect(lib, run_id, "lib.db")
    finally:
        lib.close()
    assert isinstance(report, RunReport)
    figures = run_figures(report)
    assert "no task has a correct kernel" in _texts(figures["fast_p"])
    assert "no correct kernel yet" in _texts(figures["convergence"])


def test_a_sweeps_convergence_is_log_like_a_runs(tmp_path: Path) -> None:
    library = tmp_path / "sweep.db"
    config = tmp_path / "sweep.yaml"
    config.write_text(
        f"name: s\ntasks: [{FIXTURES / 'tasks' / 'axpy.py'}]\nlibrary: {library}\n"
        "budget: {evaluations: 5}\n"
    )
    summary = run_sweep(
        config,
        ["seed=0,1"],
        pool=InstantEvaluator(size=2),
        reporter_for=lambda index, _run: QuietPrinter(prefix=f"[cell {index}]"),
        announce=False,
    )
    lib = SolutionLibrary(library)
    try:
        report = collect(lib, summary.sweep_id, "sweep.db")
    finally:
        lib.close()
    assert isinstance(report, SweepReport)
    figures = sweep_figures(report)
    # The instant speedups span less than a decade: the old rule (log past 20x) left them linear.
    drawn = [ax for ax in figures["sweep_convergence"].axes if ax.get_lines()]
    assert drawn and all(ax.get_yscale() == "log" for ax in drawn)
    fast_p = figures["sweep_cells"].axes[0]
    assert fast_p.get_xscale() == "log" and len(fast_p.get_lines()) >= 2
