"""Small pieces the built-in strategies share: how a run starts and which operator mutates."""

from __future__ import annotations

from collections.abc import Callable

from evokernel.strategies.view import RunView
from evokernel.types import Operator, Proposal, Scored, Status

SEED_FILE = Operator.SEED_FILE


def mutation_operator(view: RunView, preferred: str = "auto") -> str:
    """``preferred`` unless "auto": the LLM's ``mutate`` when configured, else the ``tune`` knob search."""
    if preferred != "auto":
        return preferred
    return Operator.MUTATE if Operator.MUTATE in view.operators else Operator.TUNE


def initial_generation(view: RunView, count: int, island: int = 0) -> list[Proposal]:
    """Generation 0: the task's seed file (one proposal), else ``count`` LLM-written seeds."""
    task = view.task.name
    if view.task.seed_source is not None and SEED_FILE in view.operators:
        return [Proposal(task=task, operator=SEED_FILE, generation=0, island=island)]
    if Operator.SEED in view.operators:
        return [
            Proposal(task=task, operator=Operator.SEED, generation=0, island=island, branch=b)
            for b in range(count)
        ]
    return []


def failed(candidates: list[Scored]) -> list[Scored]:
    """Evaluated candidates that are not correct (fix material), oldest first."""
    return [
        sc for sc in candidates if sc.evaluation is not None and sc.evaluation.status is not Status.CORRECT
    ]


def correct(candidates: list[Scored]) -> list[Scored]:
    return [sc for sc in candidates if sc.evaluation is not None and sc.evaluation.ok]


def by_fitness(candidates: list[Scored]) -> list[Scored]:
    """Correct candidates, fastest first; ties go to the older one (deterministic)."""
    return sorted(correct(candidates), key=lambda sc: (-sc.speedup, sc.candidate.id))


def fix_depth(sc: Scored, lookup: Callable[[int], Scored | None]) -> int:
    """How many fix rounds made this candidate (0 for a line's first attempt); ``lookup`` finds a
    parent by id (None: unknown, which ends the count)."""
    depth = 0
    while sc.candidate.operator == Operator.FIX and sc.candidate.parents:
        depth += 1
        parent = lookup(sc.candidate.parents[0])
        if parent is None:
            break
        sc = parent
    return depth


def carried_fixes(view: RunView, generation: int, max_attempts: int, first_branch: int) -> list[Proposal]:
    """``fix`` proposals of ``generation`` for the failed candidates of ``generation - 1`` whose fix
    line has attempts left (PIKE's OpenEvolve fork fixes inside the worker, up to
    ``max_fix_attempts``; a generational strategy carries them into the next generation, so its plan
    still reads finished generations only). Each stays on its candidate's island; branches count
    from ``first_branch`` in candidate order."""
    if generation < 1 or max_attempts < 1 or Operator.FIX not in view.operators:
        return []
    previous = view.candidates(generation=generation - 1)
    by_id = {sc.candidate.id: sc for sc in previous}

    def lookup(cid: int) -> Scored | None:
        return by_id.get(cid) or view.candidate(cid)

    out: list[Proposal] = []
    sources: set[str] = set()  # a source failing twice (siblings in flight) is fixed once
    for sc in failed(previous):
        twin = sc.candidate.source_hash in sources
        sources.add(sc.candidate.source_hash)
        if twin or fix_depth(sc, lookup) >= max_attempts:
            continue
        out.append(
            Proposal(
                task=view.task.name,
                operator=Operator.FIX,
                island=sc.candidate.island,
                generation=generation,
                parents=(sc.candidate.id,),
                branch=first_branch + len(out),
            )
        )
    return out
