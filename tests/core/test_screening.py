"""Task screening: degenerate tasks are flagged with a reason; every bundled task passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evokernel.evaluation.screening import screen_task
from evokernel.tasks import load_task, load_tasks

ROOT = Path(__file__).resolve().parents[2]

TEMPLATE = """
import torch
import torch.nn as nn

n = 256


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(n))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return {expr}


def get_inputs() -> list:
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs() -> list:
    return []
"""


def write_task(tmp_path: Path, name: str, expr: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(TEMPLATE.format(expr=expr))
    return path


@pytest.mark.parametrize(
    ("expr", "rule"),
    [
        ("(x + y) * 1e-6", "zero-output"),
        ("torch.ones_like(x) + 1e-7 * x", "constant-output"),
        ("x * self.w + 1e-9 * y", "input-independent"),
        ("x + y", "weight-independent"),
        ("torch.zeros_like(x) + self.w", "seed-independent"),
        ("x / torch.zeros_like(y)", "nan-output"),
    ],
)
def test_degenerate_task_is_flagged(tmp_path: Path, expr: str, rule: str) -> None:
    flags = screen_task(load_task(write_task(tmp_path, "degenerate", expr)), scale="full")
    assert rule in {f.rule for f in flags}, flags
    assert all(f.task == "degenerate" and f.detail for f in flags)


def test_a_sound_task_passes(tmp_path: Path) -> None:
    assert screen_task(load_task(write_task(tmp_path, "sound", "x * self.w + y")), scale="full") == []


def test_every_bundled_task_passes_the_screen() -> None:
    flags = [f for t in load_tasks(ROOT / "experiments" / "tasks") for f in screen_task(t)]
    assert flags == [], "\n".join(f.describe() for f in flags)


def test_tasks_check_command_exits_nonzero_naming_the_task(tmp_path: Path) -> None:
    write_task(tmp_path, "tiny_output", "(x + y) * 1e-6")
    write_task(tmp_path, "fine", "x * self.w + y")
    out = subprocess.run(
        [sys.executable, "-m", "evokernel", "tasks", "check", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert "tiny_output" in out.stdout and "zero-output" in out.stdout and "fine" not in out.stdout
    ok = subprocess.run(
        [sys.executable, "-m", "evokernel", "tasks", "check", str(ROOT / "experiments" / "tasks")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
