"""The command line, as a user types it (subprocesses, real files)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def evokernel(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evokernel", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def test_unknown_config_key_is_a_clear_error_and_starts_nothing(tmp_path: Path) -> None:
    out = evokernel(
        "run",
        str(ROOT / "experiments/quickstart.yaml"),
        "budget.evaluatons=3",
        f"library={tmp_path / 'x.db'}",
    )
    assert out.returncode == 2
    assert "budget.evaluatons" in out.stderr and "evaluations" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "x.db").exists()


def test_broken_task_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    out = evokernel("tasks", "list", str(bad))
    assert out.returncode == 2
    assert "broken.py" in out.stderr and "get_inputs" in out.stderr


def test_tasks_list_shows_the_bundled_suite() -> None:
    out = evokernel("tasks", "list", str(ROOT / "experiments/tasks"))
    assert out.returncode == 0
    assert "softmax" in out.stdout and "matmul_fp16" in out.stdout


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    # `evokernel tasks list ... | head -2`: the reader closes the pipe before the command writes
    # (here before it has even imported its modules), so every write meets a broken pipe.
    proc = subprocess.Popen(
        [sys.executable, "-m", "evokernel", "tasks", "list", str(ROOT / "experiments/tasks")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert stderr == ""


def test_db_upgrade_creates_the_schema_and_runs_lists_nothing(tmp_path: Path) -> None:
    db = tmp_path / "lib.db"
    out = evokernel("db", "upgrade", "--library", str(db))
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    assert {"runs", "candidates", "evaluations", "llm_calls", "baselines", "run_events"} <= tables
    assert evokernel("runs", "--library", str(db)).stdout.strip() == "no runs"


def test_resume_of_an_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    out = evokernel(
        "run",
        str(ROOT / "experiments/quickstart.yaml"),
        f"library={tmp_path / 'x.db'}",
        "--resume",
        "nosuchrun",
    )
    assert out.returncode == 2 and "nosuchrun" in out.stderr


@pytest.mark.slow
def test_quickstart_config_runs_as_the_readme_says(tmp_path: Path) -> None:
    """The README's run command on the shipped config (budget cut to 2 per task for CI time)."""
    out = evokernel(
        "run",
        str(ROOT / "experiments/quickstart.yaml"),
        "budget.evaluations=2",
        "evaluation.timing.max_ms=50",
        cwd=tmp_path,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("task") and "speedup vs eager" in line for line in lines)
    for task in ("softmax", "rmsnorm", "matmul_fp16"):
        assert any(line.startswith(task) and "correct" in line for line in lines), out.stdout
    assert (tmp_path / "evokernel.db").exists()
    runs = evokernel("runs", cwd=tmp_path)
    assert "quickstart" in runs.stdout and "finished" in runs.stdout
