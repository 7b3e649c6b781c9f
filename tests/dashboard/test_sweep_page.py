"""The sweep page, the pool-health row and fast_p, in a real headless Chromium (issue 38): a sweep
id on the runs page is a link to a page of its points and cells, a CPU run's pool health does not
talk about a GPU lock, and fast_p spans the speedups the run reached."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evokernel.conformance import InstantEvaluator
from evokernel.dashboard import open_library, running
from evokernel.report.events import QuietPrinter
from evokernel.sweep.runner import run_sweep
from tests.dashboard.conftest import Console
from tests.dashboard.fixture_library import Fixture

TIMEOUT_MS = 20_000
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# Where the screenshots go for a person to look at (the session's report); tmp_path otherwise.
SHOTS = os.environ.get("EVOKERNEL_SCREENSHOTS")


def _sweep(library: Path) -> str:
    config = library.with_suffix(".yaml")
    config.write_text(
        f"name: two-strategies\ntasks: [{FIXTURES / 'tasks' / 'axpy.py'}]\nlibrary: {library}\n"
        "budget: {evaluations: 5}\n"
    )
    summary = run_sweep(
        config,
        ["strategy.name=greedy,random", "seed=0,1"],
        pool=InstantEvaluator(size=2),
        reporter_for=lambda index, _run: QuietPrinter(prefix=f"[cell {index}]"),
        announce=False,
    )
    return summary.sweep_id


def test_a_sweep_id_links_to_its_page_of_points_and_cells(tmp_path: Path, page: tuple[Any, Console]) -> None:
    library = tmp_path / "sweep.db"
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's event loop
        sweep_id = pool.submit(_sweep, library).result()
    pg, _console = page
    pg.set_default_timeout(TIMEOUT_MS)
    lib = open_library(library)
    try:
        with running(lib, poll_s=0.2) as base:
            pg.goto(base + "/")
            pg.locator("#sweeps").get_by_role("link", name=sweep_id).click()
            pg.wait_for_url(f"**/sweeps/{sweep_id}")
            points = pg.locator("#points tbody")
            points.get_by_text("strategy.name=random").wait_for()
            rows = [r.inner_text() for r in points.locator("tr").all()]
            assert len(rows) == 2 and "strategy.name=greedy" in rows[0]
            assert all("0, 1" in r for r in rows)  # the seeds each point is the mean over
            assert all("axpy" in r and "±" in r for r in rows)
            cells = pg.locator("#cells tbody tr")
            assert cells.count() == 4
            assert "finished" in cells.first.inner_text() and "5 / 5" in cells.first.inner_text()
            pg.wait_for_function("() => window.evoCharts && window.evoCharts['best-chart']")
            option = pg.evaluate(
                "() => { const o = window.evoCharts['best-chart'].getOption();"
                " return [o.yAxis[0].type, o.series.map(s => s.name)]; }"
            )
            assert option == ["log", ["strategy.name=greedy", "strategy.name=random"]]
            pg.screenshot(path=str(Path(SHOTS or tmp_path) / "sweep_page.png"), full_page=True)

            first_run = cells.first.get_by_role("link").inner_text()
            cells.first.get_by_role("link").click()
            pg.wait_for_url(f"**/runs/{first_run}")
            pg.goto(base + "/")  # the runs table's sweep column links there too
            pg.locator("#runs").get_by_role("link", name=f"{sweep_id} #0").click()
            pg.wait_for_url(f"**/sweeps/{sweep_id}")
            assert pg.request.get(f"{base}/api/sweeps/nosuchsweep").status == 404
            pg.goto("about:blank")  # the page's event stream ends before the server does
    finally:
        lib.close()


def test_a_cpu_runs_pool_health_does_not_name_a_gpu_lock(
    served: tuple[str, Fixture, str], page: tuple[Any, Console], tmp_path: Path
) -> None:
    base, fx, _url = served  # every evaluation of the fixture ran on "cpu (interpreter)"
    pg, _console = page
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(f"{base}/runs/{fx.run_id}")
    pool = pg.locator("#pool tbody")
    pool.get_by_text("mean per stage").wait_for()
    text = pool.inner_text()
    assert "GPU" not in text and "timing lock held / waited (CPU)" in text
    pool.screenshot(path=str(Path(SHOTS or tmp_path) / "pool_health_cpu.png"))


def test_a_runs_fast_p_spans_its_speedups_on_a_log_axis(
    served: tuple[str, Fixture, str], page: tuple[Any, Console], tmp_path: Path
) -> None:
    base, fx, _url = served  # best kernels: relu 1.8x, softmax 1.0x
    pg, _console = page
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(f"{base}/runs/{fx.run_id}")
    pg.wait_for_function("() => window.evoCharts && window.evoCharts['fastp-chart']")
    axis, shares = pg.evaluate(
        "() => { const o = window.evoCharts['fastp-chart'].getOption();"
        " return [o.xAxis[0], o.series[0].data.map(d => d[1])]; }"
    )
    # Before: a fixed linear 0-2 axis, on which a CPU run's 1e-4x speedups were a flat line at 0.
    assert axis["type"] == "log" and abs(axis["min"] - 0.5) < 1e-9 and abs(axis["max"] - 3.6) < 1e-9
    assert sorted(set(shares), reverse=True) == [1.0, 0.5, 0.0]
    pg.locator("#fastp-chart").screenshot(path=str(Path(SHOTS or tmp_path) / "fast_p_dashboard.png"))
