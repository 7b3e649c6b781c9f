"""The analysis queries as they were before migration 0005 (whole-row reads, grouping in Python):
the reference the index-only queries must equal on a small real library."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evokernel.analysis import FailureCount, IslandGeneration, ModelUsage, best_so_far, island_history
from evokernel.analysis.best_steps import thin
from evokernel.analysis.convergence import ConvergencePoint
from evokernel.dashboard.api import jsonable
from evokernel.db import SolutionLibrary
from evokernel.db.models import CandidateRow, EvaluationRow, LLMCallRow, ProposalRow, RunTaskRow
from evokernel.db.reason_key import reason_key


def names(s: Session, run_id: str) -> dict[Any, Any]:
    return dict(
        s.execute(select(RunTaskRow.task_id, RunTaskRow.name).where(RunTaskRow.run_id == run_id)).all()
    )


def run_totals(lib: SolutionLibrary) -> dict[str, tuple[int, float | None, float, int]]:
    """Run id -> (evaluated candidates, best correct speedup, LLM dollars, tasks)."""

    def fn(s: Session) -> dict[str, tuple[int, float | None, float, int]]:
        c, call = CandidateRow, LLMCallRow
        out = {}
        for (rid,) in s.execute(select(RunTaskRow.run_id).distinct()):
            evaluated = s.scalar(select(func.count()).where(c.run_id == rid, c.status != "pending"))
            best = s.scalar(select(func.max(c.speedup)).where(c.run_id == rid, c.status == "correct"))
            usd = s.scalar(select(func.sum(call.cost_usd)).where(call.run_id == rid)) or 0.0
            tasks = s.scalar(select(func.count()).where(RunTaskRow.run_id == rid))
            out[rid] = (int(evaluated or 0), best, float(usd), int(tasks or 0))
        return out

    return lib.read(fn)


def llm_usage(lib: SolutionLibrary, run_id: str) -> list[ModelUsage]:
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
                task or "", model, int(n), int(bad or 0), int(i or 0), int(o or 0), float(u or 0), float(t)
            )
            for task, model, n, bad, i, o, u, t in s.execute(stmt)
        ]

    return sorted(lib.read(fn), key=lambda u: (u.task, u.model))


def island_generations(lib: SolutionLibrary, run_id: str) -> list[IslandGeneration]:
    def fn(s: Session) -> list[IslandGeneration]:
        tasks = names(s, run_id)
        groups: dict[tuple[str, int, int], tuple[int, int, float | None]] = {}
        for r in s.scalars(select(CandidateRow).where(CandidateRow.run_id == run_id)):
            key = (tasks.get(r.task_id, "?"), r.island, r.generation)
            n, ok, best = groups.get(key, (0, 0, None))
            if r.speedup is not None and (best is None or r.speedup > best):
                best = r.speedup
            groups[key] = (n + 1, ok + (r.status == "correct"), best)
        return [IslandGeneration(t, i, g, n, ok, b) for (t, i, g), (n, ok, b) in groups.items()]

    return sorted(lib.read(fn), key=lambda g: (g.task, g.generation, g.island))


def failure_counts(lib: SolutionLibrary, run_id: str) -> list[FailureCount]:
    def fn(s: Session) -> list[FailureCount]:
        tasks = names(s, run_id)
        c, e = CandidateRow, EvaluationRow
        latest: dict[int, tuple[int, str, str, str]] = {}
        for cid, task_id, stage, status, reason in s.execute(
            select(c.id, c.task_id, e.stage, e.status, e.reason)
            .join(e, e.candidate_id == c.id)
            .where(c.run_id == run_id, c.status.not_in(("correct", "pending")))
            .order_by(e.id)
        ):
            latest[cid] = (task_id, stage or "", status, reason or "")
        groups: dict[tuple[str, str, str, str], list[int]] = {}
        for cid, (task_id, stage, status, reason) in sorted(latest.items()):
            groups.setdefault((tasks.get(task_id, "?"), stage, status, reason_key(reason)), []).append(cid)
        p = ProposalRow
        for pid, task_id, reason in s.execute(
            select(p.id, p.task_id, p.reason).where(p.run_id == run_id, p.state == "failed").order_by(p.id)
        ):
            groups.setdefault((tasks.get(task_id, "?"), "mutation", "failed", reason_key(reason)), []).append(
                pid
            )
        return [
            FailureCount(task, stage, status, reason, len(ids), tuple(ids[:3]))
            for (task, stage, status, reason), ids in groups.items()
        ]

    return sorted(lib.read(fn), key=lambda f: (-f.count, f.task, f.stage, f.reason))


def steps(lib: SolutionLibrary, run_id: str, task: str, x: str) -> tuple[int, tuple[ConvergencePoint, ...]]:
    points = best_so_far(lib, run_id, task, x)
    return len(points), thin(points)


def islands_json(lib: SolutionLibrary, run_id: str) -> dict[str, Any]:
    """The dashboard's /islands answer as it was built from island_history's generation rows."""
    history = island_history(lib, run_id)
    per: dict[str, dict[int, dict[str, Any]]] = {}
    for g in history.generations:
        isl = per.setdefault(g.task, {}).setdefault(
            g.island, {"island": g.island, "candidates": 0, "correct": 0, "best": None, "curve": []}
        )
        isl["candidates"] += g.candidates
        isl["correct"] += g.correct
        if g.best_speedup is not None and (isl["best"] is None or g.best_speedup > isl["best"]):
            isl["best"] = g.best_speedup
            isl["curve"].append([g.generation, g.best_speedup])
        isl["last_generation"] = max(isl.get("last_generation", 0), g.generation)
    out: dict[str, Any] = {}
    for task, islands_of_task in per.items():
        events = [jsonable(e) for e in history.events if e.task == task]
        for isl in islands_of_task.values():
            if isl["curve"] and isl["last_generation"] > isl["curve"][-1][0]:
                isl["curve"].append([isl["last_generation"], isl["best"]])
            mine = [e for e in events if e["island"] == isl["island"]]
            isl["migrants_in"] = sum(1 for e in mine if e["kind"] == "migrate")
            isl["migrants_out"] = sum(
                1 for e in events if e["kind"] == "migrate" and e["from_island"] == isl["island"]
            )
            isl["resets"] = sum(1 for e in mine if e["kind"] == "reset")
        out[task] = {"islands": [islands_of_task[i] for i in sorted(islands_of_task)], "events": events}
    return {"tasks": out}
