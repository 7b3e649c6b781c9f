"""Benchmark: what the engine and the solution library cost per candidate, with nothing else.

    python experiments/bench/engine_overhead.py                 # SQLite + PostgreSQL, ~7 min on 2 cores
    python experiments/bench/engine_overhead.py --quick         # smaller sizes, a smoke run

Questions (issue 6): does a run sustain >= 200 candidates/s end to end on SQLite when mutation and
evaluation are free, and does a strategy's proposal step stay <= 20 ms with 1M candidates in the
library?

Method.
1. Throughput: a whole run through ``run_experiment`` -- engine, strategy (PIKE-B, 10 branches,
   ideas and fix rounds on), library writes -- with the instant in-process evaluator and mutator
   of :mod:`evokernel.conformance` (no sleeps; 10 % of children fail and get fixed). Candidates per
   second = evaluated candidates / wall time of the run, the library created (migrated) before
   the clock starts. Once on a SQLite file, once on a private PostgreSQL server (durability off,
   as in the test suite: this measures the engine, not the disk).
2. Proposal step: a library filled with N candidates of one task in PIKE-B's shape (generations
   of 10 branches, an ideas proposal each, every candidate evaluated, lineage rows), inserted in
   bulk. Timed: a fresh strategy's ``propose`` at a generation boundary (the expensive call: it
   reads the finished generation, ranks elites and plans the next), median of 25, for PIKE-B and
   greedy; and the call made while work is in flight.
3. PIKE-O boundary: a second library of N candidates in PIKE-O's shape (3 islands x 4 per
   generation, 10 % incorrect, ring migrations). Its island index is built in one pass (timed:
   the one-off cost of upgrading an old library), then 20 successive generation boundaries are
   timed as the engine makes them -- island events decided and recorded, proposals planned --
   10 with a fresh strategy each (``pike_o_propose_ms``, as after a resume) and 10 with one
   running strategy (``pike_o_running_propose_ms``): medians, and the max of all 20 (every 5th
   boundary migrates).

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from evokernel.conformance import InstantEvaluator, InstantMutator, instant_config, instant_task, run_instant
from evokernel.db import SolutionLibrary
from evokernel.db.models import (
    CandidateParentRow,
    CandidateRow,
    EvaluationRow,
    IslandEventRow,
    ProposalRow,
    utcnow,
)
from evokernel.strategies.base import Strategy
from evokernel.strategies.greedy import Greedy
from evokernel.strategies.pike_b import PikeB
from evokernel.strategies.pike_o import PikeO
from evokernel.strategies.view import RunView
from evokernel.types import source_hash

# The throwaway PostgreSQL server is test support (tests/support/), not product: reach it from the
# repository this script sits in.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.pgserver import postgres_database

BRANCHES = 10
PIKE_O_ISLANDS, PIKE_O_BATCH = 3, 4  # PikeO's defaults
PIKE_O_BOUNDARIES = 10  # timed boundaries per size and kind: two of each ten migrate (every 5th)
OPERATORS = frozenset({"seed_file", "mutate", "fix", "ideas", "crossover"})
# Column values shared by every bulk row (the rest are set per row).
PROPOSAL = {"island": 0, "idea": None, "reason": "", "raw_reply": ""}
CANDIDATE = {"proposal_id": None, "island": 0, "operator": "mutate", "status": "correct", "reason": ""}
EVALUATION = {
    "status": "correct", "reason": "", "stage": "done", "device": "bench", "interpreter": False,
    "eager_ms": 1.0, "feedback": "", "duration_s": 0.0, "details": {},
}  # fmt: skip


def throughput(url: str, candidates: int) -> float:
    task = instant_task("bench")
    SolutionLibrary(url).close()  # migrate before the clock starts
    config = instant_config(
        "pike_b", {"branches": BRANCHES, "fix_rounds": 2}, url, [task], evaluations=candidates
    )
    config.concurrency.evaluations = 16
    config.concurrency.llm = 16
    evaluator = InstantEvaluator(size=8)
    start = time.perf_counter()
    run_id = run_instant(config, [task], evaluator=evaluator, mutator=InstantMutator(incorrect_rate=0.1))
    elapsed = time.perf_counter() - start
    lib = SolutionLibrary(url)
    done = lib.count_evaluated(run_id, task.name)
    lib.close()
    assert done == candidates, f"run evaluated {done} of {candidates}"
    return done / elapsed


def populate(url: str, candidates: int) -> tuple[SolutionLibrary, str]:
    """One run and task holding ``candidates`` evaluated candidates in PIKE-B's shape."""
    lib = SolutionLibrary(url)
    task = instant_task("bench")
    run_id = lib.create_run("bench", {}, 0)
    lib.register_task(run_id, task)
    lib.ensure_islands(run_id, task.name, 1)
    task_id = lib._task_id(run_id, task.name)  # bulk rows need the key the API hides
    chunk = 20_000
    seq = 0
    next_id = 1
    with lib._scope.session() as s:
        for start in range(0, candidates, chunk):
            props, cands, evals, parents = [], [], [], []
            for i in range(start, min(candidates, start + chunk)):
                gen, branch = divmod(i, BRANCHES)
                if branch == 0:
                    props.append(_proposal(run_id, task_id, seq, gen, "ideas", branch, [], "done"))
                    seq += 1
                parent = [next_id - BRANCHES + (branch % 4)] if gen else []
                props.append(
                    _proposal(run_id, task_id, seq, gen, "mutate" if gen else "seed_file", branch, parent)
                )
                seq += 1
                source = f"class ModelNew:  # candidate {i}\n    pass\n"
                speedup = 0.5 + (i * 7919 % 10_007) / 4_000
                cand = dict(
                    CANDIDATE, id=next_id, run_id=run_id, task_id=task_id, generation=gen, branch=branch
                )
                cands.append(dict(cand, source=source, source_hash=source_hash(source), speedup=speedup))
                evals.append(
                    dict(EVALUATION, candidate_id=next_id, speedup_eager=speedup, runtime_ms=1 / speedup)
                )
                parents += [{"child_id": next_id, "parent_id": p, "rank": 0} for p in parent]
                next_id += 1
            rows = s.execute(insert(ProposalRow).returning(ProposalRow.id, ProposalRow.operator), props).all()
            made = [pid for pid, op in rows if op != "ideas"]
            for cand, pid in zip(cands, made, strict=True):
                cand["proposal_id"] = pid
            s.execute(insert(CandidateRow), cands)
            s.execute(insert(EvaluationRow), evals)
            if parents:
                s.execute(insert(CandidateParentRow), parents)
    return lib, run_id


