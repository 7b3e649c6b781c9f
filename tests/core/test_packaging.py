"""The design card's layout: plug-in folders install inside evokernel.*, and all are listed."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIRS = {
    "strategies": "evokernel.strategies",
    "islands": "evokernel.islands",
    "mutators": "evokernel.mutators",
    "db": "evokernel.db",
}


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    conf = _setuptools()
    listed = set(conf["packages"])
    dirs = {"evokernel": "evokernel", **PLUGIN_DIRS}
    found = set()
    for top, package in dirs.items():
        assert conf["package-dir"][package] == top
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top)
            found.add(".".join([package, *rel.parts]))
    assert found == listed, f"unlisted: {found - listed}, listed but missing: {listed - found}"


def test_plugin_packages_import_from_their_folders_and_no_top_level_names() -> None:
    for folder, package in PLUGIN_DIRS.items():
        module = importlib.import_module(package)
        assert Path(module.__file__ or "").parent == ROOT / folder
    for name in PLUGIN_DIRS:
        out = subprocess.run([sys.executable, "-c", f"import {name}"], cwd="/", capture_output=True)
        assert out.returncode != 0, f"a top-level package {name!r} is installed"


def test_importing_evokernel_does_not_import_litellm_or_ray() -> None:
    code = (
        "import sys, evokernel, evokernel.db, evokernel.strategies.pike_b, evokernel.mutators.tune;"
        "print(sorted(m for m in ('litellm', 'ray') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_console_script_and_module_entry_point() -> None:
    for cmd in (["evokernel", "--help"], [sys.executable, "-m", "evokernel", "--help"]):
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0 and "run" in out.stdout
