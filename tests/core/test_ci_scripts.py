"""What ``.ci/run`` does, run for real with stand-in programs on PATH (issue 38): it installs into a
virtual environment of its own, never into whatever ``python`` comes first, runs the checks with
that environment's tools, and its drift report skips the test run when constraints.txt is fresh
instead of running the whole suite a second time."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# One stand-in for every program the scripts call: it logs how it was called; `-m venv DIR` makes
# DIR/bin with stand-ins for the venv's python, ruff and mypy; a pip `--report FILE` dry run writes
# the report of a resolution that installs nothing newer.
STUB = """#!/bin/bash
echo "$0 $*" >> "$STUB_LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  d="${@: -1}"; mkdir -p "$d/bin"
  for tool in python ruff mypy; do cp "$STUB_SELF" "$d/bin/$tool"; done
  exit 0
fi
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[$i]}" = "--report" ]; then echo '{"install": []}' > "${args[$((i + 1))]}"; fi
done
exit 0
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ci_installs_into_its_own_venv_and_skips_the_drift_run_when_fresh(tmp_path: Path) -> None:
    stubs, venv, log = tmp_path / "bin", tmp_path / "ci-venv", tmp_path / "calls.log"
    stubs.mkdir()
    stub = stubs / "stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    # The system's python and python3, and the system tools .ci/run looks for (so nothing is apt-installed).
    for name in ("python", "python3", "pg_ctl", "chromium", "apt-get", "pytest", "ruff", "mypy"):
        shutil.copy(stub, stubs / name)
    env = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "STUB_LOG": str(log),
        "STUB_SELF": str(stub),
        "EVOKERNEL_CI_VENV": str(venv),
        "HOME": str(tmp_path),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
    }
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [line.rstrip() for line in log.read_text().splitlines()]
    pip_installs = [c for c in calls if " -m pip install" in c]
    # Every install goes to a venv's python (CI's own, or the drift report's throwaway one) ...
    assert pip_installs and not [c for c in pip_installs if c.startswith(str(stubs))], pip_installs
    # ... and the project's locked install to CI's own.
    (locked,) = [c for c in pip_installs if "-c constraints.txt" in c]
    assert locked.startswith(f"{venv}/bin/python -m pip install"), locked
    # The README's test command, in the venv: the suite on two workers, then the serial tests alone.
    assert f"{venv}/bin/python -m pytest -q -n 2 --dist loadfile -m not serial" in calls
    assert f"{venv}/bin/python -m pytest -q -m serial" in calls
    assert f"{venv}/bin/ruff check ." in calls and f"{venv}/bin/mypy" in calls
    assert not any(c.startswith(f"{stubs}/python ") for c in calls)  # the system python: never
    assert "constraints.txt is fresh" in done.stdout
    # pytest ran the locked suite's two parts; the fresh drift report ran none.
    assert sum(" -m pytest" in c for c in calls) == 2
