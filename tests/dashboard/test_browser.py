"""The dashboard as people see it: a real headless Chromium on a SQLite and a PostgreSQL fixture
library, failing on any console error (the ``page`` fixture checks after each test)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evokernel.db import SolutionLibrary
from evokernel.types import Task
from tests.dashboard.conftest import Console
from tests.dashboard.fixture_library import REFERENCE, Fixture, add, correct

# A shared 2-core box: generous, and the tests wait on content, not on time.
TIMEOUT_MS = 20_000
X = "\N{MULTIPLICATION SIGN}"  # the pages write speedups as "1.80" + X


def test_open_run_see_chart_click_tree_node_see_candidate_and_diff(
    served: tuple[str, Fixture, str], page: tuple[Any, Console], tmp_path: Path
) -> None:
    base, fx, _url = served
    pg, _console = page
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(base + "/")
    pg.get_by_role("link", name=fx.run_id).click()
    pg.wait_for_url(f"**/runs/{fx.run_id}")
    tasks = pg.locator("#tasks tbody")
    tasks.get_by_text(f"1.80{X}").wait_for()
    assert "relu" in tasks.inner_text() and "softmax" in tasks.inner_text()
    # The best relu kernel's speed-of-light share and bottleneck (profiling, issue 26).
    relu_row = pg.locator("#tasks tbody tr", has_text="relu").inner_text()
    assert "71%" in relu_row and "memory-bound" in relu_row
    # The chart drew: ECharts holds one best-so-far series per task, ending at relu's best.
    pg.wait_for_function("() => window.evoCharts && window.evoCharts['best-chart']")
    series = pg.evaluate(
        "() => window.evoCharts['best-chart'].getOption().series.map(s => [s.name, s.data.at(-1).value[1]])"
    )
    assert sorted(series) == [["relu", 1.8], ["softmax", 1.0]]
    assert pg.locator("#best-chart canvas").count() == 1
    pg.select_option("#best-x", "wall_s")  # the same curves against active run time
    pg.wait_for_function(
        "() => window.evoCharts['best-chart'].getOption().xAxis[0].name === 'active seconds'"
    )
    assert "SyntaxError" in pg.locator("#failures").inner_text()
    # Islands of relu (the first task): two islands' best curves and the migration between them.
    pg.wait_for_function("() => window.evoCharts['island-chart']")
    names = pg.evaluate("() => window.evoCharts['island-chart'].getOption().series.map(s => s.name)")
    assert names == ["island 0", "island 1", "migrations"]
    pg.screenshot(path=str(tmp_path / "run.png"), full_page=True)

    pg.locator("#tasks tbody tr", has_text="relu").get_by_role("link", name="evolution tree").click()
    pg.wait_for_function("() => window.evoTree && window.evoTree.nodes().length === 7")
    pg.get_by_text("7 candidates").wait_for()
    # Click the best node where Cytoscape drew it (rendered position is relative to the container).
    box = pg.locator("#tree").bounding_box()
    pos = pg.evaluate(f"() => window.evoTree.getElementById('{fx.best}').renderedPosition()")
    pg.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
    pg.wait_for_url(f"**/candidates/{fx.best}")
    pg.locator("#cand-title").get_by_text("correct").wait_for()
    assert f"1.80{X}" in pg.locator("#cand-title").inner_text()
    diff = pg.locator("#diffs .d2h-file-wrapper")
    diff.first.wait_for()
    # Candidate `best` changed the seed's torch.relu into a Triton kernel: the diff shows both.
    assert "torch.relu(x)" in diff.inner_text() and "tl.maximum(x, 0)" in diff.inner_text()
    assert pg.locator("#source.hljs").count() == 1
    evaluations = pg.locator("#evaluations").inner_text()
    assert "6 correctness trials" in evaluations and "25 reps (cuda_event)" in evaluations
    assert "fake/kernel-writer" in pg.locator("#llm").inner_text()

    pg.goto(f"{base}/candidates/{fx.crossover}")
    pg.locator("#diffs .d2h-file-wrapper").nth(1).wait_for()  # a crossover: one diff per parent
    assert re.search(rf"parent\s+#{fx.best}", pg.locator("#diffs").inner_text())
    pg.goto(f"{base}/runs/{fx.run_id}/failures")
    pg.locator("#failures").get_by_text("rule output_reuse", exact=False).wait_for()
    assert pg.locator("#error").is_hidden()


def test_page_updates_when_evaluations_are_written(
    served: tuple[str, Fixture, str], page: tuple[Any, Console]
) -> None:
    base, fx, url = served
    pg, _console = page
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(f"{base}/runs/{fx.run_id}")
    pg.locator("#tasks tbody").get_by_text(f"1.80{X}").wait_for()
    pg.locator("#live.on").wait_for()
    marker = pg.evaluate("() => (window.__marker = Math.random())")  # a reload would lose it
    writer = SolutionLibrary(url)
    try:
        faster = add(
            writer,
            fx.run_id,
            "relu",
            "# faster\n" + "x = 1\n",
            correct(2.5),
            parents=(fx.best,),
            generation=4,
        )
    finally:
        writer.close()
    relu = pg.locator("#tasks tbody tr", has_text="relu")
    relu.get_by_text(f"2.50{X}").wait_for()
    assert "8 / 40" in relu.inner_text()
    assert f"#{faster}" in relu.inner_text()
    last_relu = "window.evoCharts['best-chart'].getOption().series.find(s => s.name === 'relu').data.at(-1)"
    pg.wait_for_function(f"() => {last_relu}.value[1] === 2.5")
    assert pg.evaluate("() => window.__marker") == marker


def test_runs_page_lists_sweeps_with_their_cells_totals(
    served: tuple[str, Fixture, str], page: tuple[Any, Console]
) -> None:
    base, _fx, url = served
    pg, _console = page
    pg.set_default_timeout(TIMEOUT_MS)
    writer = SolutionLibrary(url)
    try:
        for cell, speedup in enumerate((1.2, 2.4)):
            sweep = {"id": "sw-demo", "cell": cell, "point": {"seed": cell}, "name": "demo-sweep"}
            run_id = writer.create_run(f"demo-{cell}", {"budget": {"evaluations": 5}, "sweep": sweep})
            writer.register_task(run_id, Task(name="relu", path="/tasks/relu.py", source=REFERENCE))
            add(writer, run_id, "relu", f"# cell {cell}\n", correct(speedup), llm=False)
    finally:
        writer.close()
    pg.goto(base + "/")
    row = pg.locator("#sweeps tbody tr", has_text="sw-demo")
    row.wait_for()
    text = row.inner_text()
    assert "demo-sweep" in text and "2 / 10" in text and f"2.40{X}" in text
    # its id, a link to the sweep's page, then its cells, each a link to its run page
    links = row.get_by_role("link")
    assert links.count() == 3 and links.first.get_attribute("href") == "/sweeps/sw-demo"
