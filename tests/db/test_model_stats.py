"""The model selector's state per (run, model): rewritten as the run learns, kept apart per run."""

from __future__ import annotations

from evokernel.db import SolutionLibrary


def test_model_stats_are_replaced_per_model_and_kept_per_run(lib: SolutionLibrary, run_id: str) -> None:
    other = lib.create_run("other", {})
    assert lib.model_stats(run_id) == {}
    lib.record_model_stats(run_id, {"m/a": {"pulls": 2, "observed": 1, "gain": 0.5, "cost_usd": 0.01}})
    lib.record_model_stats(other, {"m/a": {"pulls": 9, "observed": 9, "gain": 9.0, "cost_usd": 9.0}})
    lib.record_model_stats(
        run_id,
        {
            "m/a": {"pulls": 3, "observed": 2, "gain": 0.75, "cost_usd": 0.02},
            "m/b": {"pulls": 1, "observed": 0, "gain": 0.0, "cost_usd": 0.0},
        },
    )
    assert lib.model_stats(run_id) == {
        "m/a": {"pulls": 3, "observed": 2, "gain": 0.75, "cost_usd": 0.02},
        "m/b": {"pulls": 1, "observed": 0, "gain": 0.0, "cost_usd": 0.0},
    }
    assert lib.model_stats(other)["m/a"]["pulls"] == 9
