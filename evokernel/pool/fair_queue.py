"""Admission to the evaluation pool: a bounded, fair queue in front of a fixed number of slots.

The pool has ``capacity`` slots (actors x candidates in flight per actor); a request holds one
while it is submitted to Ray, so Ray never sees more than ``capacity`` calls. Requests beyond
that wait here, at most ``bound`` of them; further callers wait (in arrival order) for room in
the queue, so a burst of submissions costs memory in the callers, not in Ray.

Fairness: waiting requests are grouped by tenant (a run id; a sweep's runs share one pool) and a
freed slot goes to the tenants in turn (round robin), so a run that floods the pool delays
another run's next request by at most one request per other tenant. Within a tenant the
highest ``priority`` goes first (the engine gives fix attempts 1), then the earliest.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque


class FairQueue:
    def __init__(self, capacity: int, bound: int) -> None:
        if capacity < 1 or bound < 1:
            raise ValueError(f"capacity and bound must be >= 1, not {capacity} and {bound}")
        self.capacity, self.bound = capacity, bound
        self.in_flight = 0
        self.waiting = 0
        self.max_waiting = 0
        self._tenants: dict[str, list[tuple[int, int, asyncio.Future[None]]]] = {}
        self._turns: deque[str] = deque()
        self._overflow: deque[asyncio.Future[None]] = deque()
        self._seq = itertools.count()

    async def acquire(self, tenant: str = "default", priority: int = 0) -> None:
        """Wait for a slot. Pair every call with :meth:`release`."""
        loop = asyncio.get_running_loop()
        while self.waiting >= self.bound:
            room = loop.create_future()
            self._overflow.append(room)
            try:
                await room
            except asyncio.CancelledError:
                if room in self._overflow:
                    self._overflow.remove(room)
                self._wake_overflow()
                raise
        if self.in_flight < self.capacity and self.waiting == 0:
            self._take()
            return
        granted: asyncio.Future[None] = loop.create_future()
        if tenant not in self._tenants:
            self._tenants[tenant] = []
            self._turns.append(tenant)
        heapq.heappush(self._tenants[tenant], (-priority, next(self._seq), granted))
        self.waiting += 1
        self.max_waiting = max(self.max_waiting, self.waiting)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release()  # the slot was ours already: hand it on
            else:
                self.waiting -= 1  # its heap entry is skipped when reached
                self._wake_overflow()
            raise

    def resize(self, capacity: int) -> None:
        """Follow the pool's size as nodes come and go (at least 1: requests then wait for an actor)."""
        self.capacity = max(1, capacity)
        self._dispatch()

    def release(self) -> None:
        self.in_flight -= 1
        self._dispatch()

    def refill(self) -> None:
        """Hand out free slots after ``capacity`` was raised (the pool lowers it to 1 to run one
        request alone)."""
        self._dispatch()

    def _take(self) -> None:
        self.in_flight += 1

    def _dispatch(self) -> None:
        while self.in_flight < self.capacity and self._turns:
            tenant = self._turns.popleft()
            heap = self._tenants[tenant]
            granted = None
            while heap and granted is None:
                candidate = heapq.heappop(heap)[2]
                granted = None if candidate.done() else candidate
            if heap:
                self._turns.append(tenant)
            else:
                del self._tenants[tenant]
            if granted is not None:
                self.waiting -= 1
                self._take()
                granted.set_result(None)
                self._wake_overflow()

    def _wake_overflow(self) -> None:
        while self._overflow and self.waiting < self.bound:
            room = self._overflow.popleft()
            if not room.done():
                room.set_result(None)
                return
