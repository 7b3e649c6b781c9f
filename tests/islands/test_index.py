"""The island index answers exactly what whole populations answer, at every generation of a run."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command

from evokernel.conformance import (
    InstantMutator,
    instant_config,
    instant_task,
    library_fingerprint,
    run_instant,
)
from evokernel.db import SolutionLibrary
from evokernel.db.connection import alembic_config
from evokernel.exceptions import LibraryError
from evokernel.islands.model import Member, members, ranked
from evokernel.strategies.pike_o import PikeO
from evokernel.strategies.view import RunView
from evokernel.types import IslandEvent, Proposal
from tests.strategies.helpers import instant_run

PARAMS = {
    "islands": 3,
    "batch": 3,
    "migration_interval": 2,
    "migration_rate": 0.5,
    "max_migrants": 2,
    "reset": "funsearch",
    "reset_interval": 3,
    "features": ["code_length", "speedup"],
    "bins": 4,
    "max_generations": 10,
}
OPERATORS = frozenset({"seed_file", *InstantMutator.operators})


def _view(lib: SolutionLibrary, run: str) -> RunView:
    return RunView(lib, run, instant_task("t0"), 0, OPERATORS, islands=3, fold_index=lib.advance_island_index)


def _reference(view: RunView, generation: int, with_events: bool) -> dict[int, list[Member]]:
    everyone = view.summaries(before=generation)
    last = generation if with_events else generation - 1
    events = [e for e in view.island_events() if e.generation <= last]
    return {i: members(everyone, events, i) for i in range(3)}


def _ids(found: list[Member]) -> list[int]:
    return [m.id for m in found]


def _check_generation(strategy: PikeO, view: RunView, generation: int, with_events: bool) -> None:
    pops = _reference(view, generation, with_events)
    index = strategy.index(view, generation, with_events)
    everyone = [
        sc.candidate.id for sc in view.summaries(before=generation) if sc.evaluation and sc.evaluation.ok
    ]
    for island, pop in pops.items():
        top = ranked(pop)
        natives = [m for m in top if not m.migrant]
        where = (generation, with_events, island)
        assert _ids(index.top(island, len(top) + 5)) == _ids(top), where
        assert [m.migrant for m in index.top(island, len(top))] == [m.migrant for m in top], where
        assert index.members(island, None) == len(top), where
        assert index.members(island, 2) == min(2, len(top)), where  # counting stops at the limit
        assert index.natives(island, None) == len(natives), where
        assert _ids(index.top_natives(island, 3)) == _ids(natives[:3]), where
        best = index.best(island)
        assert (best.id if best else None) == (top[0].id if top else None), where
        assert _ids(index.grid(island)) == _ids(list(strategy.grid(pop).values())), where
        holds = {(island, m.id) for m in top}
        assert index.holding(everyone, [island]) == holds, where
    pool = index.pool()
    assert len(pool) == len(everyone)
    assert sorted(m.id for m in pool) == sorted(everyone)


def test_index_equals_whole_populations_at_every_generation(library_url: str) -> None:
    tasks = [instant_task("t0")]
    run = run_instant(instant_config("pike_o", PARAMS, library_url, tasks, evaluations=200), tasks)
    lib = SolutionLibrary(library_url)
    kinds = {e.kind for e in lib.island_events(run, "t0")}
    assert kinds == {"migrate", "reset", "reseed"}  # the run exercises every kind of event
    view = _view(lib, run)
    strategy = PikeO.from_params(PARAMS)
    assert isinstance(strategy, PikeO)
    last = lib.last_generation(run, "t0")
    # Read every generation after the index was built through the end: reads "as of" an older
    # generation must filter what arrived later (the index may be a generation ahead of a plan).
    strategy.index(view, last + 1)
    for generation in range(1, last + 2):
        for with_events in (False, True):
            _check_generation(strategy, view, generation, with_events)
        assert strategy.plan_size(view, generation) == len(strategy.plan(view, generation))
    # Built one generation at a time and read at its horizon (the engine's case: grids come with
    # the index's state, not from island_cells), under another grid spec.
    other = PikeO.from_params({**PARAMS, "features": ["speedup", "code_length"], "bins": 3})
    assert isinstance(other, PikeO)
    for generation in range(1, last + 2):
        assert other.index(view, generation).at_horizon
        _check_generation(other, view, generation, True)


def test_index_rebuilds_for_another_grid_and_after_late_events(tmp_path: Path) -> None:
    lib, run = instant_run(tmp_path, "pike_o", {**PARAMS, "max_generations": 5}, evaluations=200)
    view = _view(lib, run)
    last = lib.last_generation(run, "t0")
    strategy = PikeO.from_params(PARAMS)
    assert isinstance(strategy, PikeO)
    strategy.index(view, last + 1)
    other = PikeO.from_params({**PARAMS, "features": ["kernel_count", "speedup"], "bins": 3})
    assert isinstance(other, PikeO)
    _check_generation(other, view, last + 1, True)  # another spec: rebuilt for it
    # An event recorded for a generation the index already folded drops it; the next read rebuilds.
    strategy.index(view, last + 1)  # back to this spec, built through the end
    pops = _reference(view, last + 1, True)
    outsider = next(m for m in ranked(pops[0]) if m.id not in {n.id for n in pops[1]})
    lib.record_island_events(run, "t0", [IslandEvent("migrate", last + 1, 1, outsider.id, 0)])
    _check_generation(strategy, view, last + 1, True)
    _check_generation(strategy, view, last, True)


def test_a_pending_candidate_cannot_be_folded(tmp_path: Path) -> None:
    lib = SolutionLibrary(tmp_path / "lib.db")
    task = instant_task("t0")
    run = lib.create_run("r", {})
    lib.register_task(run, task)
    (proposal,) = lib.add_proposals(run, [Proposal(task="t0", operator="seed_file")])
    lib.add_candidate(run, proposal, "class ModelNew:\n    pass\n")
    strategy = PikeO()
    with pytest.raises(LibraryError, match="still pending"):
        strategy.index(_view(lib, run), 1)


def test_a_library_from_before_the_index_upgrades_and_resumes_exactly(tmp_path: Path) -> None:
    params = {**PARAMS, "max_generations": None}
    tasks = [instant_task("t0")]
    whole = instant_config("pike_o", params, tmp_path / "whole.db", tasks, evaluations=60)
    expected = library_fingerprint(SolutionLibrary(tmp_path / "whole.db"), run_instant(whole, tasks))

    db = tmp_path / "old.db"
    half = instant_config("pike_o", params, db, tasks, evaluations=30)
    run = run_instant(half, tasks)
    command.downgrade(alembic_config(f"sqlite:///{db}"), "0002")  # as a 0002 library left it
    resumed = run_instant(half, tasks, resume=run, overrides=("budget.evaluations=60",))  # upgrades
    assert library_fingerprint(SolutionLibrary(db), resumed) == expected