def _proposal(
    run_id: str,
    task_id: int,
    seq: int,
    gen: int,
    op: str,
    branch: int,
    parents: list[int],
    state: str = "done",
) -> dict[str, Any]:
    ideas = ["idea"] * BRANCHES if op == "ideas" else []
    row = dict(
        PROPOSAL, run_id=run_id, task_id=task_id, seq=seq, generation=gen, operator=op, parents=parents
    )
    return dict(row, state=state, branch=branch, count=len(ideas) or 1, ideas=ideas)


def populate_pike_o(url: str, candidates: int, quiet_tail: int) -> tuple[SolutionLibrary, str]:
    """One run and task holding ``candidates`` evaluated candidates in PIKE-O's shape (defaults: 3
    islands x batch 4 per generation, 10 % incorrect, ring migration of each island's best native
    every 5 generations), with no island events in the last ``quiet_tail`` generations: the timed
    boundaries decide and record those themselves."""
    lib = SolutionLibrary(url)
    task = instant_task("bench")
    run_id = lib.create_run("bench-pike-o", {}, 0)
    lib.register_task(run_id, task)
    lib.ensure_islands(run_id, task.name, PIKE_O_ISLANDS)
    task_id = lib._task_id(run_id, task.name)
    per_gen = PIKE_O_ISLANDS * PIKE_O_BATCH
    last_gen = (candidates - 1 + per_gen - 1) // per_gen
    best: dict[int, tuple[float, int]] = {}  # island -> its best native so far
    sent: set[tuple[int, int]] = set()
    with lib._scope.session() as s:
        next_id, seq, i = 1, 0, 0
        while i < candidates:
            props, cands, evals, parents, events = [], [], [], [], []
            for _ in range(min(20_000, candidates - i)):
                gen, slot = (0, 0) if i == 0 else divmod(i - 1, per_gen)
                gen += 1 if i else 0
                island = slot // PIKE_O_BATCH
                if gen and slot == 0 and gen <= last_gen - quiet_tail:
                    events += _pike_o_events(run_id, task_id, gen, best, sent)
                parent = [1 + (i * 7919) % next_id] if gen else []
                props.append(
                    dict(
                        _proposal(run_id, task_id, seq, gen, "mutate" if gen else "seed_file", slot, parent),
                        island=island,
                    )
                )
                seq += 1
                # Every 13th is over 1k characters: two code-length cells (speedup bands make the rest).
                source = f"class ModelNew:  # candidate {i}\n    pass\n" + ("#" * 1000 if i % 13 == 0 else "")
                ok = i == 0 or (i * 31) % 10 != 0
                speedup = 0.5 + (i * 7919 % 10_007) / 4_000 if ok else None
                cand = dict(
                    CANDIDATE, id=next_id, run_id=run_id, task_id=task_id, generation=gen, branch=slot
                )
                status = "correct" if ok else "incorrect"
                cands.append(
                    dict(cand, island=island, source=source, source_hash=source_hash(source), speedup=speedup)
                    | {"status": status}
                )
                evals.append(
                    dict(EVALUATION, candidate_id=next_id, status=status, speedup_eager=speedup,
                         runtime_ms=1 / speedup if speedup else None)
                )  # fmt: skip
                parents += [{"child_id": next_id, "parent_id": p, "rank": 0} for p in parent]
                if speedup is not None and (speedup, -next_id) > best.get(island, (0.0, 0)):
                    best[island] = (speedup, -next_id)
                next_id += 1
                i += 1
            rows = s.execute(insert(ProposalRow).returning(ProposalRow.id), props).all()
            for cand, (pid,) in zip(cands, rows, strict=True):
                cand["proposal_id"] = pid
            s.execute(insert(CandidateRow), cands)
            s.execute(insert(EvaluationRow), evals)
            if parents:
                s.execute(insert(CandidateParentRow), parents)
            if events:
                s.execute(insert(IslandEventRow), events)
    return lib, run_id


