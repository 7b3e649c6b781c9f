"""The KernelBench-style check beside the verdicts (experiments/bench/kb_check.py, issue 34) on a
tiny CPU task whose answers are known: a right kernel passes it (so a refusal of it is evokernel's
own), a kernel that replays its first output fails from the second input on, and a kernel that
raises fails with the exception's line; its last line is one JSON object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "bench" / "kb_check.py"

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return x * self.w


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""

FORWARDS = {
    "right": "return x * self.w",
    "replays": "self.out = getattr(self, 'out', None)\n        if self.out is None:\n"
    "            self.out = x * self.w\n        return self.out",
    "raises": "raise RuntimeError('illegal memory access (pretend)')",
}


def solution(forward: str) -> str:
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.randn(8))\n\n"
        f"    def forward(self, x):\n        {forward}\n"
    )


def test_the_check_passes_a_right_kernel_and_fails_a_replaying_or_raising_one(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "1_Scale.py").write_text(TASK)
    verdicts = []
    for name, forward in FORWARDS.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "task_1.py").write_text(solution(forward))
        reason = "rejected: rule monkey-patch (pretend)" if name == "right" else "wrong output"
        verdicts.append(
            {"profile": "strict", "solution": f"{name}/task_1.py", "status": "incorrect", "stage": "x"}
            | {"reason": reason}
        )
    stream = tmp_path / "verdicts.jsonl"
    stream.write_text("\n".join(json.dumps(v) for v in verdicts))
    command = [sys.executable, str(SCRIPT), "--tasks", str(tmp_path / "tasks"), "--device", "cpu"]
    command += ["--solutions", *(str(tmp_path / n) for n in FORWARDS), "--verdicts", str(stream)]
    command += ["--jobs", "3"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True, cwd=ROOT)
    lines = done.stdout.strip().splitlines()
    summary = json.loads(lines[-1])["profiles"]["strict"]
    assert summary["checked"] == 3 and summary["check_fails_too"] == 2, lines
    assert summary["check_passes"] == {"monkey-patch": 1}
    table = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}
    assert "passes" in table["right/task_1.py"]
    assert "fails (out of tolerance)" in table["replays/task_1.py"]
    assert "illegal memory access (pretend)" in table["raises/task_1.py"]


BN_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn(x * 3.0)


def get_inputs():
    return [torch.randn(16, 8)]


def get_init_inputs():
    return []
"""

FOLDED = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        scale = self.bn.weight / torch.sqrt(self.bn.running_var + self.bn.eps)
        return (x * 3.0 - self.bn.running_mean) * scale + self.bn.bias
"""


def test_each_profile_is_checked_in_the_mode_its_field_calls_models_in(tmp_path: Path) -> None:
    """A BatchNorm folded with its running statistics: right in eval mode (PIKE's evaluator, so
    the kernelbench-v0 table), wrong in training mode (KernelBench's, so the kernelbench table)."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "1_Norm.py").write_text(BN_TASK)
    (tmp_path / "folded").mkdir()
    (tmp_path / "folded" / "task_1.py").write_text(FOLDED)
    rows = [
        {"profile": p, "solution": "folded/task_1.py", "status": "incorrect", "stage": "x", "reason": ""}
        for p in ("kernelbench", "kernelbench-v0")
    ]
    stream = tmp_path / "verdicts.jsonl"
    stream.write_text("\n".join(json.dumps(r) for r in rows))
    command = [sys.executable, str(SCRIPT), "--tasks", str(tmp_path / "tasks"), "--device", "cpu"]
    command += ["--solutions", str(tmp_path / "folded"), "--verdicts", str(stream), "--jobs", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True, cwd=ROOT)
    profiles = json.loads(done.stdout.strip().splitlines()[-1])["profiles"]
    assert profiles["kernelbench"]["mode"] == "training" and profiles["kernelbench"]["check_fails_too"] == 1
    assert profiles["kernelbench-v0"]["mode"] == "eval" and profiles["kernelbench-v0"]["check_passes"] == {
        "incorrect/x": 1
    }


def test_earlier_checks_are_reused_and_a_later_stream_replaces_a_verdict(tmp_path: Path) -> None:
    """A profile re-run refuses one kernel more: ``--checked`` keeps the earlier check (it is not
    run again: its recorded error stands), the later stream's verdict replaces the earlier one's,
    and ``--no-run`` names the kernel no check covers instead of running it."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "1_Scale.py").write_text(TASK)
    for name in ("old", "new"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "task_1.py").write_text(solution(FORWARDS["right"]))
    row = {"profile": "kernelbench", "stage": "x", "reason": ""}
    first = tmp_path / "verdicts_a.jsonl"
    first.write_text(
        "\n".join(
            json.dumps(row | r)
            for r in (
                {"solution": "old/task_1.py", "status": "incorrect"},
                {"solution": "new/task_1.py", "status": "correct"},
            )
        )
    )
    second = tmp_path / "verdicts_b.jsonl"
    second.write_text(json.dumps(row | {"solution": "new/task_1.py", "status": "incorrect"}))
    checked = tmp_path / "kb.jsonl"
    recorded = {"kb_correct": False, "error": "recorded earlier"}
    checked.write_text(
        json.dumps({"solution": "old/task_1.py", "modes": {"eval": recorded, "train": recorded}})
    )
    command = [sys.executable, str(SCRIPT), "--tasks", str(tmp_path / "tasks"), "--device", "cpu"]
    command += ["--solutions", str(tmp_path / "old"), str(tmp_path / "new"), "--jobs", "1"]
    command += ["--verdicts", str(first), str(second), "--checked", str(checked)]
    done = subprocess.run(
        [*command, "--no-run"], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "not checked (1): new/task_1.py", lines
    assert json.loads(lines[-1])["profiles"]["kernelbench"]["checked"] == 1
    assert any("old/task_1.py" in line and "recorded earlier" in line for line in lines)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True, cwd=ROOT)
    summary = json.loads(done.stdout.strip().splitlines()[-1])["profiles"]["kernelbench"]
    assert summary["checked"] == 2 and summary["check_fails_too"] == 1, summary
    assert summary["check_passes"] == {"incorrect/x": 1}
