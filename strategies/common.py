"""Small pieces the built-in strategies share: how a run starts and which operator mutates."""

from __future__ import annotations

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
