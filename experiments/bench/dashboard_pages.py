"""Dashboard page times on a generated library of 1M evaluations (issue 20: pages < 1 s).

The library comes from dashboard_library.py (a long experiment's shape: one running run of 600k
evaluations among 9 runs). The script serves the dashboard read-only from a thread and times, per
page, the JSON calls the page makes: *computed* (the answer built from the library: what a
viewer waits for the first time, and what the background recomputation costs after a change) and
*served* (over HTTP with httpx once the answer cache holds it). ``--migrate-from OLD`` copies a
library written under an older schema (say, by this script before migration 0005) and times the
shipped migrations on it, then measures the copy: old code on OLD and new code on its copy see
the same rows. Prints tables, then one JSON line.

    python experiments/bench/dashboard_pages.py            # 1M evaluations: ~1-4 min fill, ~2 min
    python experiments/bench/dashboard_pages.py --evaluations 20000 --reps 3   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from dashboard_library import fill
from sqlite_to_postgres import copy_library

from evokernel.analysis.changes import library_version
from evokernel.dashboard import api, open_library, running
from evokernel.db import SolutionLibrary, upgrade

# The throwaway PostgreSQL server is test support (tests/support/), not product: reach it from the
# repository this script sits in (as engine_overhead.py does).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.pgserver import private_server


def p90(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.9 * len(xs)) - 1)]


def stats(xs: list[float]) -> tuple[float, float]:
    return round(statistics.median(xs) * 1e3, 1), round(p90(xs) * 1e3, 1)


def served(client: httpx.Client, url: str, reps: int) -> list[float]:
    """Times of ``url`` over HTTP after one call that fills the dashboard's answer cache."""
    client.get(url).raise_for_status()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        client.get(url).raise_for_status()
        out.append(time.perf_counter() - t)
    return out


def computed(fn: Callable[[], object], reps: int) -> list[float]:
    """Times of the page's JSON computed from the library (what a cache miss costs)."""
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


Work = dict[str, list[tuple[str, Callable[[], object]]]]


def pages(lib: SolutionLibrary, run_id: str) -> Work:
    """Each page's JSON calls: (URL, the same answer computed without the cache)."""
    overview = api.run(lib, run_id)["overview"]
    task = overview["tasks"][0]["task"]
    best = overview["tasks"][0]["best_candidate"]
    return {
        "runs": [("/api/runs", lambda: api.runs(lib))],
        "run": [
            (f"/api/runs/{run_id}", lambda: api.run(lib, run_id)),
            (f"/api/runs/{run_id}/best?x=evaluations", lambda: api.best(lib, run_id, "evaluations")),
            (f"/api/runs/{run_id}/failures", lambda: api.failures(lib, run_id)),
            (f"/api/runs/{run_id}/islands", lambda: api.islands(lib, run_id)),
        ],
        # The run page's chart switched to its other axes (one JSON call each).
        "run_axis_wall_s": [
            (f"/api/runs/{run_id}/best?x=wall_s", lambda: api.best(lib, run_id, "wall_s")),
        ],
        "run_axis_usd": [(f"/api/runs/{run_id}/best?x=usd", lambda: api.best(lib, run_id, "usd"))],
        "tree": [(f"/api/runs/{run_id}/tree?task={task}", lambda: api.tree(lib, run_id, task))],
        "candidate": [(f"/api/candidates/{best}", lambda: api.candidate(lib, best))],
        "failures": [(f"/api/runs/{run_id}/failures", lambda: api.failures(lib, run_id))],
    }


