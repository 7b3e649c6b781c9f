"""Other tasks' best kernels across the library's runs, for the prompts' exemplars."""

from __future__ import annotations

from evokernel.db import SolutionLibrary
from tests.db.helpers import correct, make_task, new_candidate


def test_best_per_task_is_the_fastest_correct_kernel_of_every_other_task(lib: SolutionLibrary) -> None:
    mine, other, third = make_task("relu"), make_task("gelu", source="# gelu\n"), make_task("tanh", "# t\n")
    run, later = lib.create_run("a", {}), lib.create_run("b", {})
    for task in (mine, other):
        lib.register_task(run, task)
    lib.register_task(later, third)
    ids = {}
    for name, run_id, speedup, src in (
        ("relu", run, 9.0, "relu fast"),
        ("gelu", run, 1.5, "gelu slow"),
        ("gelu", run, 2.5, "gelu fast"),
        ("tanh", later, 1.1, "tanh"),
    ):
        ids[src] = new_candidate(lib, run_id, src, task=name)
        lib.record_evaluation(ids[src], correct(speedup))
    wrong = new_candidate(lib, run, "gelu wrong but marked fast", task="gelu")
    lib.record_evaluation(wrong, correct(None))  # no speedup: never an exemplar
    best = lib.best_per_task(mine.source_hash)
    assert [(b.task, b.candidate, b.speedup) for b in best] == [
        ("gelu", ids["gelu fast"], 2.5),
        ("tanh", ids["tanh"], 1.1),
    ]
    assert best[0].task_source == "# gelu\n"
    assert [b.task for b in lib.best_per_task(mine.source_hash, limit=1)] == ["gelu"]
