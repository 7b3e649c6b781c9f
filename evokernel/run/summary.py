"""``RunSummary``: what a finished (or interrupted) run hands back to its caller."""

from __future__ import annotations

from dataclasses import dataclass

from evokernel.types import Scored


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    library_url: str
    best: dict[str, Scored | None]
    seeds: dict[str, Scored | None]
    stopped: dict[str, str]
    # True when a SIGINT stopped the run early (status "interrupted"; resume with --resume).
    interrupted: bool = False
    # LLM calls of the run (every attempt, all sessions) and how many failed: a run whose every
    # call failed (a wrong key or server) ends with a non-zero exit, not "finished".
    llm_calls: int = 0
    llm_failed: int = 0

    @property
    def llm_all_failed(self) -> bool:
        return self.llm_calls > 0 and self.llm_failed == self.llm_calls
