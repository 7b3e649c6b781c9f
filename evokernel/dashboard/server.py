"""``evokernel dashboard``: open the library read-only and serve the app with uvicorn."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from evokernel.db import SolutionLibrary
from evokernel.db.readonly import display_url
from evokernel.exceptions import EvoKernelError

if TYPE_CHECKING:
    import uvicorn

# Open event streams would keep uvicorn waiting on Ctrl-C; pages reconnect by themselves.
GRACEFUL_SHUTDOWN_S = 2


def open_library(url_or_path: str | Path) -> SolutionLibrary:
    """The library as the dashboard sees it: read-only, never migrated (evokernel.db.readonly)."""
    return SolutionLibrary(url_or_path, read_only=True)


class DashboardError(EvoKernelError):
    """The dashboard could not be served (its server did not start)."""


class DashboardUnavailable(DashboardError):
    """The dashboard's dependencies (the ``dashboard`` extra) are not installed."""


def _server(lib: SolutionLibrary, host: str, port: int, poll_s: float, log_level: str) -> uvicorn.Server:
    try:
        import uvicorn

        from evokernel.dashboard.app import create_app
    except ImportError as exc:
        raise DashboardUnavailable(
            f"the dashboard needs its extra: pip install 'evokernel[dashboard]' (missing: {exc.name})"
        ) from exc

    config = uvicorn.Config(
        create_app(lib, poll_s),
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    return uvicorn.Server(config)


def serve(url_or_path: str | Path, host: str = "127.0.0.1", port: int = 8765, poll_s: float = 1.0) -> None:
    """Serve until interrupted."""
    lib = open_library(url_or_path)
    try:
        server = _server(lib, host, port, poll_s, "warning")
        print(
            f"evokernel dashboard on http://{host}:{port}/ reading {display_url(lib.url)} (read-only)",
            flush=True,
        )
        server.run()
    finally:
        lib.close()


@contextmanager
def running(
    lib: SolutionLibrary, host: str = "127.0.0.1", port: int = 0, poll_s: float = 1.0
) -> Iterator[str]:
    """The app served from a background thread (tests, notebooks); yields its base URL."""
    server = _server(lib, host, port, poll_s, "warning")
    thread = threading.Thread(target=server.run, name="evokernel-dashboard", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise DashboardError(f"the dashboard did not start on {host}:{port} (see the log above)")
            threading.Event().wait(0.02)
        bound = server.servers[0].sockets[0].getsockname()
        yield f"http://{bound[0]}:{bound[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
