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
