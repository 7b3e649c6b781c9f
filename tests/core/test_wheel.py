"""The package as a user installs it: a wheel built from the tree, installed into a fresh virtual
environment, runs the quickstart from outside the checkout (issue 38).

Kept cheap for CI's two cores: the wheel is built without build isolation, the fresh venv borrows
the test environment's third-party packages through a path entry (a ``.pth`` line adds the
folder to ``sys.path`` but runs none of its ``.pth`` files, so the checkout's editable install of
evokernel stays invisible) and evokernel itself comes only from the wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The folders the wheel is built from (pyproject's package-dir), and what the build reads besides.
PACKAGE_DIRS = {
    "evokernel": "evokernel",
    "strategies": "evokernel/strategies",
    "islands": "evokernel/islands",
    "mutators": "evokernel/mutators",
    "db": "evokernel/db",
}
BUILD_FILES = ("pyproject.toml", "README.md")


def _source_copy(dest: Path) -> None:
    """The files the wheel is made of, without caches (what a fresh clone would hold)."""
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for top in PACKAGE_DIRS:
        shutil.copytree(ROOT / top, dest / top, ignore=junk)
    for name in BUILD_FILES:
        shutil.copy(ROOT / name, dest / name)


def _data_files() -> set[str]:
    """Every non-Python file of the package folders, as the wheel must name it."""
    out = set()
    for top, installed in PACKAGE_DIRS.items():
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts:
                rel = path.relative_to(ROOT / top)
                if top == "evokernel" and rel.parts[0] in PACKAGE_DIRS:
                    continue
                out.add(f"{installed}/{rel.as_posix()}")
    return out


@pytest.mark.slow
def test_a_wheel_in_a_fresh_venv_holds_its_data_and_runs_the_quickstart(tmp_path: Path) -> None:
    src, wheels, venv, work = (tmp_path / d for d in ("src", "wheels", "venv", "work"))
    _source_copy(src)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",  # setuptools' warnings are shown only with it
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    # setuptools printed one "Package would be ignored" banner per undeclared data folder.
    assert "would be ignored" not in build.stdout + build.stderr
    (wheel,) = wheels.glob("evokernel-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert _data_files() <= names, sorted(_data_files() - names)

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]

    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    data = [
        ("evokernel.mutators", "prompts/mutate.md"),
        ("evokernel.dashboard", "templates/sweep.html"),
        ("evokernel.report", "templates/report.html.j2"),
    ]
    code = (
        "import evokernel.dashboard.app; from importlib.resources import files; print(evokernel.__file__);"
        f"print(all(files(p).joinpath(f).is_file() for p, f in {data!r}))"
    )
    where = subprocess.run(
        [str(python), "-c", code], cwd=work, capture_output=True, text=True, env=env, timeout=120
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.split() == [str(site / "evokernel" / "__init__.py"), "True"]

    run = subprocess.run(
        [
            str(venv / "bin" / "evokernel"),
            "run",
            str(ROOT / "experiments" / "quickstart.yaml"),
            "tasks=[tasks/level1/softmax.py]",
            "budget.evaluations=2",
            f"library={work / 'q.db'}",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "softmax" in run.stdout and "finished in" in run.stdout
