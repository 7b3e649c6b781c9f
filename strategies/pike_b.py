"""PIKE-B: branching search in phases (one island).

Phase 0 (generation 0) is the task's seed file, or with an LLM and no seed ``branches`` LLM-written
seeds, each from its own idea of one ``ideas`` call (when ``ideas`` is on) as PIKE seeds phase 0.
Every later phase p (generation p):

1. **Elites**: the best correct candidate of each branch of phase p-1 -- that phase *only*, not
   all history -- ranked, and the top ``top_k`` kept. If phase p-1 made nothing correct, phase p
   reuses phase p-1's parents.
2. **Ideas**: one ``ideas`` call (when a mutator offers it and ``ideas`` is on) asks for
   ``branches`` distinct optimization ideas given the best elite; branch b gets idea b. If the
   call fails, the branches go without ideas.
3. **Generate**: branch b mutates elite ``b * len(elites) // branches`` -- the branches are
   spread over the elites in contiguous bins (10 branches over 4 elites: 3, 3, 2, 2). Mutation
   only, one parent, no history in the prompt.
4. **Fix**: a candidate that fails verification goes to the error-fixing operator (``fix``) as
   the one parent of a new proposal on the same branch, up to ``fix_rounds`` rounds per branch
   lineage; each attempt is a candidate and counts against the budget. Rounds run in lockstep
   (round r+1 starts when round r is evaluated).

A phase ends when every branch is correct, out of fix rounds, or failed to produce code, and
nothing is in flight; then the next starts, up to ``max_phases`` phases after the seed phase.
Everything is derived from the library, and a phase's plan reads only earlier phases, so the
same evaluations always lead to the same proposals, whatever order they finish in.
"""

from __future__ import annotations

import dataclasses

from evokernel.exceptions import ConfigError
from evokernel.islands.model import Member
from evokernel.strategies.base import Strategy
from evokernel.strategies.common import by_fitness, fix_depth, initial_generation, mutation_operator
from evokernel.strategies.view import IDEAS, RunView
from evokernel.types import Operator, Proposal, Scored, Status

FIX = Operator.FIX