def _pike_o_events(
    run_id: str, task_id: int, gen: int, best: dict[int, tuple[float, int]], sent: set[tuple[int, int]]
) -> list[dict[str, Any]]:
    """Generation 1 reseeds islands 1.. with the seed; every 5th, each island's best native so far
    copies to both ring neighbours once (what capped ring migration settles to)."""
    row = {"run_id": run_id, "task_id": task_id, "generation": gen, "created_at": utcnow()}
    if gen == 1:
        return [
            dict(row, kind="reseed", island=i, candidate_id=1, from_island=0)
            for i in range(1, PIKE_O_ISLANDS)
        ]
    if gen % 5:
        return []
    out = []
    for island, (_speedup, neg_id) in sorted(best.items()):
        for dest in sorted({(island - 1) % PIKE_O_ISLANDS, (island + 1) % PIKE_O_ISLANDS} - {island}):
            if (dest, -neg_id) not in sent:
                sent.add((dest, -neg_id))
                out.append(dict(row, kind="migrate", island=dest, candidate_id=-neg_id, from_island=island))
    return out


def pike_o_boundaries(lib: SolutionLibrary, run_id: str, reps: int) -> dict[str, float]:
    """The index built through the generation before the last ``2 * reps`` (timed: what upgrading
    an old library costs once), then ``2 * reps`` successive generation boundaries as the engine
    makes them -- island events decided and recorded, proposals planned: ``reps`` with a fresh
    strategy each (as after a resume: it plans the finished generation again to know its size),
    then ``reps`` with one running strategy (the engine's steady state)."""
    task = instant_task("bench")
    last = lib.last_generation(run_id, task.name)
    first = last - 2 * reps
    start = time.perf_counter()
    PikeO().index(_pike_o_view(lib, run_id, first - 1), first)
    if lib.url.startswith("sqlite"):  # the build's WAL goes into the file now, not in a timed step
        with lib._engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    out = {"build_s": time.perf_counter() - start}
    running = PikeO()
    times: dict[str, list[float]] = {"fresh": [], "running": []}
    for gen in range(first, last):
        kind = "fresh" if gen < first + reps else "running"
        strategy = PikeO() if kind == "fresh" else running
        view = _pike_o_view(lib, run_id, gen)
        start = time.perf_counter()
        events = strategy.island_events(view)
        if events:
            lib.record_island_events(run_id, task.name, events)
        proposals = strategy.propose(view, PIKE_O_ISLANDS * PIKE_O_BATCH)
        times[kind].append((time.perf_counter() - start) * 1000)
        assert len(proposals) == PIKE_O_ISLANDS * PIKE_O_BATCH, (
            f"pike_o planned {len(proposals)} at {gen + 1}"
        )
        assert all(p.generation == gen + 1 for p in proposals)
    for kind, found in times.items():
        out[f"{kind}_ms"] = statistics.median(found)
        out[f"{kind}_max_ms"] = max(found)
    return out


