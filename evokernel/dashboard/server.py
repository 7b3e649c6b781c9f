"""``evokernel dashboard``: open the library read-only and serve the app with uvicorn."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from evokernel.db import SolutionLibrary
from evokernel.db.readonly import display_url
from evokernel.db.urls import require_existing
from evokernel.exceptions import EvoKernelError

if TYPE_CHECKING:
    import uvicorn

# Open event streams would keep uvicorn waiting on Ctrl-C; pages reconnect by themselves.
GRACEFUL_SHUTDOWN_S = 2
LISTEN_BACKLOG = 2048  # uvicorn's default


def open_library(url_or_path: str | Path) -> SolutionLibrary:
    """The library as the dashboard sees it: read-only, never migrated (evokernel.db.readonly)."""
    return SolutionLibrary(url_or_path, read_only=True)


class DashboardError(EvoKernelError):
    """The dashboard could not be served (its server did not start)."""


class DashboardUnavailable(DashboardError):
    """The dashboard's dependencies (the ``dashboard`` extra) are not installed."""


class PortInUse(DashboardError):
    """The dashboard's port is taken by another process."""


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
    """Serve until interrupted. The port is bound before the URL is printed, so a URL on the screen
    is one that answers; a port in use is a :class:`PortInUse` naming ``--port``."""
    require_existing(url_or_path, "dashboard")
    lib = open_library(url_or_path)
    try:
        server = _server(lib, host, port, poll_s, "warning")
        sock = bind(host, port)
        shown_host = f"[{host}]" if ":" in host else host
        print(
            f"evokernel dashboard on http://{shown_host}:{sock.getsockname()[1]}/ reading "
            f"{display_url(lib.url)} (read-only); Ctrl-C stops it",
            flush=True,
        )
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:
            pass  # uvicorn shut down cleanly and raised the Ctrl-C again: stopping is what was asked
        finally:
            sock.close()
        print("evokernel dashboard stopped", flush=True)
    finally:
        lib.close()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port), as uvicorn would make it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} on {host} is already in use (another dashboard?); "
                f"choose another with --port, e.g. --port {port + 1}"
            ) from exc
        raise DashboardError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(LISTEN_BACKLOG)  # connections from now on wait for uvicorn instead of being refused
    return sock


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
