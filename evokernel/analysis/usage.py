"""LLM spend per task and model, and island populations generation by generation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, IslandEventRow, LLMCallRow, RunTaskRow


@dataclass(frozen=True)
class ModelUsage:
    """LLM calls of one (task, model); ``task`` is "" for calls not tied to a proposal. ``failed``
    counts calls whose outcome was not ok (retries included: each attempt is a call)."""

    task: str
    model: str
    calls: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    mean_latency_s: float


@dataclass(frozen=True)
class IslandGeneration:
    """Candidates one island produced in one generation: how many, how many correct, the best."""

    task: str
    island: int
    generation: int
    candidates: int
    correct: int
    best_speedup: float | None


@dataclass(frozen=True)
class IslandMove:
    task: str
    generation: int
    kind: str  # migrate | reset | reseed
    island: int
    candidate: int | None
    from_island: int | None


@dataclass(frozen=True)
class IslandHistory:
    generations: tuple[IslandGeneration, ...]
    events: tuple[IslandMove, ...]


def llm_usage(lib: SolutionLibrary, run_id: str) -> list[ModelUsage]:
    """Grouped by (task, model) in the order of ix_llm_calls_run_usage, index-only: the task is
    the one each call's proposal had (llm_calls.task_id, migration 0005); "" without one."""

    def fn(s: Session) -> list[ModelUsage]:
        call = LLMCallRow
        names = task_names(s, run_id)
        failed = func.sum(func.cast(call.outcome != "ok", type_=call.prompt_tokens.type))
        stmt = (
            select(
                call.task_id,
                call.model,
                func.count(),
                failed,
                func.sum(call.prompt_tokens),
                func.sum(call.completion_tokens),
                func.sum(call.cost_usd),
                func.sum(call.latency_s),
            )
            .where(call.run_id == run_id)
            .group_by(call.task_id, call.model)
        )
        groups: dict[tuple[str, str], list[Any]] = {}
        for task_id, model, *sums in s.execute(stmt):
            key = (names.get(task_id, ""), model)  # a task the run does not list reads as "", as before
            old = groups.get(key)
            groups[key] = [(a or 0) + (b or 0) for a, b in zip(old, sums, strict=True)] if old else sums
        return [
            ModelUsage(
                task,
                model,
                int(n),
                int(bad or 0),
                int(tin or 0),
                int(tout or 0),
                float(usd or 0),
                float(latency or 0) / int(n),
            )
            for (task, model), (n, bad, tin, tout, usd, latency) in groups.items()
        ]

    return sorted(lib.read(fn), key=lambda u: (u.task, u.model))


def task_names(s: Session, run_id: str) -> dict[Any, Any]:
    """Task id -> the run's name for it."""
    return dict(
        s.execute(select(RunTaskRow.task_id, RunTaskRow.name).where(RunTaskRow.run_id == run_id)).all()
    )


def island_moves(
    s: Session, run_id: str, names: dict[Any, Any], task_ids: list[Any] | None = None
) -> tuple[IslandMove, ...]:
    """The run's island events in the order they were recorded (``task_ids``: those tasks' only)."""
    e = IslandEventRow
    stmt = select(e.task_id, e.generation, e.kind, e.island, e.candidate_id, e.from_island).where(
        e.run_id == run_id
    )
    if task_ids is not None:
        stmt = stmt.where(e.task_id.in_(task_ids))
    return tuple(
        IslandMove(names.get(task_id, "?"), *rest) for task_id, *rest in s.execute(stmt.order_by(e.id))
    )


def island_history(lib: SolutionLibrary, run_id: str, task: str | None = None) -> IslandHistory:
    """Candidates grouped by (task, island, generation) in the order of
    ix_candidates_run_task_island_generation (index-only), and the island events of the run
    (ix_island_events_run_task); ``task`` keeps one task's."""

    def fn(s: Session) -> IslandHistory:
        names = task_names(s, run_id)
        wanted = [t for t, name in names.items() if name == task] if task is not None else None
        c = CandidateRow
        correct = func.sum(func.cast(c.status == "correct", type_=c.island.type))
        stmt = select(c.task_id, c.island, c.generation, func.count(), correct, func.max(c.speedup)).where(
            c.run_id == run_id
        )
        if wanted is not None:
            stmt = stmt.where(c.task_id.in_(wanted))
        gens = [
            IslandGeneration(names.get(t, "?"), island, gen, int(n), int(ok or 0), best)
            for t, island, gen, n, ok, best in s.execute(stmt.group_by(c.task_id, c.island, c.generation))
        ]
        events = island_moves(s, run_id, names, wanted)
        gens.sort(key=lambda g: (g.task, g.generation, g.island))
        return IslandHistory(tuple(gens), events)

    return lib.read(fn)
