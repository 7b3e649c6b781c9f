"""What a proposal's ``MutationRequest`` is built from: its parents, the sources it must not
repeat, the evaluated history before its generation, and its randomness.

Reproducibility: a proposal's randomness (``MutationRequest.rng_seed``) and the duplicate check
depend on what the proposal *is* (task, island, generation, branch, operator, parents' sources,
idea) and on earlier generations, never on the order work was recorded or finished in.
"""

from __future__ import annotations

import hashlib

from evokernel.db import SolutionLibrary
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
