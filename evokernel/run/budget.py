"""Run-level budgets on LLM calls, USD and wall time, checked before work starts.

Per-task evaluation budgets live in the engine (they are counts of library rows). The limits here
are shared by every task of the run, so work in flight holds a *reservation*: an LLM job reserves
the most it can spend (:func:`llm_calls_per_job` calls; the cost of the most expensive job so far)
until it reports what it really spent. A job starts only if its reservation fits next to what is
spent and reserved, which is what keeps a run from overspending with many jobs in flight.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from evokernel.config.schema import BudgetConfig
from evokernel.exceptions import ConfigError
from evokernel.mutators.base import Mutator
from evokernel.types import LLMCall


def llm_calls_per_job(mutators: Iterable[Mutator], default: int) -> int:
    """The most LLM calls (HTTP attempts) one job -- a mutation or an ideas call -- can make.

    One job is one ``mutate``/``ideas`` call: one model of an ensemble, retried at most
    ``max_retries`` times (a fix round or an ideas call is a job of its own). Each LLM mutator
    states its own bound (``Mutator.llm_calls_per_job``: the LLM mutator's is its own
    ``max_retries + 1``, which need not be the experiment config's when mutators are passed in);
    one that states none gets ``default`` (``llm.max_retries + 1``)."""
    bounds = [
        m.llm_calls_per_job if m.llm_calls_per_job is not None else default for m in mutators if m.uses_llm
    ]
    return max(bounds, default=default)


class Verdict(Enum):
    OK = "ok"
    # Not now, but jobs in flight hold reservations that may come back unspent.
    WAIT = "wait"
    EXHAUSTED = "exhausted"


@dataclass
class RunBudget:
    config: BudgetConfig
    attempts_per_job: int
    spent_calls: int = 0
    spent_usd: float = 0.0
    # Cost of the most expensive LLM job so far, and how many jobs reported (0: nothing known).
    max_job_usd: float = 0.0
    jobs_seen: int = 0
    reserved_jobs: int = 0
    elapsed_before_s: float = 0.0
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        cfg = self.config
        for key, value in (("llm_calls", cfg.llm_calls), ("usd", cfg.usd), ("wall_time_s", cfg.wall_time_s)):
            if value is not None and value <= 0:
                raise ConfigError(f"budget.{key} must be positive (or null for no limit), not {value}")

    # ---- wall time ----------------------------------------------------------------------------
    def elapsed_s(self) -> float:
        return self.elapsed_before_s + time.monotonic() - self.started

    def out_of_time(self) -> str:
        limit = self.config.wall_time_s
        if limit is not None and self.elapsed_s() >= limit:
            return f"wall-time budget of {limit:g} s reached"
        return ""

    # ---- LLM calls and USD --------------------------------------------------------------------
    def llm_verdict(self) -> tuple[Verdict, str]:
        """Whether one more LLM job may start now, and if not, why."""
        verdicts: list[tuple[Verdict, str]] = []
        calls = self.config.llm_calls
        if calls is not None:
            need = self.attempts_per_job
            if self.spent_calls + (self.reserved_jobs + 1) * need <= calls:
                verdicts.append((Verdict.OK, ""))
            elif self.spent_calls + need <= calls:
                verdicts.append((Verdict.WAIT, ""))
            else:
                verdicts.append((Verdict.EXHAUSTED, f"LLM call budget of {calls} reached"))
        usd = self.config.usd
        if usd is not None:
            reason = f"USD budget of {usd:g} reached (spent {self.spent_usd:.4g})"
            if self.spent_usd >= usd:
                verdicts.append((Verdict.EXHAUSTED, reason))
            elif self.jobs_seen == 0:  # cost unknown: one probe job at a time
                verdicts.append((Verdict.OK if self.reserved_jobs == 0 else Verdict.WAIT, ""))
            elif self.spent_usd + (self.reserved_jobs + 1) * self.max_job_usd <= usd:
                verdicts.append((Verdict.OK, ""))
            elif self.spent_usd + self.max_job_usd <= usd:
                verdicts.append((Verdict.WAIT, ""))
            else:
                verdicts.append((Verdict.EXHAUSTED, reason))
        for kind in (Verdict.EXHAUSTED, Verdict.WAIT):
            for verdict, reason in verdicts:
                if verdict is kind:
                    return verdict, reason
        return Verdict.OK, ""

    def reserve(self) -> bool:
        if self.llm_verdict()[0] is not Verdict.OK:
            return False
        self.reserved_jobs += 1
        return True

    def settle(self, calls: Iterable[LLMCall]) -> None:
        """A reserved job finished (or died): turn its reservation into what it really spent."""
        spent = list(calls)
        self.reserved_jobs -= 1
        self.spent_calls += len(spent)
        cost = sum(c.cost_usd for c in spent)
        self.spent_usd += cost
        if spent:
            self.jobs_seen += 1
            self.max_job_usd = max(self.max_job_usd, cost)
