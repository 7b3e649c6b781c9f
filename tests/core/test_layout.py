"""The core's layout (issue 22): no import cycle among evokernel's modules, no product module
importing the tests tree, and docs/architecture.md's picture drawn from the real stage graph."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.imports import ROOT, cycles, imports_of_tests, module_graph, product_modules, stage_graph

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def test_no_import_cycle_among_evokernel_modules() -> None:
    graph = module_graph()
    assert len(graph) > 50  # the reader found the modules (a wrong root would find none)
    assert cycles(graph) == []


def test_the_cycle_check_catches_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_product_module_imports_test_support() -> None:
    offenders = {
        name: sorted(found) for name, path in product_modules().items() if (found := imports_of_tests(path))
    }
    assert offenders == {}


def _drawn_edges() -> set[tuple[str, str]]:
    """Arrows of the mermaid picture: ``a --> b`` means a imports b."""
    text = ARCHITECTURE.read_text()
    block = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no mermaid picture"
    return set(re.findall(r"^\s*(\w+)\s*-->\s*(\w+)\s*$", block.group(1), re.M))


def test_architecture_picture_matches_the_stage_graph() -> None:
    stages = stage_graph(module_graph())
    # types and exceptions are imported by every stage and import nothing of evokernel: the
    # picture leaves their arrows out (and says so); the checks below hold them to that.
    base = {"types", "exceptions"}
    assert stages["types"] == set() and stages["exceptions"] == set()
    real = {
        (a, b)
        for a, targets in stages.items()
        for b in targets
        if a not in ("_moved", "__main__") and b not in base
    }
    drawn = _drawn_edges()
    assert drawn == real, (
        f"drawn but not imported: {sorted(drawn - real)}; imported but not drawn: {sorted(real - drawn)}"
    )
    # No stage-level circle either (the two that came with issue 19's sweep/report work are gone).
    assert cycles({a: set(b) for a, b in stages.items()}) == []


def test_every_stage_subpackage_says_what_enters_and_leaves() -> None:
    stages = ("config", "run", "pool", "conformance")
    for name in stages:
        doc = (ROOT / "evokernel" / name / "__init__.py").read_text()
        assert "Enters:" in doc and "Leaves:" in doc, name
    text = ARCHITECTURE.read_text()
    for name in (*stages, "tasks", "strategies", "islands", "mutators", "evaluation", "db"):
        assert f"**`evokernel.{name}`**" in text, f"docs/architecture.md has no paragraph on {name}"


def test_public_api_and_the_runner_docstring_example() -> None:
    import evokernel

    code = "from evokernel import load_config, run_experiment, check_strategy, RunView, Strategy"
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for name in evokernel.__all__:
        assert getattr(evokernel, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = evokernel.nope


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("evokernel.runner", "evokernel.run.runner", "run_experiment"),
        ("evokernel.config_schema", "evokernel.config.schema", "ExperimentConfig"),
        ("evokernel.testing", "evokernel.conformance", "check_strategy"),
        ("evokernel.registry", "evokernel.plugins", "resolve"),
        ("evokernel.view", "evokernel.strategies.view", "RunView"),
        ("evokernel.mutators.hardware", "evokernel.pool.hardware", "format_hardware"),
    ],
)
def test_old_import_paths_still_work_with_a_deprecation_warning(old: str, new: str, name: str) -> None:
    code = f"import warnings; warnings.simplefilter('error'); from {old} import {name}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "DeprecationWarning" in out.stderr and new in out.stderr
    code = f"import {old} as o, {new} as n; assert o.{name} is n.{name}; assert o is n"
    out = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", code], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert not (ROOT / (old.replace(".", "/") + ".py")).exists()  # no stub file where the old one was
