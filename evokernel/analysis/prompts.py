"""The prompts a run sent, as recorded with each LLM call, with what they were for."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from evokernel.analysis.usage import task_names
from evokernel.db import SolutionLibrary
from evokernel.db.models import LLMCallRow, ProposalRow

# The LLM mutator records a repair round's prompt under this header (mutators/llm.py).
REPAIR_HEAD = "[repair"


@dataclass(frozen=True)
class SentPrompt:
    call: int
    proposal: int | None
    task: str
    kind: str  # the proposal's operator (seed, mutate, crossover, fix, ideas) or "repair"
    generation: int | None
    island: int | None
    branch: int | None
    model: str
    outcome: str
    prompt_tokens: int
    prompt: str
    prompt_hash: str

    @property
    def chars(self) -> int:
        return len(self.prompt)


def run_prompts(lib: SolutionLibrary, run_id: str) -> list[SentPrompt]:
    """Every LLM call of the run in the order it was recorded."""

    def fn(s: Session) -> list[SentPrompt]:
        names = task_names(s, run_id)
        c, p = LLMCallRow, ProposalRow
        stmt = (
            select(c, p.task_id, p.operator, p.generation, p.island, p.branch)
            .outerjoin(p, p.id == c.proposal_id)
            .where(c.run_id == run_id)
            .order_by(c.id)
        )
        out = []
        for call, task_id, operator, generation, island, branch in s.execute(stmt):
            kind = "repair" if call.prompt.startswith(REPAIR_HEAD) else (operator or "?")
            out.append(
                SentPrompt(
                    call.id, call.proposal_id, names.get(task_id, ""), kind, generation, island, branch,
                    call.model, call.outcome, call.prompt_tokens, call.prompt, call.prompt_hash,
                )
            )  # fmt: skip
        return out

    return lib.read(fn)


@dataclass(frozen=True)
class KindLengths:
    kind: str
    count: int
    median_chars: int
    max_chars: int
    identical: int  # calls of this kind whose exact prompt another call of the run also sent


def lengths_by_kind(prompts: list[SentPrompt]) -> list[KindLengths]:
    """Per kind: how many, median and max length, and how many had a byte-identical twin."""
    seen: dict[str, int] = {}
    for sp in prompts:
        seen[sp.prompt_hash] = seen.get(sp.prompt_hash, 0) + 1
    kinds: dict[str, list[SentPrompt]] = {}
    for sp in prompts:
        kinds.setdefault(sp.kind, []).append(sp)
    return [
        KindLengths(
            kind,
            len(group),
            int(statistics.median(sp.chars for sp in group)),
            max(sp.chars for sp in group),
            sum(1 for sp in group if seen[sp.prompt_hash] > 1),
        )
        for kind, group in sorted(kinds.items())
    ]
