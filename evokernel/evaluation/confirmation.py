"""A confirmation's incumbent: the task's current best, run by a second worker beside the
candidate's so the timing stage can time the two in one window (issue 35, run/confirm.py).

The incumbent was verified when it became the best; here it is only built, made at the timing
variant's sizes, warmed, timed and checked once more (its timed calls' facts, and one call on
values no timed call saw). It is candidate code like any other: every fact is judged by the rule
table, in its own directory, under its own confinement. Whatever goes wrong with it costs the
confirmation, never the candidate's verdict: :class:`IncumbentLost` carries the reason into
``details["confirmation"]``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from evokernel.evaluation import replies
from evokernel.evaluation.pairing import PairedRatio
from evokernel.evaluation.profiling import stage as profiling
from evokernel.evaluation.verdict import StageFailure
from evokernel.evaluation.worker_process import WorkerProcess


class IncumbentLost(Exception):
    """The incumbent failed a step of the confirmation; the candidate's timing goes on without it."""


class Supervisor(profiling.Supervisor, Protocol):
    """What the confirmation uses of the supervisor, beyond what the profiling stage does."""

    incumbent: WorkerProcess | None

    def check_facts(self, raw: Any, kind: str, where: str) -> None: ...


def prepare(sup: Supervisor, cuda: bool) -> None:
    """Import the incumbent and make it at the timing variant's sizes (warmed on a GPU)."""
    worker = sup.incumbent
    assert worker is not None
    with lost("while it was built"):
        built, _ = sup.ask({"op": "build"}, replies.ImportReply, worker=worker)
        sup.check_facts(built.facts, "import", "the incumbent's import")
        variant = {"op": "variant", "index": 0, "overrides": sup.request.overrides[0]}
        sup.ask(variant, replies.VariantReply, worker=worker)
        if cuda:
            warm, _ = sup.ask({"op": "warm"}, replies.WarmReply, worker=worker)
            sup.check_facts(warm.facts, "warm", "the incumbent's warm-up call")


@contextlib.contextmanager
def lost(during: str) -> Iterator[None]:
    """Turn a failure of the incumbent's step into :class:`IncumbentLost` naming the step."""
    try:
        yield
    except StageFailure as exc:
        raise IncumbentLost(f"the incumbent failed {during}: {exc.status.value}: {exc.reason}") from exc


def record(paired: PairedRatio) -> dict[str, Any]:
    """``details["confirmation"]``: how much faster the candidate ran than the incumbent in the
    same window (the incumbent's time over the candidate's, per pair), with its interval."""
    return {
        "vs_incumbent": paired.ratio,
        "low": paired.low,
        "high": paired.high,
        "level": paired.level,
        "pairs": paired.pairs,
        "stopped": paired.stopped,
        "candidate_ms": paired.a_ms,
        "incumbent_ms": paired.b_ms,
    }
