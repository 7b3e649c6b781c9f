"""Deduplication in front of the pool: identical (task, source, settings) requests are evaluated
once. A request that arrives while its twin is in flight waits for it, later ones get the
remembered result (crashes and timeouts are not remembered); either copy says
``details["deduplicated"]``."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from evokernel.pool.health import PoolStats
from evokernel.types import Evaluation, Status

# Finished evaluations remembered for deduplication (a few KB each).
MEMO_SIZE = 4096


class Deduplicator:
    """Finished evaluations by key (the last ``MEMO_SIZE``) and the ones in flight."""

    def __init__(self, stats: PoolStats) -> None:
        self.stats = stats
        self._memo: OrderedDict[str, Evaluation] = OrderedDict()
        self._pending: dict[str, asyncio.Future[Evaluation]] = {}

    async def evaluate(self, key: str, evaluate_new: Callable[[], Awaitable[Evaluation]]) -> Evaluation:
        """The evaluation for ``key``: remembered, awaited from its twin, or ``evaluate_new()``."""
        if key in self._memo:
            self._memo.move_to_end(key)
            self.stats.deduplicated += 1
            return _deduplicated(self._memo[key])
        if key in self._pending:
            self.stats.deduplicated += 1
            return _deduplicated(await asyncio.shield(self._pending[key]))
        future: asyncio.Future[Evaluation] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # no "never retrieved"
        self._pending[key] = future
        try:
            evaluation = await evaluate_new()
        except asyncio.CancelledError:
            future.cancel()  # its waiters are cancelled too (the driver is stopping)
            raise
        except BaseException as exc:
            future.set_exception(exc)
            raise
        finally:
            del self._pending[key]
        future.set_result(evaluation)
        if evaluation.status not in (Status.CRASHED, Status.TIMEOUT):
            self._memo[key] = evaluation
            if len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        return evaluation


def _deduplicated(evaluation: Evaluation) -> Evaluation:
    return dataclasses.replace(evaluation, details={**evaluation.details, "deduplicated": True})
