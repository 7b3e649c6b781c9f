"""A limit on work in flight whose size follows the cluster: an asyncio semaphore that reads its
size each time a slot is asked for.

The engine keeps at most twice what the pool runs at once in flight (so the pool never idles and
the queue never grows without bound). The pool's size changes when nodes join or leave
(:mod:`evokernel.pool.placement`), so the limit is read from the pool, not fixed at start: a run that
began on one node and gained three feeds all four. A shrunk limit lets work already in flight
finish; only new entries wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class ElasticLimit:
    def __init__(self, size: Callable[[], int]) -> None:
        self._size = size
        self.held = 0
        self._changed = asyncio.Condition()

    def size(self) -> int:
        return max(1, self._size())

    async def __aenter__(self) -> None:
        async with self._changed:
            # A grown pool is seen when any slot is released (evaluations finish every few seconds).
            await self._changed.wait_for(lambda: self.held < self.size())
            self.held += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self.held -= 1
            self._changed.notify_all()
