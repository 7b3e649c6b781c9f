"""PIKE-O: OpenEvolve-style islands with MAP-Elites grids, an elite archive and ring migration.

Generations are synchronous (generation g is planned from generations < g only, so a seed
reproduces a run whatever order evaluations finish in); each makes ``batch`` proposals per island.

- **Islands** (default 3): generation 0 seeds island 0; at each boundary an island with no
  correct member is reseeded with the best candidate overall (how islands 1.. get started).
- **MAP-Elites grid** per island over ``features`` (code_length, speedup, kernel_count, and
  bottleneck: the profiler's class, evaluation/profiling/), ``bins`` cells per feature (bottleneck
  uses its 5 classes, fewer when ``bins`` is smaller): each cell keeps its fastest member.
  **Archive**: the ``archive_size`` fastest correct candidates over all islands.
- **Parent sampling** per proposal: exploration (``exploration_ratio``, 0.2) uniform over the
  island's grid cells; exploitation (``exploitation_ratio``, 0.7) uniform over the archive
  members living on the island (the whole archive if none do); random (the rest, 0.1) uniform
  over every correct candidate. An empty pool falls back to the next kind in that order.
- **Prompt context**: after the parent come the island's top programs (its fastest
  ``elite_selection_ratio`` share, at most ``top_programs``) and ``inspirations`` members from
  other grid cells. With probability ``crossover_rate`` the proposal is a ``crossover`` of the
  parent and an archive member instead (with ``tune``: a knob crossover of the two).
- **Fixes**: each failed candidate of generation g-1 gets a ``fix`` proposal in generation g on its
  island (with the ``fix`` operator), up to ``max_fix_attempts`` fixes per line, as PIKE's
  OpenEvolve fork fixes inside its worker; they come before the island batches.
- **Migration** every ``migration_interval`` generations: the top ``migration_rate`` share of each
  island's natives (at most ``max_migrants``) copies to its neighbours on the ring (``migration``:
  ring, random or none); migrants never migrate again. **Reset** (``reset``: none or funsearch)
  every ``reset_interval``.

Scale: a boundary reads the islands through the library's island index (:mod:`evokernel.db.index`,
built incrementally one finished generation at a time), never whole populations, so its cost does
not grow with the library (benchmark: docs/benchmarks.md). The random kind draws uniformly over
every correct candidate numbered generation by generation (fastest first within one).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from evokernel.exceptions import ConfigError
from evokernel.islands.index import IslandIndex
from evokernel.islands.migration import MigrationPolicy
from evokernel.islands.model import RESEED, Member, ranked
from evokernel.islands.reset import ResetPolicy
from evokernel.plugins import resolve
from evokernel.strategies.base import GenerationalStrategy
from evokernel.strategies.common import carried_fixes, initial_generation, mutation_operator
from evokernel.strategies.view import RunView
from evokernel.types import IslandEvent, Operator, Proposal, Scored

EXPLORATION, EXPLOITATION, RANDOM = "exploration", "exploitation", "random"


def _code_length(sc: Scored, bins: int) -> int:
    # Octaves from 512 characters: <1k, 1-2k, 2-4k, ... (Triton kernel files run 1-8k).
    return min(bins - 1, max(0, int(math.log2(max(1, len(sc.candidate.source)) / 512))))


def _speedup(sc: Scored, bins: int) -> int:
    # Half-octave bands centred on 1x: ..., [0.71, 1), [1, 1.41), [1.41, 2), ...
    return min(bins - 1, max(0, math.floor(2 * math.log2(max(sc.speedup, 1e-6))) + bins // 2))


def _kernel_count(sc: Scored, bins: int) -> int:
    src = sc.candidate.source
    return min(bins - 1, src.count("@triton.jit") + src.count("load_inline("))


# Bins of the bottleneck feature, in this order (evaluation/profiling/verdict.py's classes);
# a candidate without a profile (profiling off, a CPU run) sits with "unknown".
BOTTLENECKS = ("unknown", "memory-bound", "compute-bound", "latency-bound", "occupancy-limited")


def _bottleneck(sc: Scored, bins: int) -> int:
    # Keeps a memory-bound and a compute-bound line of descent in different cells.
    profile = sc.evaluation.details.get("profiling") if sc.evaluation is not None else None
    found = profile.get("bottleneck") if isinstance(profile, dict) and profile.get("status") == "ok" else None
    return min(bins - 1, BOTTLENECKS.index(found) if found in BOTTLENECKS else 0)


FEATURES: dict[str, Callable[[Scored, int], int]] = {
    "code_length": _code_length,
    "speedup": _speedup,
    "kernel_count": _kernel_count,
    "bottleneck": _bottleneck,
}


def choose_kind(rng: random.Random, exploration: float, exploitation: float) -> str:
    r = rng.random()
    return EXPLORATION if r < exploration else EXPLOITATION if r < exploration + exploitation else RANDOM


class PikeO(GenerationalStrategy):
    name = "pike_o"

    def __init__(
        self,
        islands: int = 3,
        batch: int = 4,
        features: tuple[str, ...] | list[str] = ("code_length", "speedup", "kernel_count"),
        bins: int = 8,
        archive_size: int = 20,
        exploration_ratio: float = 0.2,
        exploitation_ratio: float = 0.7,
        elite_selection_ratio: float = 0.1,
        top_programs: int = 3,
        inspirations: int = 2,
        crossover_rate: float = 0.1,
        migration: str = "ring",
        migration_interval: int = 5,
        migration_rate: float = 0.1,
        max_migrants: int | None = 50,
        reset: str = "none",
        reset_interval: int = 10,
        max_generations: int | None = None,
        operator: str = "auto",
        max_fix_attempts: int = 2,
    ) -> None:
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise ConfigError(f"pike_o: unknown feature(s) {unknown}; known: {', '.join(FEATURES)}")
        ratios = (
            exploration_ratio,
            exploitation_ratio,
            elite_selection_ratio,
            crossover_rate,
            migration_rate,
        )
        if min(ratios) < 0 or exploration_ratio + exploitation_ratio > 1 or max(ratios) > 1:
            raise ConfigError("pike_o ratios must lie in [0, 1] and exploration + exploitation <= 1")
        if max_migrants is not None and max_migrants < 1:
            raise ConfigError("pike_o.max_migrants must be >= 1 (or null for no cap)")
        if min(islands, batch, bins, archive_size, migration_interval, reset_interval) < 1:
            raise ConfigError("pike_o needs islands, batch, bins, archive_size and the intervals >= 1")
        if max_fix_attempts < 0:
            raise ConfigError("pike_o.max_fix_attempts must be >= 0")
        self.max_fix_attempts = max_fix_attempts
        self.islands = islands
        self.batch = batch
        self.features = tuple(features)
        self.bins = bins
        self.archive_size = archive_size
        self.exploration_ratio = exploration_ratio
        self.exploitation_ratio = exploitation_ratio
        self.elite_selection_ratio = elite_selection_ratio
        self.top_programs = top_programs
        self.inspirations = inspirations
        self.crossover_rate = crossover_rate
        self.migration: MigrationPolicy = resolve("migrations", migration)(migration_rate, max_migrants)
        self.migration_interval = migration_interval
        self.reset: ResetPolicy = resolve("resets", reset)()
        self.reset_interval = reset_interval
        self.max_generations = max_generations
        self.operator = operator

    # ---- islands ----------------------------------------------------------------------------------
    def index(self, view: RunView, generation: int, with_events: bool = True) -> IslandIndex:
        """The islands as ``generation`` starts (``with_events``: after its island events), read
        through the library's island index: a boundary costs O(cells + archive + batch) rows."""
        return view.island_index(
            self.islands, generation, spec=self.spec, cell_of=self.cell_key, with_events=with_events
        )

    @property
    def spec(self) -> str:
        return f"pike_o:{','.join(self.features)}/{self.bins}"

    def cell(self, scored: Scored) -> tuple[int, ...]:
        return tuple(FEATURES[f](scored, self.bins) for f in self.features)

    def cell_key(self, scored: Scored) -> str:
        return ",".join(map(str, self.cell(scored)))

    def island_events(self, view: RunView) -> list[IslandEvent]:
        nxt = self.generation_finished(view)
        if nxt is None or nxt == 0 or view.has_island_events(nxt):
            return []
        islands = self.index(view, nxt, with_events=False)
        rng = view.rng("pike_o-islands", nxt)
        events: list[IslandEvent] = []
        if nxt % self.reset_interval == 0:
            events += self.reset.events(islands, nxt, rng)
        if nxt % self.migration_interval == 0:
            events += self.migration.moves(islands, nxt, rng)
        reset = {e.island for e in events if e.kind != "migrate"}
        empty = [i for i in range(self.islands) if i not in reset and islands.best(i) is None]
        best = view.top(1, before=nxt) if empty else []
        for island in empty:
            if best:
                events.append(
                    IslandEvent(RESEED, nxt, island, best[0].candidate.id, best[0].candidate.island)
                )
        return events

    def plan_size(self, view: RunView, generation: int) -> int:
        """Without planning: ``batch`` per island with a correct member (such an island's grid is
        never empty, so each of its proposals finds a parent)."""
        if generation == 0:
            return len(self.plan(view, 0))
        islands = self.index(view, generation)
        fixes = len(self._fixes(view, generation))
        return fixes + self.batch * sum(1 for i in range(self.islands) if islands.best(i) is not None)

    def _fixes(self, view: RunView, generation: int) -> list[Proposal]:
        # Slots after every island's batch, so a fix never shares a branch with a mutation.
        return carried_fixes(view, generation, self.max_fix_attempts, self.islands * self.batch)

    def grid(self, population: list[Member]) -> dict[tuple[int, ...], Member]:
        """MAP-Elites over a member list: feature cell -> its fastest member (the index keeps the
        same grid incrementally; see :meth:`IslandIndex.grid`)."""
        cells: dict[tuple[int, ...], Member] = {}
        for member in ranked(population):
            cells.setdefault(self.cell(member.scored), member)
        return cells

    # ---- sampling ---------------------------------------------------------------------------------
    def sample_parent(
        self,
        rng: random.Random,
        grid: Sequence[Member],
        archive: Sequence[Member],
        everyone: Sequence[Member],
    ) -> tuple[str, Member] | None:
        """(kind, parent): exploration from ``grid``, exploitation from ``archive``, random from
        ``everyone``; an empty pool falls back to the next kind."""
        kind = choose_kind(rng, self.exploration_ratio, self.exploitation_ratio)
        pools = {EXPLORATION: grid, EXPLOITATION: archive, RANDOM: everyone}
        order = [EXPLORATION, EXPLOITATION, RANDOM]
        for k in order[order.index(kind) :] + order[: order.index(kind)]:
            if pools[k]:
                return k, rng.choice(pools[k])
        return None

    def plan(self, view: RunView, generation: int) -> list[Proposal]:
        task = view.task.name
        if generation == 0:
            seeds = initial_generation(view, self.batch)
            if seeds and seeds[0].operator == Operator.SEED:  # LLM seeds: every island writes its own
                return [
                    Proposal(
                        task=task, operator=Operator.SEED, generation=0, island=i, branch=i * self.batch + b
                    )
                    for i in range(self.islands)
                    for b in range(self.batch)
                ]
            return seeds
        islands = self.index(view, generation)
        # n_top depends on the island's size only below top_programs / elite_selection_ratio members.
        ratio = self.elite_selection_ratio
        enough = 1 if ratio <= 0 or self.top_programs <= 0 else math.ceil(self.top_programs / ratio)
        islands.read(top_k=self.top_programs, archive_k=self.archive_size, count_limit=enough, grids=True)
        everyone = islands.pool()
        elites = islands.archive(self.archive_size)
        holding = islands.archive_holding()
        op = mutation_operator(view, self.operator)
        out: list[Proposal] = self._fixes(view, generation)
        for island in range(self.islands):
            size = islands.members(island, enough)
            if not size:
                continue
            grid = islands.grid(island)
            archive = [m for m in elites if (island, m.id) in holding] or elites
            n_top = min(self.top_programs, max(1, math.ceil(ratio * size)))
            members = islands.top(island, n_top)
            for b in range(self.batch):
                rng = view.rng("pike_o", generation, island, b)
                picked = self.sample_parent(rng, grid, archive, everyone)
                if picked is None:
                    continue
                parent = picked[1]
                slot = island * self.batch + b
                if rng.random() < self.crossover_rate:
                    other = [m for m in archive if m.id != parent.id]
                    if other and (Operator.CROSSOVER in view.operators or op == Operator.TUNE):
                        mate = rng.choice(other)
                        cross = Operator.CROSSOVER if Operator.CROSSOVER in view.operators else Operator.TUNE
                        parents = (parent.id, mate.id)
                        out.append(Proposal(task, cross, island, generation, parents, branch=slot))
                        continue
                context: list[int] = []
                if op != Operator.TUNE:  # tune reads a second parent as a crossover mate
                    context = [m.id for m in members[:n_top] if m.id != parent.id]
                    others = [m for m in grid if m.id != parent.id and m.id not in context]
                    context += [m.id for m in rng.sample(others, min(self.inspirations, len(others)))]
                out.append(Proposal(task, op, island, generation, (parent.id, *context), branch=slot))
        return out
