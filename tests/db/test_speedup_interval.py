"""Speedup intervals and confirmation (issue 35) in the library: written with every evaluation,
kept beside the candidate's figure, read back by every typed read, and migration 0008 on a library
from before it (old rows: no interval, not confirmed)."""

from __future__ import annotations

from alembic import command
from sqlalchemy import inspect

from evokernel.db import SolutionLibrary
from evokernel.db.connection import alembic_config, make_engine
from evokernel.types import Evaluation, Status
from tests.db.helpers import correct, make_task, new_candidate

PAIRED = {"timing": {"paired": {"pairs": 24, "stopped": "precision", "halfwidth": 0.03, "level": 0.95}}}
CONFIRMATION = {"vs_incumbent": 1.4, "low": 1.3, "high": 1.5, "pairs": 16, "incumbent": None}


def paired(speedup: float, low: float, high: float, *, confirmed: bool = False) -> Evaluation:
    details = {**PAIRED, **({"confirmation": CONFIRMATION} if confirmed else {})}
    return correct(speedup, speedup_low=low, speedup_high=high, confirmed=confirmed, details=details)


def test_evaluation_dict_round_trip_and_old_dicts_load() -> None:
    ev = paired(2.05, 1.98, 2.11, confirmed=True)
    assert Evaluation.from_dict(ev.to_dict()) == ev
    old = {"status": "correct", "speedup_eager": 1.5}  # a dict written before issue 35
    loaded = Evaluation.from_dict(old)
    assert (loaded.speedup_low, loaded.speedup_high, loaded.confirmed) == (None, None, False)


def test_interval_and_confirmation_round_trip(lib: SolutionLibrary, run_id: str) -> None:
    a = new_candidate(lib, run_id, "a")
    b = new_candidate(lib, run_id, "b")
    lib.record_evaluation(a, paired(2.05, 1.98, 2.11, confirmed=True))
    lib.record_evaluation(b, correct(1.5))  # not paired: no interval
    got = {sc.candidate.id: sc.evaluation for sc in lib.candidates(run_id, "relu")}
    assert got[a] == paired(2.05, 1.98, 2.11, confirmed=True)
    assert got[a] is not None and got[a].details["confirmation"] == CONFIRMATION
    assert got[b] is not None and (got[b].speedup_low, got[b].speedup_high, got[b].confirmed) == (
        None,
        None,
        False,
    )
    # The light reads carry the candidate row's copy.
    light = {sc.candidate.id: sc.evaluation for sc in lib.summaries(run_id, "relu")}
    assert light[a] is not None and (light[a].speedup_low, light[a].speedup_high, light[a].confirmed) == (
        1.98,
        2.11,
        True,
    )
    assert light[b] is not None and light[b].speedup_low is None and not light[b].confirmed
    assert lib.top(run_id, "relu", 1)[0].evaluation == got[a]
    assert lib.get_candidate(a).evaluation == got[a]


def test_a_later_failure_clears_the_candidates_interval(lib: SolutionLibrary, run_id: str) -> None:
    a = new_candidate(lib, run_id, "a")
    lib.record_evaluation(a, paired(2.0, 1.9, 2.1, confirmed=True))
    lib.record_evaluation(a, Evaluation(Status.RUNTIME_ERROR, "boom", speedup_low=1.0, confirmed=True))
    (light,) = lib.summaries(run_id, "relu")
    assert light.evaluation is not None
    assert (light.evaluation.speedup_eager, light.evaluation.speedup_low, light.evaluation.confirmed) == (
        None,
        None,
        False,
    )


def test_upgrade_from_0007_reads_old_rows_without_an_interval(library_url: str) -> None:
    url = library_url if "://" in library_url else f"sqlite:///{library_url}"
    lib = SolutionLibrary(url)
    rid = lib.create_run("r", {})
    lib.register_task(rid, make_task())
    old = new_candidate(lib, rid, "old")
    lib.record_evaluation(old, correct(1.7))
    lib.close()
    command.downgrade(alembic_config(url), "0007")
    engine = make_engine(url)
    for table in ("evaluations", "candidates"):
        assert "speedup_low" not in {c["name"] for c in inspect(engine).get_columns(table)}
    engine.dispose()
    command.upgrade(alembic_config(url), "head")
    lib = SolutionLibrary(url)
    (sc,) = lib.candidates(rid, "relu")
    assert sc.evaluation is not None and sc.evaluation.speedup_eager == 1.7
    assert (sc.evaluation.speedup_low, sc.evaluation.speedup_high, sc.evaluation.confirmed) == (
        None,
        None,
        False,
    )
    (light,) = lib.summaries(rid, "relu")
    assert light.evaluation is not None and light.evaluation.confirmed is False
    new = new_candidate(lib, rid, "new")
    lib.record_evaluation(new, paired(2.0, 1.9, 2.1))
    assert lib.top(rid, "relu", 1)[0].evaluation == paired(2.0, 1.9, 2.1)
    lib.close()
