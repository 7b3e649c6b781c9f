"""The dashboard's JSON and event stream over HTTP: the figures are the analysis module's, reshaped."""

from __future__ import annotations

import threading
import time

import httpx

from evokernel import analysis
from evokernel.analysis.changes import library_version
from evokernel.db import SolutionLibrary
from evokernel.types import Status
from tests.dashboard.fixture_library import Fixture, add, correct


def test_run_figures_are_the_analysis_figures(served: tuple[str, Fixture, str]) -> None:
    base, fx, url = served
    lib = SolutionLibrary(url)
    try:
        expected = analysis.run_overview(lib, fx.run_id)
    finally:
        lib.close()
    data = httpx.get(f"{base}/api/runs/{fx.run_id}").json()
    tasks = {t["task"]: t for t in data["overview"]["tasks"]}
    for t in expected.tasks:
        assert tasks[t.task]["best_candidate"] == t.best_candidate
        assert tasks[t.task]["speedup_eager"] == t.speedup_eager
    assert data["overview"]["geomean"] == expected.geomean
    assert data["pool"]["evaluations"] == 9
    (listed,) = httpx.get(f"{base}/api/runs").json()["runs"]
    assert listed["id"] == fx.run_id and listed["best_speedup"] == 1.8 and "config" not in listed


def test_best_so_far_keeps_every_step_and_the_last_point(served: tuple[str, Fixture, str]) -> None:
    base, fx, _url = served
    relu = httpx.get(f"{base}/api/runs/{fx.run_id}/best", params={"x": "evaluations"}).json()["tasks"]["relu"]
    # seed 1.0 at n=1, 1.8 at n=2 (the best), unchanged through the 7th evaluated candidate
    assert [(p[1], p[2], p[3]) for p in relu["points"]] == [
        (1.0, fx.seed, 1),
        (1.8, fx.best, 2),
        (1.8, fx.best, 7),
    ]
    assert relu["evaluated"] == 7
    bad = httpx.get(f"{base}/api/runs/{fx.run_id}/best", params={"x": "furlongs"})
    assert bad.status_code == 404 and "evaluations" in bad.json()["error"]


def test_candidate_has_one_diff_per_parent(served: tuple[str, Fixture, str]) -> None:
    base, fx, _url = served
    data = httpx.get(f"{base}/api/candidates/{fx.crossover}").json()
    assert [d["parent"] for d in data["diffs"]] == [fx.best, fx.child]
    first = data["diffs"][0]["diff"]
    assert (
        first.startswith("diff --git") and "-    tl.store(y_ptr + offs, tl.maximum(x, 0), mask=mask)" in first
    )
    assert data["node"]["model"] == "fake/kernel-writer" and data["llm_calls"][0]["prompt"]
    assert httpx.get(f"{base}/api/candidates/999999").status_code == 404
    assert (
        httpx.get(f"{base}/api/runs/{fx.run_id}/tree", params={"task": "relu", "limit": 0}).status_code == 404
    )
    assert httpx.get(f"{base}/api/runs/{fx.run_id}/tree").status_code == 400


def test_event_stream_announces_each_change(served: tuple[str, Fixture, str]) -> None:
    base, fx, url = served
    versions: list[str] = []
    got_two = threading.Event()

    def listen() -> None:
        with httpx.stream("GET", f"{base}/api/events", timeout=60) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    versions.append(line[6:])
                    if len(versions) == 1:
                        first_seen.set()
                    if len(versions) == 2:
                        got_two.set()
                        return

    first_seen = threading.Event()
    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert first_seen.wait(30)
    writer = SolutionLibrary(url)
    try:
        cid = add(writer, fx.run_id, "softmax", "# new\n", None, llm=False)
        writer.record_evaluation(cid, correct(1.2))
        final = library_version(writer)
    finally:
        writer.close()
    assert got_two.wait(30), versions
    assert versions[1] != versions[0]
    # The watcher may have seen the candidate before its evaluation; it ends on the final state.
    deadline = time.monotonic() + 30
    while httpx.get(f"{base}/api/version").json()["version"] != final:
        assert time.monotonic() < deadline, "the watcher never saw the evaluation"
        time.sleep(0.1)
    assert Status.CORRECT.value in httpx.get(f"{base}/api/candidates/{cid}").text


def test_islands_carry_members_best_curves_and_migrations(served: tuple[str, Fixture, str]) -> None:
    base, fx, _url = served
    relu = httpx.get(f"{base}/api/runs/{fx.run_id}/islands").json()["tasks"]["relu"]
    zero, one = relu["islands"]
    assert (zero["candidates"], zero["correct"], zero["best"]) == (3, 2, 1.8)
    assert (one["candidates"], one["correct"], one["best"]) == (4, 2, 1.6)
    assert zero["curve"] == [[0, 1.0], [1, 1.8], [2, 1.8]]  # runs on to its last generation
    assert (zero["migrants_out"], one["migrants_in"]) == (1, 1)
    assert [(e["kind"], e["from_island"], e["island"], e["candidate"]) for e in relu["events"]] == [
        ("migrate", 0, 1, fx.best)
    ]


def test_running_runs_are_computed_before_anyone_asks(fixture_library: tuple[str, Fixture]) -> None:
    from starlette.testclient import TestClient

    from evokernel.dashboard import open_library
    from evokernel.dashboard.app import create_app

    url, fx = fixture_library
    lib = open_library(url)
    try:
        app = create_app(lib, poll_s=0.2)
        with TestClient(app) as client:
            deadline = time.monotonic() + 60
            # The runs list and the running fixture run's overview, curves, failures, islands.
            while app.state.cache.computed < 5:
                assert time.monotonic() < deadline, "the running run's pages were not prewarmed"
                time.sleep(0.05)
            done = app.state.cache.computed
            assert client.get(f"/api/runs/{fx.run_id}/best", params={"x": "evaluations"}).status_code == 200
            assert client.get(f"/api/runs/{fx.run_id}").status_code == 200
            assert app.state.cache.computed == done  # answered from the prewarmed cache
    finally:
        lib.close()
