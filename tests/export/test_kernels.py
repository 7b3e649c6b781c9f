"""`evokernel export`: standalone kernel files that `evokernel verify` accepts, and their manifest."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evokernel.cli import main
from evokernel.db import SolutionLibrary
from evokernel.exceptions import ExportError
from evokernel.export.kernels import export_kernels
from evokernel.types import source_hash
from tests.support.killed_run import KilledRun

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.slow
def test_export_verify_on_a_quickstart_like_cpu_run(
    killed_run: KilledRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library of the session's quickstart-like CPU run from the command line (axpy, pike_b,
    tune; tests/support/killed_run.py: SIGKILLed mid-run and resumed, so finished)."""
    db, out = killed_run.db, tmp_path / "kernels"
    assert (
        main(["export", "--library", str(db), "--out", str(out), "--top", "2", "--verify", "--device", "cpu"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "verified" in printed and "manifest:" in printed

    lib = SolutionLibrary(db)
    (run_id,) = [r.id for r in lib.list_runs()]
    best = lib.top(run_id, "axpy", 2)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [e["candidate_id"] for e in manifest] == [sc.candidate.id for sc in best]
    for entry, scored in zip(manifest, best, strict=True):
        kernel = out / entry["file"]
        body = kernel.read_text().split("\n", 3)[3]  # the three header lines, then the source as evaluated
        assert source_hash(body) == entry["candidate_hash"] == scored.candidate.source_hash
        assert entry["speedup_eager"] == pytest.approx(scored.speedup)
        assert entry["run_id"] == run_id and entry["profile"] == "strict" and entry["interpreter"] is True
        assert entry["standalone"] is True and "evokernel" not in body
        assert entry["verified"]["status"] == "correct", entry["verified"]
        assert entry["verified"]["speedup_eager"] > 0
        if entry["rank"] > 1:
            continue
        # The file verifies on its own too, in a process that has never seen the library.
        alone = subprocess.run(
            [
                sys.executable,
                "-m",
                "evokernel",
                "verify",
                str(out / entry["reference"]),
                str(kernel),
                "--json",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert alone.returncode == 0 and json.loads(alone.stdout)["status"] == "correct", alone.stdout
    assert (out / "axpy" / "axpy.seed.py").exists()  # the reference names it; load_task needs it


def test_export_errors_name_what_is_missing(tmp_path: Path) -> None:
    from evokernel.conformance import instant_task

    lib = SolutionLibrary(tmp_path / "l.db")
    run_id = lib.create_run("empty", {"budget": {"evaluations": 3}})
    lib.register_task(run_id, instant_task("alpha"))
    with pytest.raises(ExportError, match=f"no correct kernel to export in run {run_id}"):
        export_kernels(lib, None, tmp_path / "out")
    with pytest.raises(ExportError, match="has no task 'beta'; its tasks: alpha"):
        export_kernels(lib, run_id, tmp_path / "out", task="beta")
    with pytest.raises(ExportError, match="--top must be at least 1"):
        export_kernels(lib, run_id, tmp_path / "out", top=0)
    assert main(["export", "--library", str(tmp_path / "l.db")]) == 2  # neither --out nor --dataset


@pytest.mark.slow
def test_export_verify_says_what_it_verifies_and_verifies_each_kernel_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evokernel.export.verify import verify_export

    # A sweep's manifest: the same candidate is the best of two runs, a third run found another.
    folder = tmp_path / "axpy"
    folder.mkdir()
    shutil.copy(FIXTURES / "tasks" / "axpy.py", folder / "reference.py")
    shutil.copy(FIXTURES / "tasks" / "axpy.seed.py", folder / "axpy.seed.py")
    seed = (FIXTURES / "tasks" / "axpy.seed.py").read_text()
    other = seed.replace("BLOCK=64", "BLOCK=128")
    entries = []
    for run, source in (("r1", seed), ("r2", seed), ("r3", other)):
        (folder / f"{run}_rank1.py").write_text(source)
        entries.append(
            {
                "task": "axpy",
                "file": f"axpy/{run}_rank1.py",
                "reference": "axpy/reference.py",
                "candidate_hash": source_hash(source),
                "speedup_eager": 0.5,
            }
        )
    (tmp_path / "manifest.json").write_text(json.dumps(entries))

    verified = verify_export(tmp_path, "cpu", say=print)
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("verifying ")] == [
        "verifying 1/2: axpy/r1_rank1.py ...",
        "verifying 2/2: axpy/r3_rank1.py ...",
    ]
    assert "  axpy/r2_rank1.py: the same kernel as axpy/r1_rank1.py, not verified again" in lines
    assert [e["verified"]["status"] for e in verified] == ["correct"] * 3
    assert verified[1]["verified"]["same_kernel_as"] == "axpy/r1_rank1.py"
    assert verified[1]["verified"]["speedup_eager"] == verified[0]["verified"]["speedup_eager"]
    assert json.loads((tmp_path / "manifest.json").read_text()) == verified
