"""The strategy conformance kit: what a strategy author runs to check a plug-in (product, not test
support -- it ships so that third-party strategies can be held to the same rules).

Enters: a strategy name or ``module:Class`` path and its params.
Leaves: nothing on success; an ``AssertionError`` naming the broken rule otherwise.
The checks (:mod:`.kit`) drive the real engine and a real SQLite library with instant
in-process stand-ins for the mutator and the evaluator pool (:mod:`.instant`), which benchmarks
and tests reuse.
"""

from __future__ import annotations

from evokernel.conformance.instant import (
    INCORRECT_MARK,
    SEED_SOURCE,
    InstantEvaluator,
    InstantHardware,
    InstantMutator,
    QuietReporter,
    instant_config,
    instant_task,
    run_instant,
)
from evokernel.conformance.kit import check_strategy, library_fingerprint

__all__ = [
    "INCORRECT_MARK",
    "SEED_SOURCE",
    "InstantEvaluator",
    "InstantHardware",
    "InstantMutator",
    "QuietReporter",
    "check_strategy",
    "instant_config",
    "instant_task",
    "library_fingerprint",
    "run_instant",
]
