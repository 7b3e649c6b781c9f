"""The engine's limit on evaluations in flight follows the pool's size as nodes join and leave."""

from __future__ import annotations

import asyncio

from evokernel.run.elastic import ElasticLimit


def test_the_limit_follows_its_size_as_it_grows_and_shrinks() -> None:
    async def scenario() -> list[list[int]]:
        size = [1]
        limit = ElasticLimit(lambda: size[0])
        inside: list[int] = []
        done = {i: asyncio.Event() for i in range(4)}
        seen: list[list[int]] = []

        async def job(i: int) -> None:
            async with limit:
                inside.append(i)
                await done[i].wait()
                inside.remove(i)

        async def settle() -> None:
            for _ in range(5):
                await asyncio.sleep(0)
            seen.append(sorted(inside))

        jobs = [asyncio.ensure_future(job(i)) for i in range(3)]
        await settle()  # size 1: one in
        size[0] = 3  # two nodes joined
        done[0].set()
        await settle()  # the next release lets both waiters in
        size[0] = 1  # the nodes left again
        jobs.append(asyncio.ensure_future(job(3)))
        done[1].set()
        await settle()  # job 2 still holds the one slot: job 3 waits
        done[2].set()
        await settle()
        done[3].set()
        await asyncio.gather(*jobs)
        assert limit.held == 0
        return seen

    assert asyncio.run(scenario()) == [[0], [1, 2], [2], [3]]
