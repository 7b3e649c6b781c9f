"""The harness-fault retry: a request whose evaluation failed in the harness itself (e.g. out of
GPU memory with eight candidates sharing the device) runs again with nothing else in flight on
the pool. No slot is handed out meanwhile and the ones in flight finish first; the retry's
verdict stands, with the first failure kept in ``details["harness_retry"]``."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable

from evokernel.pool.fair_queue import FairQueue
from evokernel.types import Evaluation


class SoloRetry:
    """Retries after a harness fault, one at a time, each alone on ``queue``'s slots."""

    def __init__(self, queue: FairQueue) -> None:
        self.queue = queue
        self._alone: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._held_for_retry = 0

    async def run(
        self, submit: Callable[[], Awaitable[Evaluation]], capacity: Callable[[], int], first: Evaluation
    ) -> Evaluation:
        """``submit`` runs the request once more; ``capacity`` is the pool's slot count, given
        back to the queue afterwards."""
        loop = asyncio.get_running_loop()
        if self._alone is None or self._alone[0] is not loop:
            self._alone = (loop, asyncio.Lock())
        self._held_for_retry += 1  # its slot is held but idle: it does not count as running
        async with self._alone[1]:
            self._held_for_retry -= 1
            self.queue.capacity = 1  # hand out no slot while it runs
            try:
                while self.queue.in_flight - self._held_for_retry > 1:
                    await asyncio.sleep(0.2)
                evaluation = await submit()
            finally:
                self.queue.capacity = capacity()
                self.queue.refill()  # the slots held back go to the waiting requests
        return dataclasses.replace(
            evaluation, details={**evaluation.details, "harness_retry": {"first": first.reason}}
        )