def measure(path: Path | str, run_id: str, reps: int, computed_reps: int, label: str) -> dict[str, object]:
    """Computed and served times of every page, as JSON keys; prints a table."""
    lib = open_library(path)
    try:
        work = pages(lib, run_id)
        cold: dict[str, list[float]] = {}
        for urls in work.values():
            for url, fn in urls:
                if url not in cold:
                    cold[url] = computed(fn, computed_reps)
                    print(f"[{label}] computed {url}: {stats(cold[url])[0]} ms", flush=True)
        token = computed(lambda: library_version(lib), reps)
        with running(lib) as base, httpx.Client(base_url=base, timeout=600) as client:
            warm = {url: served(client, url, reps) for urls in work.values() for url, _fn in urls}
    finally:
        lib.close()
    print(
        f"[{label}] {'endpoint':60s} {'computed median/p90 ms':>24s} {'served (cached) median/p90 ms':>30s}"
    )
    for url in cold:
        print(
            f"[{label}] {url:60s} {'{} / {}'.format(*stats(cold[url])):>24s} "
            f"{'{} / {}'.format(*stats(warm[url])):>30s}"
        )
    out: dict[str, object] = {
        f"{label}_version_token_ms": stats(token)[0],
        f"{label}_computed_ms_median_by_endpoint": {url: stats(times)[0] for url, times in cold.items()},
    }
    for name, urls in work.items():
        for kind, times, n in (("computed", cold, computed_reps), ("served", warm, reps)):
            totals = [sum(times[u][i] for u, _fn in urls) for i in range(n)]
            med, high = stats(totals)
            out[f"{label}_{name}_{kind}_ms_median"] = med
            out[f"{label}_{name}_{kind}_ms_p90"] = high
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--evaluations", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--big-share", type=float, default=0.6)
    parser.add_argument("--reps", type=int, default=9, help="served (cached) calls per endpoint")
    parser.add_argument("--computed-reps", type=int, default=3, help="uncached computations per page")
    parser.add_argument("--library", type=Path, help="reuse (or create) the library at this path")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="copy the library into a private PostgreSQL server and measure there instead",
    )
    parser.add_argument(
        "--migrate-from", type=Path, help="copy this older library, time its upgrade, measure the copy"
    )
    args = parser.parse_args()
    if args.library:
        path = args.library
    else:  # a new folder only when the library is made here (kept: reuse it with --library)
        bench_dir = os.environ.get("BENCH_DIR", "/tmp")
        path = Path(tempfile.mkdtemp(prefix="evokernel-dash-bench-", dir=bench_dir)) / "library.db"
    t = time.perf_counter()
    upgrade_s = None
    if args.migrate_from:
        for old in args.migrate_from.parent.glob(args.migrate_from.name + "*"):  # with its -wal, if any
            shutil.copyfile(old, path.parent / (path.name + old.name.removeprefix(args.migrate_from.name)))
        t = time.perf_counter()
        upgrade(str(path))
        upgrade_s = round(time.perf_counter() - t, 1)
    reused = path.exists()
    if not reused:
        fill(path, args.evaluations, args.runs, args.big_share)
    fill_s = time.perf_counter() - t
    conn = sqlite3.connect(path)
    run_id = conn.execute("SELECT id FROM runs ORDER BY id LIMIT 1").fetchone()[0]
    evaluations = conn.execute("SELECT count(*) FROM evaluations").fetchone()[0]
    big = conn.execute(
        "SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE c.run_id = ?",
        (run_id,),
    ).fetchone()[0]
    indexes = sorted(
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    )
    conn.close()
    size = sum(f.stat().st_size for f in path.parent.glob(path.name + "*"))
    print(f"library {path}: {evaluations} evaluations ({big} in run {run_id}), {size / 1e9:.2f} GB")
    result: dict[str, object] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "backend": "sqlite",
        "evaluations": evaluations,
        "run_evaluations": big,
        "library_gb": round(size / 1e9, 2),
        "fill_s": None if reused else round(fill_s, 1),
        "upgrade_s": upgrade_s,
        "reps_served": args.reps,
        "reps_computed": args.computed_reps,
        "indexes": indexes,
    }
    if args.postgres:
        with private_server() as server:
            url = server.create_database("evokernel")
            result["backend"] = f"postgresql {server.version_num}"
            result["postgres_copy_s"] = copy_library(path, url)
            print(f"copied into {url}: {result['postgres_copy_s']}", flush=True)
            result.update(measure(url, run_id, args.reps, args.computed_reps, "shipped"))
    else:
        result.update(measure(path, run_id, args.reps, args.computed_reps, "shipped"))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
