"""LLM spend per task and model, and island populations generation by generation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, IslandEventRow, LLMCallRow, ProposalRow, RunTaskRow


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
    """Grouped over llm_calls' run_id index, joined to proposals by primary key."""

    def fn(s: Session) -> list[ModelUsage]:
        call, p, rt = LLMCallRow, ProposalRow, RunTaskRow
        failed = func.sum(func.cast(call.outcome != "ok", type_=call.prompt_tokens.type))
        stmt = (
            select(
                rt.name,
                call.model,
                func.count(),
                failed,
                func.sum(call.prompt_tokens),
                func.sum(call.completion_tokens),
                func.sum(call.cost_usd),
                func.avg(call.latency_s),
            )
            .select_from(call)
            .outerjoin(p, p.id == call.proposal_id)
            .outerjoin(rt, (rt.run_id == call.run_id) & (rt.task_id == p.task_id))
            .where(call.run_id == run_id)
            .group_by(rt.name, call.model)
        )
        return [
            ModelUsage(
                task or "",
                model,
                int(n),
                int(bad or 0),
                int(tin or 0),
                int(tout or 0),
                float(usd or 0),
                float(lat or 0),
            )
            for task, model, n, bad, tin, tout, usd, lat in s.execute(stmt)
        ]

    return sorted(lib.read(fn), key=lambda u: (u.task, u.model))


def island_history(lib: SolutionLibrary, run_id: str) -> IslandHistory:
    """Candidates grouped by (task, island, generation) over the (run_id, task_id, island) index,
    and the island events of the run ((run_id, task_id, generation) index)."""

    def fn(s: Session) -> IslandHistory:
        names: dict[Any, Any] = dict(
            s.execute(select(RunTaskRow.task_id, RunTaskRow.name).where(RunTaskRow.run_id == run_id)).all()
        )
        c = CandidateRow
        correct = func.sum(func.cast(c.status == "correct", type_=c.island.type))
        gens = [
            IslandGeneration(names.get(t, "?"), island, gen, int(n), int(ok or 0), best)
            for t, island, gen, n, ok, best in s.execute(
                select(c.task_id, c.island, c.generation, func.count(), correct, func.max(c.speedup))
                .where(c.run_id == run_id)
                .group_by(c.task_id, c.island, c.generation)
            )
        ]
        e = IslandEventRow
        events = [
            IslandMove(
                names.get(r.task_id, "?"), r.generation, r.kind, r.island, r.candidate_id, r.from_island
            )
            for r in s.scalars(select(e).where(e.run_id == run_id).order_by(e.id))
        ]
        gens.sort(key=lambda g: (g.task, g.generation, g.island))
        return IslandHistory(tuple(gens), tuple(events))

    return lib.read(fn)
