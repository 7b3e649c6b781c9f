"""What a proposal's ``MutationRequest`` is built from: its parents, the sources it must not
repeat, the evaluated history before its generation, and its randomness.

Reproducibility: a proposal's randomness (``MutationRequest.rng_seed``) and the duplicate check
depend on what the proposal *is* (task, island, generation, branch, operator, parents' sources,
idea) and on earlier generations, never on the order work was recorded or finished in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from evokernel.db import SolutionLibrary
from evokernel.mutators.base import MutationRequest, Mutator
from evokernel.mutators.exemplars import Exemplar, family
from evokernel.run.state import TaskProgress
from evokernel.types import Proposal, Scored


def proposal_rng_seed(run_seed: int, proposal: Proposal, parents: tuple[Scored, ...]) -> int:
    """Per-proposal randomness keyed by what the proposal is -- parents by their source, since
    row ids depend on the order tasks and proposals were recorded -- never by when."""
    p = proposal
    parent_hashes = ",".join(sc.candidate.source_hash for sc in parents)
    parts = (
        run_seed,
        p.task,
        p.island,
        p.generation,
        p.branch,
        p.operator,
        parent_hashes,
        p.idea,
    )
    key = "|".join(map(str, parts))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def avoided_sources(progress: TaskProgress, proposal: Proposal) -> frozenset[str]:
    """Sources a proposal must not repeat: every earlier generation's, and those of its own
    generation recorded before it. Synchronous mutators (tune) run in recording order, so
    for them this set does not depend on timing; an LLM sibling still in flight is missed."""
    gen, seq = proposal.generation, proposal.seq if proposal.seq is not None else -1
    cache = progress.avoid_cache
    if cache is None or cache[0] != gen:
        cache = (gen, frozenset(h for h, (g, _s) in progress.hashes.items() if g < gen))
        progress.avoid_cache = cache
    same = [h for h, s in progress.by_generation.get(gen, {}).items() if s < seq]
    return cache[1] | frozenset(same) if same else cache[1]


def earlier_generations(
    library: SolutionLibrary,
    run_id: str,
    progress: TaskProgress,
    proposal: Proposal,
    window: int | None = None,
) -> tuple[Scored, ...]:
    """Evaluated candidates of generations before the proposal's (complete once a generational
    strategy plans the next one, so this does not depend on timing); one read per generation.
    ``window``: only the last that many generations (one indexed read each), so a prompt's
    memory does not make every generation read the whole library."""
    gen = proposal.generation
    key = (gen, window)
    if progress.history_cache is None or progress.history_cache[0] != key:
        if window is None:
            found = library.candidates(run_id, progress.task.name, before=gen)
        else:
            found = [
                sc
                for g in range(max(0, gen - window), gen)
                for sc in library.candidates(run_id, progress.task.name, generation=g)
            ]
        progress.history_cache = (key, tuple(sc for sc in found if sc.evaluation is not None))
    return progress.history_cache[1]


def parent_candidates(
    library: SolutionLibrary, progress: TaskProgress, proposal: Proposal
) -> tuple[Scored, ...]:
    cache = progress.evaluated_cache
    return tuple(cache[pid] if pid in cache else library.get_candidate(pid) for pid in proposal.parents)


def earlier_ideas(
    library: SolutionLibrary, run_id: str, progress: TaskProgress, proposal: Proposal
) -> dict[int, str]:
    """Proposal id -> idea, for the proposals of generations before the proposal's that carried one
    (what :func:`earlier_generations`' candidates tried); one read per generation."""
    gen = proposal.generation
    if progress.ideas_cache is None or progress.ideas_cache[0] != gen:
        found = library.proposals(run_id, progress.task.name)
        ideas = {p.id: p.idea for p in found if p.generation < gen and p.idea and p.id is not None}
        progress.ideas_cache = (gen, ideas)
    return progress.ideas_cache[1]


# A fix line is at most fix_rounds deep; walking further only costs reads.
_ANCESTRY_DEPTH = 8


def correct_ancestor_ms(
    library: SolutionLibrary, progress: TaskProgress, parents: tuple[Scored, ...]
) -> float | None:
    """Runtime of the nearest correct candidate up the first parent's line (the parent itself
    included), or None: what a fix's gain is measured against."""
    node = parents[0] if parents else None
    cache = progress.evaluated_cache
    for _ in range(_ANCESTRY_DEPTH):
        if node is None:
            return None
        ev = node.evaluation
        if ev is not None and ev.ok and ev.runtime_ms:
            return ev.runtime_ms
        if not node.candidate.parents:
            return None
        pid = node.candidate.parents[0]
        node = cache[pid] if pid in cache else library.get_candidate(pid)
    return None


@dataclass(frozen=True)
class RequestContext:
    """What every request of a run shares (hardware and software are known once the pool is up)."""

    library: SolutionLibrary
    run_id: str
    run_seed: int
    language: str
    hardware: str
    software: str


def build_request(
    ctx: RequestContext, progress: TaskProgress, proposal: Proposal, mutator: Mutator, *, ideas: bool = False
) -> MutationRequest:
    """The request ``mutator`` gets for ``proposal`` (``ideas``: a brainstorm, which sees the
    reference's profile and the ideas tried but has nothing to avoid and no ancestor to beat)."""
    lib = ctx.library
    parents = parent_candidates(lib, progress, proposal)
    memory = ideas or mutator.wants_history
    return MutationRequest(
        proposal=proposal,
        task=progress.task,
        parents=parents,
        rng_seed=proposal_rng_seed(ctx.run_seed, proposal, parents),
        hardware=ctx.hardware,
        language=ctx.language,
        avoid=frozenset() if ideas else avoided_sources(progress, proposal),
        history=earlier_generations(lib, ctx.run_id, progress, proposal, mutator.history_window)
        if memory
        else (),
        ideas_of=earlier_ideas(lib, ctx.run_id, progress, proposal) if memory else {},
        # The reference's profile, taken with its baselines (pool/baseline_cache.py).
        reference_profile=lib.task_profile(progress.task.source_hash) if ideas else None,
        software=ctx.software,
        ancestor_ms=None if ideas else correct_ancestor_ms(lib, progress, parents),
        exemplars=related_exemplars(lib, progress, mutator.exemplar_count, proposal.generation),
    )


def related_exemplars(
    library: SolutionLibrary, progress: TaskProgress, count: int, generation: int
) -> tuple[Exemplar, ...]:
    """The best kernels of up to ``count`` other tasks of the library (any run) that share the
    task's operator family, or its reference's bottleneck class when profiling found one; read once
    per generation (other tasks' bests change as the run goes)."""
    if count <= 0:
        return ()
    cached = progress.exemplars_cache
    if cached is not None and cached[0] == generation:
        return cached[1]
    task = progress.task
    mine = family(task.source)
    profile = library.task_profile(task.source_hash)
    bottleneck = profile.get("bottleneck") if isinstance(profile, dict) else None
    picked: list[Exemplar] = []
    for best in library.best_per_task(task.source_hash):
        if family(best.task_source) == mine:
            why = f"same operator family ({mine})"
        elif bottleneck and best.bottleneck == bottleneck:
            why = f"same bottleneck ({bottleneck})"
        else:
            continue
        source = library.get_candidate(best.candidate).candidate.source
        picked.append(Exemplar(best.task, source, best.speedup, why))
        if len(picked) >= count:
            break
    progress.exemplars_cache = (generation, tuple(picked))
    return progress.exemplars_cache[1]
