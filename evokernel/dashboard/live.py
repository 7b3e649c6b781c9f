"""Live updates: one watcher polls the library's change token and pushes it to every open page
over server-sent events, so N viewers cost one cheap query per poll, not N.

A page subscribes to ``/api/events``; it receives ``event: version`` with the token at once and
again whenever the token changes, ``event: refreshed`` when a recomputed answer is ready
(evokernel.dashboard.cache), plus a comment every ``KEEPALIVE_S`` so proxies keep the stream open.
The browser's EventSource reconnects by itself after a dropped connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool

from evokernel.analysis.changes import LibraryState, library_state
from evokernel.db import SolutionLibrary
from evokernel.exceptions import LibraryError

log = logging.getLogger(__name__)
KEEPALIVE_S = 15.0


class Watcher:
    def __init__(self, lib: SolutionLibrary, poll_s: float) -> None:
        self.lib = lib
        self.poll_s = poll_s
        self.state = LibraryState("", {})
        self._subscribers: set[asyncio.Queue[str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._event_loop = asyncio.get_running_loop()
        self.state = await run_in_threadpool(library_state, self.lib)
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._broadcast("")  # ends every stream

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            try:
                state = await run_in_threadpool(library_state, self.lib)
            except LibraryError as exc:  # a database restart: keep the pages, try again next poll
                log.warning("dashboard: cannot read the library: %s", exc)
                continue
            if state.token != self.state.token:
                self.state = state
                self._broadcast(state.token)

    def answers_refreshed(self) -> None:
        """Called from any thread when a recomputed answer is ready: pages fetch again."""
        if self._event_loop is not None:
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile: nobody to tell
                self._event_loop.call_soon_threadsafe(self._broadcast, "refreshed")

    def _broadcast(self, message: str) -> None:
        for queue in self._subscribers:
            queue.put_nowait(message)

    @property
    def version(self) -> str:
        return self.state.token

    def stamp(self, run_id: str | None = None) -> str:
        """The library state an answer about ``run_id`` depends on (see evokernel.dashboard.cache):
        a run that is not running changes only with its status; anything else with any write."""
        status = self.state.statuses.get(run_id or "")
        return f"status:{status}" if status not in (None, "running") else self.state.token

    async def stream(self) -> AsyncIterator[str]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.add(queue)
        try:
            yield f"retry: 2000\nevent: version\ndata: {self.version}\n\n"
            while True:
                try:
                    version = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if not version:
                    return
                if version == "refreshed":
                    yield "event: refreshed\ndata: \n\n"
                else:
                    yield f"event: version\ndata: {version}\n\n"
        finally:
            self._subscribers.discard(queue)