class PikeB(Strategy):
    name = "pike_b"

    def __init__(
        self,
        branches: int = 10,
        top_k: int = 4,
        max_phases: int | None = None,
        fix_rounds: int = 3,
        ideas: bool = True,
        operator: str = "auto",
    ) -> None:
        if branches < 1 or top_k < 1 or fix_rounds < 0:
            raise ConfigError("pike_b needs branches >= 1, top_k >= 1 and fix_rounds >= 0")
        if max_phases is not None and max_phases < 0:
            raise ConfigError("pike_b.max_phases must be >= 0 (or null for no limit)")
        self.branches = branches
        self.top_k = top_k
        self.max_phases = max_phases
        self.fix_rounds = fix_rounds
        self.ideas = ideas
        self.operator = operator

    # ---- lifecycle ------------------------------------------------------------------------------
    def propose(self, view: RunView, capacity: int) -> list[Proposal]:
        phase = view.last_generation()
        if phase < 0:
            return self._roots(view, 0, None)[:capacity]
        made = view.proposals(generation=phase)
        ideas_made = [p for p in made if p.operator == IDEAS]
        if ideas_made and ideas_made[-1].state == "open":
            return []  # the branches need the ideas
        made_roots = sum(1 for p in made if p.operator not in (IDEAS, FIX))
        # A phase >= 1 has `branches` roots once it has any; only fewer made means planning again.
        if phase == 0 or made_roots < self.branches:
            roots = self._roots(view, phase, ideas_made[-1] if ideas_made else None)
            if not ideas_made and roots and roots[0].operator == IDEAS:
                return roots[:1]  # an ideas call became possible (e.g. resumed with an LLM): wait for it
            if made_roots < len(roots):
                return roots[made_roots : made_roots + capacity]
        # Fix rounds go in lockstep: a round starts when everything in flight has finished, in
        # (round, branch) order, so a budget that runs out mid-round cuts the same proposals
        # whatever order evaluations finished in.
        if view.in_flight:
            return []
        fixes = self._fixes(view, phase, made)
        if fixes:
            return fixes[:capacity]
        if self.max_phases is not None and phase + 1 > self.max_phases:
            return []
        nxt = self._roots(view, phase + 1, None)
        return nxt[:1] if nxt and nxt[0].operator == IDEAS else nxt[:capacity]

    def survivors(self, view: RunView, island: int) -> list[Member]:
        """The elites the next phase would branch from."""
        return [Member(sc) for sc in self.elites(view, view.last_generation() + 1)]

    # ---- phases ---------------------------------------------------------------------------------
    def elites(self, view: RunView, phase: int) -> list[Scored]:
        """Parents of ``phase``: the top_k of the best-per-branch of phase-1 (see module docstring)."""
        if phase <= 0:
            return []
        previous = view.candidates(generation=phase - 1)
        best: dict[int, Scored] = {}
        for sc in by_fitness(previous):
            best.setdefault(sc.candidate.branch, sc)
        ranked = by_fitness(list(best.values()))[: self.top_k]
        if ranked or phase == 1:
            return ranked
        # Nothing correct in phase-1: branch again from the parents phase-1 branched from.
        parents: list[int] = []
        for p in view.proposals(generation=phase - 1):
            if p.operator not in (IDEAS, FIX) and p.parents and p.parents[0] not in parents:
                parents.append(p.parents[0])
        return [view.candidate(pid) for pid in parents]

    def _roots(self, view: RunView, phase: int, ideas: Proposal | None) -> list[Proposal]:
        """The phase's first proposals in branch order, or the ideas proposal they wait for."""
        if phase == 0:
            seeds = initial_generation(view, self.branches)
            if (
                not seeds
                or seeds[0].operator != Operator.SEED
                or not self.ideas
                or IDEAS not in view.operators
            ):
                return seeds
            if ideas is None:  # LLM seeds start from ideas too, one per branch (as PIKE's phase 0)
                return [Proposal(task=view.task.name, operator=IDEAS, generation=0, count=self.branches)]
            texts = ideas.ideas
            return [
                dataclasses.replace(p, idea=texts[p.branch] if p.branch < len(texts) else None) for p in seeds
            ]
        elites = self.elites(view, phase)
        if not elites:
            return []
        task = view.task.name
        if ideas is None and self.ideas and IDEAS in view.operators:
            return [
                Proposal(task=task, operator=IDEAS, generation=phase, parents=(elites[0].candidate.id,),
                         count=self.branches)
            ]  # fmt: skip
        texts = ideas.ideas if ideas is not None else ()
        op = mutation_operator(view, self.operator)
        return [
            Proposal(
                task=task,
                operator=op,
                generation=phase,
                parents=(elites[b * len(elites) // self.branches].candidate.id,),
                idea=texts[b] if b < len(texts) else None,
                branch=b,
            )
            for b in range(self.branches)
        ]

    def _fixes(self, view: RunView, phase: int, made: list[Proposal]) -> list[Proposal]:
        """One ``fix`` per failed candidate of the phase whose lineage has rounds left."""
        if FIX not in view.operators or self.fix_rounds == 0:
            return []
        candidates = view.candidates(generation=phase)
        by_id = {sc.candidate.id: sc for sc in candidates}
        fixed = {p.parents[0] for p in made if p.operator == FIX and p.parents}
        out = []
        sources: set[str] = set()  # a source failing twice (siblings in flight) is fixed once
        for sc in candidates:
            ev = sc.evaluation
            if ev is None or ev.status is Status.CORRECT:
                continue
            twin = sc.candidate.source_hash in sources
            sources.add(sc.candidate.source_hash)
            if twin or sc.candidate.id in fixed:
                continue
            depth = fix_depth(sc, by_id.get)
            if depth >= self.fix_rounds:
                continue
            fix = Proposal(
                task=view.task.name,
                operator=FIX,
                generation=phase,
                parents=(sc.candidate.id,),
                branch=sc.candidate.branch,
            )
            out.append((depth, fix))
        return [fix for _depth, fix in sorted(out, key=lambda d: (d[0], d[1].branch, d[1].parents))]
