"""A checkout stays clean when the README is followed (issue 38): what its commands write is
ignored by git, and no run's leftovers (a process id file) are committed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The options of README commands that name a file or folder the command writes.
WRITES = re.compile(r"(?:--html|--png|--out|--dataset)\s+(\S+)|\blibrary=(\S+)|^library:\s*(\S+)", re.M)


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def checkout() -> None:
    if shutil.which("git") is None or _git("rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
        pytest.skip("not a git checkout (an installed copy)")


def _readme_outputs() -> set[str]:
    text = (ROOT / "README.md").read_text()
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line)
    blocks = "\n".join(lines)
    found = {next(g for g in m.groups() if g) for m in WRITES.finditer(blocks)}
    found |= {
        m.group(1)
        for m in re.finditer(r"^library: (\S+)", (ROOT / "experiments/sweep.yaml").read_text(), re.M)
    }
    return {f for f in found if "://" not in f and not f.startswith(("URL", "<"))}


def test_what_the_readme_commands_write_is_ignored(checkout: None) -> None:
    outputs = _readme_outputs()
    assert {"sweep.db", "runs/best/", "runs/candidates.jsonl"} <= outputs, outputs  # the parser finds them
    for name in sorted(outputs | {"evokernel.db", "report.html", "plots/", "best/", "candidates.jsonl"}):
        # check-ignore answers for a path whether or not it exists; --no-index: tracked files too
        assert _git("check-ignore", "-q", "--no-index", name).returncode == 0, f"{name} is not ignored"


def test_no_pid_files_are_committed(checkout: None) -> None:
    assert _git("ls-files", "*.pid").stdout.split() == []