def _pike_o_view(lib: SolutionLibrary, run_id: str, last_generation: int) -> RunView:
    """The view a boundary after ``last_generation`` sees (later generations are in the library
    too, the way a benchmark can hold them: every read filters them out)."""
    return RunView(
        lib, run_id, instant_task("bench"), 0, OPERATORS, islands=PIKE_O_ISLANDS,
        known_last_generation=last_generation, fold_index=lib.advance_island_index,
    )  # fmt: skip


def propose_ms(
    lib: SolutionLibrary, run_id: str, make: type[Strategy], in_flight: int = 0, reps: int = 25
) -> float:
    view = RunView(
        lib, run_id, instant_task("bench"), 0, OPERATORS, in_flight=in_flight, islands=3,
        fold_index=lib.advance_island_index,
    )  # fmt: skip
    times = []
    for _ in range(reps):
        params = {PikeB: {"branches": BRANCHES}, Greedy: {"batch": BRANCHES}}.get(make, {})
        strategy = make.from_params(params)
        start = time.perf_counter()
        proposals = strategy.propose(view, BRANCHES)
        times.append((time.perf_counter() - start) * 1000)
        assert proposals or in_flight, f"{make.__name__} proposed nothing"
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    sizes = [1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000]
    run_candidates = 300 if args.quick else 3_000
    out: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "run_candidates": run_candidates,
    }
    with tempfile.TemporaryDirectory() as tmp:
        # Other processes on a small VM move these figures by up to 2x: the load says how busy it was.
        out["load_avg_1m_at_start"] = round(os.getloadavg()[0], 2)
        out["sqlite_candidates_per_s"] = round(
            throughput(str(Path(tmp) / "throughput.db"), run_candidates), 1
        )
        print(f"sqlite: {out['sqlite_candidates_per_s']} candidates/s", flush=True)
        if not args.no_postgres:
            with postgres_database() as url:
                out["postgresql_candidates_per_s"] = round(throughput(url, run_candidates), 1)
            print(f"postgresql: {out['postgresql_candidates_per_s']} candidates/s", flush=True)
        for size in sizes:
            label = {1_000: "1k", 10_000: "10k", 100_000: "100k", 1_000_000: "1m"}[size]
            start = time.perf_counter()
            lib, run_id = populate(str(Path(tmp) / f"rows_{label}.db"), size)
            fill_s = time.perf_counter() - start
            out[f"propose_ms_{label}"] = round(propose_ms(lib, run_id, PikeB), 2)
            out[f"greedy_propose_ms_{label}"] = round(propose_ms(lib, run_id, Greedy), 2)
            out[f"in_flight_propose_ms_{label}"] = round(propose_ms(lib, run_id, PikeB, in_flight=4), 2)
            lib.close()
            start = time.perf_counter()
            lib, run_id = populate_pike_o(str(Path(tmp) / f"pike_o_{label}.db"), size, 2 * PIKE_O_BOUNDARIES)
            fill_o_s = time.perf_counter() - start
            o = pike_o_boundaries(lib, run_id, PIKE_O_BOUNDARIES)
            out[f"pike_o_index_build_s_{label}"] = round(o["build_s"], 1)
            out[f"pike_o_propose_ms_{label}"] = round(o["fresh_ms"], 2)
            out[f"pike_o_running_propose_ms_{label}"] = round(o["running_ms"], 2)
            out[f"pike_o_propose_max_ms_{label}"] = round(max(o["fresh_max_ms"], o["running_max_ms"]), 2)
            lib.close()
            figures = [out.get(f"{kind}propose_ms_{label}") for kind in ("", "greedy_", "in_flight_")]
            print(
                f"{label} candidates (filled in {fill_s:.0f} s): pike_b propose {figures[0]} ms, "
                f"greedy {figures[1]} ms, in flight (pike_b) {figures[2]} ms; pike_o (filled in "
                f"{fill_o_s:.0f} s, index built in {o['build_s']:.1f} s) boundary {o['fresh_ms']:.2f} ms "
                f"fresh, {o['running_ms']:.2f} ms running, {out[f'pike_o_propose_max_ms_{label}']} ms max",
                flush=True,
            )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
