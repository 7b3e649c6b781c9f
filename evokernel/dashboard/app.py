"""The Starlette application: HTML pages, their JSON API, the live-update stream, static files.

Pages are thin shells; their script fetches ``/api/...`` and redraws when ``/api/events`` says
the library changed, so a page shows the same figures on first load and on every update. Handlers
are plain functions, which Starlette runs in its thread pool: each is one short read transaction.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

import evokernel.dashboard.api as api
from evokernel.dashboard.cache import AnswerCache
from evokernel.dashboard.live import Watcher
from evokernel.db import SolutionLibrary
from evokernel.db.readonly import display_url
from evokernel.exceptions import AnalysisError, EvoKernelError, LibraryError, RunNotFoundError

HERE = Path(__file__).parent
# Running runs whose run pages are computed when the dashboard starts (newest first).
PREWARM_RUNS = 4
log = logging.getLogger(__name__)
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))


def _json(payload: Any, status: int = 200) -> Response:
    body = json.dumps(payload, allow_nan=False, separators=(",", ":"))
    return Response(body, status_code=status, media_type="application/json")


def _guarded(fn: Callable[[Request], Any]) -> Callable[[Request], Response]:
    """A JSON handler whose known errors become 404 (nothing there) or 503 (library unreachable)."""

    def handler(request: Request) -> Response:
        try:
            return _json(fn(request))
        except (AnalysisError, RunNotFoundError) as exc:
            return _json({"error": str(exc)}, 404)
        except LibraryError as exc:
            return _json({"error": str(exc)}, 503)
        except ValueError as exc:  # a malformed query parameter
            return _json({"error": str(exc)}, 400)
        except KeyError as exc:
            return _json({"error": f"missing query parameter {exc}"}, 400)

    return handler


def create_app(lib: SolutionLibrary, poll_s: float = 1.0) -> Starlette:
    """The dashboard over ``lib`` (open it with ``read_only=True``); ``poll_s``: how often the one
    watcher looks for changes."""
    watcher = Watcher(lib, poll_s)
    library_name = display_url(lib.url)

    cache = AnswerCache(on_refreshed=watcher.answers_refreshed)

    def prewarm() -> None:
        """Compute the runs list and the newest running runs' run pages before anyone asks: the
        first computation of a 600k-evaluation run's page takes 0.6-0.9 s on a 2-core box
        (docs/benchmarks.md), so the first viewer gets it from the cache."""
        try:
            listing = cache.get(("/api/runs", ()), watcher.stamp(), lambda: api.runs(lib))
            running = [r["id"] for r in listing["runs"] if r["status"] == "running"][:PREWARM_RUNS]
            for rid in running:
                base = f"/api/runs/{rid}"
                for key, compute in (
                    ((base, ()), lambda rid=rid: api.run(lib, rid)),
                    (
                        (f"{base}/best", (("x", "evaluations"),)),
                        lambda rid=rid: api.best(lib, rid, "evaluations"),
                    ),
                    ((f"{base}/failures", ()), lambda rid=rid: api.failures(lib, rid)),
                    ((f"{base}/islands", ()), lambda rid=rid: api.islands(lib, rid)),
                ):
                    cache.get(key, watcher.stamp(rid), compute)
        except EvoKernelError as exc:  # a page computes it again when asked
            log.warning("dashboard: prewarming failed: %s", exc)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await watcher.start()
        app.state.cache = cache
        threading.Thread(target=prewarm, name="evokernel-dashboard-prewarm", daemon=True).start()
        try:
            yield
        finally:
            await watcher.stop()

    def answer(run_param: str | None, compute: Callable[[Request], Any]) -> Callable[[Request], Response]:
        """A cached JSON handler: keyed by path and query, valid while the library state the
        answer depends on (the run's, for ``run_param``) is unchanged."""

        def fn(request: Request) -> Any:
            run_id = request.path_params.get(run_param) if run_param else None
            key = (request.url.path, tuple(sorted(request.query_params.multi_items())))
            return cache.get(key, watcher.stamp(run_id), lambda: compute(request))

        return _guarded(fn)

    def page(template: str, **ids: Callable[[Request], Any]) -> Callable[[Request], Response]:
        def handler(request: Request) -> Response:
            context = {"library": library_name, **{k: get(request) for k, get in ids.items()}}
            return TEMPLATES.TemplateResponse(request, template, context)

        return handler

    def path(name: str) -> Callable[[Request], Any]:
        return lambda r: r.path_params[name]

    def query(name: str, default: str = "") -> Callable[[Request], str]:
        return lambda r: r.query_params.get(name, default)

    async def events(_request: Request) -> StreamingResponse:
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(watcher.stream(), media_type="text/event-stream", headers=headers)

    routes = [
        Route("/", page("runs.html")),
        Route("/runs/{run_id}", page("run.html", run_id=path("run_id"))),
        Route("/runs/{run_id}/tree", page("tree.html", run_id=path("run_id"), task=query("task"))),
        Route("/runs/{run_id}/failures", page("failures.html", run_id=path("run_id"))),
        Route("/sweeps/{sweep_id}", page("sweep.html", sweep_id=path("sweep_id"))),
        Route("/candidates/{cid:int}", page("candidate.html", cid=path("cid"))),
        Route("/api/runs", answer(None, lambda r: api.runs(lib))),
        Route("/api/runs/{run_id}", answer("run_id", lambda r: api.run(lib, r.path_params["run_id"]))),
        Route("/api/sweeps/{sweep_id}", answer(None, lambda r: api.sweep(lib, r.path_params["sweep_id"]))),
        Route(
            "/api/runs/{run_id}/best",
            answer(
                "run_id",
                lambda r: api.best(lib, r.path_params["run_id"], r.query_params.get("x", "evaluations")),
            ),
        ),
        Route(
            "/api/runs/{run_id}/islands",
            answer("run_id", lambda r: api.islands(lib, r.path_params["run_id"])),
        ),
        Route(
            "/api/runs/{run_id}/failures",
            answer("run_id", lambda r: api.failures(lib, r.path_params["run_id"])),
        ),
        Route(
            "/api/runs/{run_id}/tree",
            answer(
                "run_id",
                lambda r: api.tree(
                    lib,
                    r.path_params["run_id"],
                    r.query_params["task"],
                    int(r.query_params.get("limit", api.DEFAULT_LIMIT)),
                ),
            ),
        ),
        Route("/api/candidates/{cid:int}", answer(None, lambda r: api.candidate(lib, r.path_params["cid"]))),
        Route("/api/version", lambda r: JSONResponse({"version": watcher.version})),
        Route("/api/events", events),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
