"""Speedups on the dashboard carry their 95 % interval (issue 35): the API hands out the interval
beside each figure, the pages show "2.05x [1.98-2.11]" (with the pages' multiplication sign), a
candidate's page says how many pairs were timed and whether the figure was confirmed, and a figure
from before paired timing stays bare."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import httpx

from evokernel.db import SolutionLibrary
from evokernel.types import Evaluation, Task
from tests.dashboard.conftest import Console
from tests.dashboard.fixture_library import REFERENCE, Fixture, add, correct

TIMEOUT_MS = 20_000
X = "\N{MULTIPLICATION SIGN}"
# With the spread between windows that went into the interval (evaluation/pairing.py).
PAIRED = {"pairs": 24, "stopped": "precision", "halfwidth": 0.015, "level": 0.95, "window_spread": 0.04}
# As run/confirm.py records it: 1.62x as fast as candidate #3 in their shared window.
CONFIRMATION = {
    "vs_incumbent": 1.62,
    "low": 1.55,
    "high": 1.7,
    "pairs": 16,
    "incumbent": 3,
    "first": {"speedup": 2.2, "low": 2.1, "high": 2.3, "status": "correct"},
}


def paired(speedup: float, low: float, high: float) -> Evaluation:
    ev = correct(speedup)
    timing = {**ev.details["timing"], "paired": PAIRED}
    details = {**ev.details, "timing": timing, "confirmation": CONFIRMATION}
    return dataclasses.replace(ev, speedup_low=low, speedup_high=high, confirmed=True, details=details)


def paired_run(url: str) -> tuple[str, int, int]:
    """A run whose relu best was timed paired and confirmed, and whose softmax best was not."""
    lib = SolutionLibrary(url)
    try:
        run_id = lib.create_run("paired-run", {"budget": {"evaluations": 5}})
        for pos, name in enumerate(("relu", "softmax")):
            lib.register_task(
                run_id, Task(name=name, path=f"/tasks/{name}.py", source=REFERENCE), position=pos
            )
        seed = add(lib, run_id, "relu", "# seed\n", paired(1.0, 0.97, 1.03), operator="seed", llm=False)
        best = add(lib, run_id, "relu", "# fused\n", paired(2.05, 1.98, 2.11), parents=(seed,), generation=1)
        old = add(lib, run_id, "softmax", "# old\n", correct(1.3), operator="seed", llm=False)
    finally:
        lib.close()
    return run_id, best, old


def test_api_gives_each_figure_its_interval(served: tuple[str, Fixture, str]) -> None:
    base, _fx, url = served
    run_id, best, old = paired_run(url)
    tasks = {t["task"]: t for t in httpx.get(f"{base}/api/runs/{run_id}").json()["overview"]["tasks"]}
    assert (tasks["relu"]["speedup_low"], tasks["relu"]["speedup_high"], tasks["relu"]["confirmed"]) == (
        1.98,
        2.11,
        True,
    )
    assert tasks["softmax"]["speedup_low"] is None and tasks["softmax"]["speedup_high"] is None
    cand = httpx.get(f"{base}/api/candidates/{best}").json()
    assert cand["node"]["speedup_low"] == 1.98 and cand["evaluations"][-1]["speedup_high"] == 2.11
    tree = httpx.get(f"{base}/api/runs/{run_id}/tree", params={"task": "relu"}).json()
    assert {n["id"]: n["speedup_low"] for n in tree["nodes"]}[best] == 1.98
    assert httpx.get(f"{base}/api/candidates/{old}").json()["node"]["speedup_low"] is None


def test_run_and_candidate_pages_show_the_interval(
    served: tuple[str, Fixture, str], page: tuple[Any, Console], tmp_path: Path
) -> None:
    base, _fx, url = served
    run_id, best, old = paired_run(url)
    pg, _console = page
    pg.set_default_timeout(TIMEOUT_MS)
    pg.goto(f"{base}/runs/{run_id}")
    relu = pg.locator("#tasks tbody tr", has_text="relu")
    relu.get_by_text(f"2.05{X} [1.98-2.11]").wait_for()
    softmax = pg.locator("#tasks tbody tr", has_text="softmax").inner_text()
    assert f"1.30{X}" in softmax and "[" not in softmax  # from before paired timing: bare
    pg.screenshot(path=str(tmp_path / "run-intervals.png"), full_page=True)

    pg.goto(f"{base}/candidates/{best}")
    pg.locator("#cand-title").get_by_text(f"2.05{X} [1.98-2.11]").wait_for()
    evaluations = pg.locator("#evaluations")
    evaluations.get_by_text("24 pairs, stopped at precision").wait_for()
    text = evaluations.inner_text()
    assert f"2.05{X} [1.98-2.11]" in text and "±1.5 % with 4.0 % between windows" in text
    assert f"confirmed: 1.62{X} [1.55-1.70] as fast as #3 in one window (16 pairs)" in text
    assert f"first figure 2.20{X} [2.10-2.30]" in text
    pg.screenshot(path=str(tmp_path / "candidate-intervals.png"), full_page=True)

    pg.goto(f"{base}/candidates/{old}")
    pg.locator("#evaluations").get_by_text("not paired").wait_for()
    assert "[" not in pg.locator("#cand-title").inner_text()
