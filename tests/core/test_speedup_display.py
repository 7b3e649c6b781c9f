"""One form for a speedup everywhere (issue 35): ``2.05x [1.98-2.11]`` with its 95 % interval, the
bare figure where none was measured (never an invented one), and ``evokernel verify``'s line."""

from __future__ import annotations

import json

from evokernel.evaluation.verify import format_report, report_dict, to_json
from evokernel.types import Candidate, Evaluation, Scored, Status, format_speedup

PAIRED = {"timing": {"paired": {"pairs": 24, "stopped": "precision", "halfwidth": 0.015, "level": 0.95}}}


def paired(*, confirmed: bool = False) -> Evaluation:
    return Evaluation(
        Status.CORRECT,
        speedup_eager=2.05,
        speedup_low=1.98,
        speedup_high=2.11,
        details=PAIRED,
        confirmed=confirmed,
    )


def test_format_speedup() -> None:
    assert format_speedup(2.05, 1.98, 2.11) == "2.05x [1.98-2.11]"
    assert format_speedup(2.05) == "2.05x"  # not paired: the bare figure
    assert format_speedup(2.05, 1.98, None) == "2.05x"  # half an interval is none
    assert format_speedup(None, 1.0, 2.0) == "-"
    assert format_speedup(0.000123456, 0.00012, 0.000125) == "0.000123x [0.00012-0.000125]"
    assert format_speedup(123.4, 118.0, 130.2) == "123x [118-130]"


def test_evaluation_and_scored_text() -> None:
    assert paired().speedup_text == "2.05x [1.98-2.11]"
    assert Evaluation(Status.CORRECT, speedup_eager=1.5).speedup_text == "1.5x"
    assert (
        Evaluation(Status.INCORRECT, speedup_eager=1.5, speedup_low=1.4, speedup_high=1.6).speedup_text == "-"
    )
    cand = Candidate(1, "r", "t", 1, 0, 0, "seed", (), "src")
    assert Scored(cand, paired()).speedup_text == "2.05x [1.98-2.11]"
    assert Scored(cand, None).speedup_text == "-"


def test_verify_prints_the_interval_and_the_pairs() -> None:
    text = format_report(paired())
    assert "speedup vs eager: 2.05x [1.98-2.11] (95 % interval, 24 pairs, stopped at precision)" in text
    confirmed = format_report(paired(confirmed=True))
    assert "24 pairs, stopped at precision, confirmed)" in confirmed
    report = json.loads(to_json(paired()))
    assert (report["speedup_low"], report["speedup_high"], report["paired"]["pairs"]) == (1.98, 2.11, 24)
    # The spread between windows that went into the interval (pairing.with_window_spread) is said.
    spread = {"timing": {"paired": {**PAIRED["timing"]["paired"], "window_spread": 0.04}}}
    widened = Evaluation(
        Status.CORRECT, speedup_eager=2.05, speedup_low=1.9, speedup_high=2.2, details=spread
    )
    assert "2.05x [1.9-2.2] (95 % interval with 4.0 % between windows, 24 pairs" in format_report(widened)


def test_verify_says_not_paired_without_an_interval() -> None:
    text = format_report(Evaluation(Status.CORRECT, speedup_eager=1.5))
    assert "speedup vs eager: 1.5x (not paired)" in text
    assert report_dict(Evaluation(Status.CORRECT, speedup_eager=1.5))["paired"] is None
    failed = format_report(Evaluation(Status.INCORRECT, reason="max error 1.0"))
    assert "speedup" not in failed
