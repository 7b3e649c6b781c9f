"""Published kernels as starting kernels: matching KernelBench/PIKE solution folders to tasks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evokernel.cli import main
from evokernel.config.loading import load_config
from evokernel.conformance import InstantEvaluator, InstantMutator, QuietReporter
from evokernel.db import SolutionLibrary
from evokernel.exceptions import ExportError
from evokernel.run.runner import run_experiment
from evokernel.run.seed_kernels import ALIAS, apply_seed_kernels, match_seed_files
from evokernel.tasks import load_tasks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PIKE = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "pike-level3"


@pytest.mark.skipif(not PIKE.is_dir(), reason=f"the PIKE corpus is not at {PIKE}")
def test_pike_solution_folder_matches_its_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    tasks = load_tasks(PIKE / "tasks")
    folder = PIKE / "solutions" / "orig"
    matches = match_seed_files(folder, tasks)
    assert len(matches) == len(list(folder.glob("*.py")))
    numbered = [m for m in matches if m.task is not None]
    assert numbered and all(m.task.startswith(m.file.stem.removeprefix("task_") + "_") for m in numbered)  # type: ignore[union-attr]
    assert all("ModelNew" in m.source for m in numbered if not m.problem)
    assert main(["seed", "import", str(folder), str(PIKE / "tasks")]) == 0
    assert f"seed_kernels=[{folder}]" in capsys.readouterr().out


def test_a_run_starts_from_the_imported_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "exp").mkdir()
    for name in ("axpy.py", "axpy.seed.py"):
        shutil.copy(FIXTURES / "tasks" / name, tmp_path / "exp" / name)
    published = tmp_path / "exp" / "published"
    published.mkdir()
    # A PIKE-style file naming its kernel class Model.
    source = (FIXTURES / "tasks" / "axpy.seed.py").read_text().replace("class ModelNew", "class Model")
    (published / "axpy.py").write_text(source)
    (published / "task_7.py").write_text("x = 1\n")  # matches no task: ignored
    (tmp_path / "exp" / "e.yaml").write_text("name: s\ntasks: [axpy.py]\nseed_kernels: [published]\n")
    monkeypatch.chdir(tmp_path)
    config = load_config("exp/e.yaml", ["library=l.db", "budget.evaluations=2"])
    assert config.seed_kernels == [str(published)]
    summary = run_experiment(
        config, reporter=QuietReporter(), pool=InstantEvaluator(), mutators=[InstantMutator()]
    )
    lib = SolutionLibrary(tmp_path / "l.db")
    (seed,) = [sc for sc in lib.candidates(summary.run_id, "axpy", generation=0)]
    assert seed.candidate.operator == "seed_file" and seed.candidate.source == source + ALIAS

    (published / "axpy.py").write_text("def nothing():\n    pass\n")
    with pytest.raises(ExportError, match="cannot seed task axpy: defines neither ModelNew nor Model"):
        apply_seed_kernels(load_tasks(tmp_path / "exp" / "axpy.py"), [str(published)])
