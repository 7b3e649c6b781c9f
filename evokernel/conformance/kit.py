"""Conformance checks for strategy authors, run on the instant in-process parts of :mod:`.instant`.

    from evokernel.conformance import check_strategy

    def test_my_strategy_conforms(tmp_path):
        check_strategy("my_pkg.strategy:MyStrategy", {"width": 4}, workdir=tmp_path)

:func:`check_strategy` runs the real engine and a real SQLite library with an
:class:`InstantEvaluator` (deterministic verdicts and speedups from the source text, optional
latency) and an :class:`InstantMutator` (deterministic children from the proposal's randomness),
and checks the rules of :mod:`evokernel.strategies.base`: unknown params are rejected; proposals
respect capacity, operators, parents and islands; the budget is never overrun; the run is the
same whatever order evaluations finish in; a run stopped at half its budget and resumed ends
exactly like an uninterrupted one; and a fresh instance proposes what the running one did (no
hidden state). Each failure raises ``AssertionError`` saying which rule broke.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evokernel.conformance.instant import (
    InstantEvaluator,
    InstantMutator,
    instant_config,
    instant_task,
    run_instant,
)
from evokernel.db import SolutionLibrary
from evokernel.exceptions import ConfigError
from evokernel.plugins import resolve
from evokernel.strategies.base import Strategy
from evokernel.types import Operator, Scored


def library_fingerprint(library: SolutionLibrary, run_id: str) -> list[tuple[Any, ...]]:
    """What a run did, independent of row ids and recording order: per task, every proposal (with
    its parents as source hashes), its candidate and verdict, and every island event."""
    out: list[tuple[Any, ...]] = []
    for task in sorted(library.run_task_hashes(run_id)):
        scored = {sc.candidate.id: sc for sc in library.candidates(run_id, task)}
        by_proposal = {sc.candidate.proposal_id: sc for sc in scored.values()}

        def name(cid: int | None, scored: dict[int, Scored] = scored) -> str:
            return scored[cid].candidate.source_hash if cid in scored else f"missing:{cid}"

        for p in library.proposals(run_id, task):
            sc = by_proposal.get(p.id or -1)
            verdict = None
            if sc is not None and sc.evaluation is not None:
                verdict = (sc.candidate.source_hash, sc.evaluation.status.value, round(sc.speedup, 9))
            parents = tuple(name(pid) for pid in p.parents)
            out.append(
                (
                    task,
                    p.generation,
                    p.island,
                    p.branch,
                    p.operator,
                    parents,
                    p.idea,
                    p.state,
                    p.ideas,
                    verdict,
                )
            )
        for e in library.island_events(run_id, task):
            out.append((task, "event", e.kind, e.generation, e.island, name(e.candidate), e.from_island))
    return sorted(out, key=repr)


def check_strategy(
    strategy: str | type[Strategy],
    params: dict[str, Any] | None = None,
    *,
    workdir: Path,
    budget: int = 24,
    tasks: int = 2,
) -> None:
    """Run the conformance checks (see the module docstring); raises AssertionError on a breach."""
    name = strategy if isinstance(strategy, str) else f"{strategy.__module__}:{strategy.__qualname__}"
    found = resolve("strategies", name)
    assert isinstance(found, type) and issubclass(found, Strategy), f"{name} is not a Strategy subclass"
    cls: type[Strategy] = found
    rejected = False
    try:
        cls.from_params({**(params or {}), "no_such_param_xyz": 1})
    except ConfigError:
        rejected = True  # the expected outcome
    if not rejected:
        raise AssertionError(f"{name}: from_params accepted an unknown parameter (it must raise ConfigError)")
    task_list = [instant_task(f"instant{i}") for i in range(tasks)]
    workdir.mkdir(parents=True, exist_ok=True)

    def fingerprint(db: Path, evaluator: InstantEvaluator, half_first: bool = False) -> list[tuple[Any, ...]]:
        config = instant_config(
            name, params, db, task_list, evaluations=budget // 2 if half_first else budget
        )
        run_id = run_instant(config, task_list, evaluator=evaluator)
        if half_first:
            run_instant(
                config,
                task_list,
                evaluator=evaluator,
                resume=run_id,
                overrides=(f"budget.evaluations={budget}",),
            )
        lib = SolutionLibrary(db)
        try:
            _check_run(lib, run_id, cls, params, budget, name)
            return library_fingerprint(lib, run_id)
        finally:
            lib.close()

    first = fingerprint(workdir / "a.db", InstantEvaluator(size=2, delay_s=0.002, jitter_salt="a"))
    other = fingerprint(workdir / "b.db", InstantEvaluator(size=2, delay_s=0.002, jitter_salt="b"))
    assert first == other, (
        f"{name}: the same seed gave different runs when evaluations finished in another order"
    )
    resumed = fingerprint(workdir / "c.db", InstantEvaluator(size=2), half_first=True)
    assert first == resumed, f"{name}: stopping at half the budget and resuming changed the run"


def _check_run(
    lib: SolutionLibrary,
    run_id: str,
    cls: type[Strategy],
    params: dict[str, Any] | None,
    budget: int,
    name: str,
) -> None:
    from evokernel.strategies.view import RunView

    islands = cls.from_params(dict(params or {})).islands
    for task in lib.run_task_hashes(run_id):
        cands = lib.candidates(run_id, task)
        ids = {sc.candidate.id for sc in cands}
        assert len(cands) <= budget, f"{name}: {len(cands)} candidates for {task} over a budget of {budget}"
        assert any(sc.candidate.generation > 0 for sc in cands), f"{name}: never went past generation 0"
        for p in lib.proposals(run_id, task):
            assert p.state != "open", f"{name}: proposal {p.id} still open after the run finished"
            assert 0 <= p.island < islands, f"{name}: proposal on island {p.island}, strategy has {islands}"
            assert all(pid in ids for pid in p.parents), (
                f"{name}: proposal {p.id} has parents of another task"
            )
        for sc in cands:
            for pid in sc.candidate.parents:
                assert lib.get_candidate(pid).candidate.generation <= sc.candidate.generation, (
                    f"{name}: candidate {sc.candidate.id} has a parent from a later generation"
                )
        task_obj = instant_task(task)
        ops = frozenset({Operator.SEED_FILE, Operator.IDEAS, *InstantMutator.operators})
        view = RunView(
            lib, run_id, task_obj, 0, ops, in_flight=0, islands=islands, fold_index=lib.advance_island_index
        )
        one, two = cls.from_params(dict(params or {})), cls.from_params(dict(params or {}))
        got = one.propose(view, budget)
        assert got == two.propose(view, budget), f"{name}: two fresh instances proposed differently"
        for p in got:
            assert p.operator in ops, f"{name}: proposed operator {p.operator!r} that no mutator serves"
