"""``TaskProgress``: what the engine keeps in memory about one task of a run while it runs.

Everything here is loaded from the library when a run starts or resumes (the engine is the only
writer of its run), so it is a cache of recorded facts, never a source of them.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field

from evokernel.mutators.exemplars import Exemplar
from evokernel.strategies.base import Strategy
from evokernel.types import Scored, Task

# Most recently evaluated candidates kept per task for parent lookups (~2 KiB of source each).
PARENT_CACHE = 4096


@dataclass
class TaskProgress:
    task: Task
    strategy: Strategy
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    stopped: str = ""
    # evaluated + pending + open candidate proposals: what the evaluation budget has committed.
    committed: int = 0
    evaluated: int = 0
    failed_streak: int = 0
    # source hash -> (generation, proposal seq) of its first candidate; see Engine._avoid.
    hashes: dict[str, tuple[int, int]] = field(default_factory=dict)
    avoid_cache: tuple[int, frozenset[str]] | None = None
    # ((generation, window), evaluated candidates of earlier generations): MutationRequest.history.
    history_cache: tuple[tuple[int, int | None], tuple[Scored, ...]] | None = None
    # (generation, proposal id -> idea for earlier generations): MutationRequest.ideas_of.
    ideas_cache: tuple[int, dict[int, str]] | None = None
    # (generation, related tasks' best kernels): MutationRequest.exemplars.
    exemplars_cache: tuple[int, tuple[Exemplar, ...]] | None = None
    by_generation: dict[int, dict[str, int]] = field(default_factory=dict)  # gen -> hash -> seq

    def add_hash(self, digest: str, generation: int, seq: int) -> None:
        if digest not in self.hashes:
            self.hashes[digest] = (generation, seq)
            self.by_generation.setdefault(generation, {})[digest] = seq

    best: Scored | None = None
    failure: BaseException | None = None  # the first exception a job raised
    last_generation: int = -1  # highest generation of a recorded proposal
    # Evaluated candidates by id (they never change), so parents are not read back per proposal.
    evaluated_cache: OrderedDict[int, Scored] = field(default_factory=OrderedDict)

    def remember(self, scored: Scored) -> None:
        self.evaluated_cache[scored.candidate.id] = scored
        if len(self.evaluated_cache) > PARENT_CACHE:
            self.evaluated_cache.popitem(last=False)
