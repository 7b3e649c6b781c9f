"""Resume takes the command line the user ran: relative task paths resolve the same way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evokernel.config.loading import load_config
from evokernel.conformance import InstantEvaluator, InstantMutator, QuietReporter
from evokernel.db import SolutionLibrary
from evokernel.run.runner import run_experiment

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_resume_with_relative_task_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = tmp_path / "experiments"
    (exp / "tasks").mkdir(parents=True)
    for name in ("axpy.py", "axpy.seed.py"):
        shutil.copy(FIXTURES / "tasks" / name, exp / "tasks" / name)
    (exp / "quick.yaml").write_text("name: q\nbudget: {evaluations: 3}\n")
    monkeypatch.chdir(tmp_path)
    # The path is relative to the config's folder, not to the current one (where it does not exist).
    line = ["tasks=[tasks/axpy.py]", "library=kill.db"]

    def run(resume: str | None, evaluations: int) -> str:
        config = load_config("experiments/quick.yaml", [*line, f"budget.evaluations={evaluations}"])
        return run_experiment(
            config,
            resume=resume,
            overrides=[*line, f"budget.evaluations={evaluations}"],
            reporter=QuietReporter(),
            pool=InstantEvaluator(),
            mutators=[InstantMutator()],
        ).run_id

    run_id = run(None, 3)
    assert run(run_id, 5) == run_id
    lib = SolutionLibrary(tmp_path / "kill.db")
    assert lib.count_evaluated(run_id) == 5
    assert [kind for kind, _m, _d in lib.events(run_id) if kind in ("started", "resumed")] == [
        "started",
        "resumed",
    ]
