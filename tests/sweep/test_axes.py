"""Sweep axes and cell planning: expansion, and the errors that come before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from evokernel.config.schema import SweepConfig
from evokernel.exceptions import ConfigError
from evokernel.sweep.axes import Axis, expand, merge_axes, split_command_line, split_values
from evokernel.sweep.plan import plan_cells

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_values_split_on_top_level_commas_only() -> None:
    assert split_values("0,1, 2") == ["0", "1", "2"]
    assert split_values("[a,b],[c]") == ["[a,b]", "[c]"]
    assert split_values("'x,y',z") == ["'x,y'", "z"]
    plain, axes = split_command_line(["budget.evaluations=4", "seed=0,1", "tasks=[a.py,b.py]"])
    assert plain == ["budget.evaluations=4", "tasks=[a.py,b.py]"]
    assert axes == [Axis("seed", ("0", "1"))]


def test_grid_times_zip_in_order() -> None:
    grid = [Axis("strategy.name", ("pike_b", "greedy")), Axis("seed", ("0", "1"))]
    zipped = [Axis("mutators.llm.model", ("a", "b")), Axis("mutators.llm.temperature", ("0.2", "0.9"))]
    cells = expand(grid, zipped)
    assert len(cells) == 8
    assert cells[0] == {
        "strategy.name": "pike_b",
        "seed": "0",
        "mutators.llm.model": "a",
        "mutators.llm.temperature": "0.2",
    }
    assert [(c["strategy.name"], c["seed"]) for c in cells[::2]] == [
        ("pike_b", "0"),
        ("pike_b", "1"),
        ("greedy", "0"),
        ("greedy", "1"),
    ]
    assert {(c["mutators.llm.model"], c["mutators.llm.temperature"]) for c in cells} == {
        ("a", "0.2"),
        ("b", "0.9"),
    }


def test_command_line_axis_replaces_the_configs() -> None:
    section = SweepConfig(grid={"seed": [0, 1, 2], "strategy.name": ["greedy"]})
    grid, zipped = merge_axes(section, [Axis("seed", ("5", "6"))])
    assert grid == [Axis("strategy.name", ("greedy",)), Axis("seed", ("5", "6"))] and zipped == []


@pytest.mark.parametrize(
    ("grid", "zipped", "message"),
    [
        ([], [], "no sweep axes"),
        ([Axis("seed", ())], [], "sweep axis 'seed' is empty"),
        ([Axis("seed", ("0", ""))], [], "sweep axis 'seed' has an empty value"),
        ([Axis("library", ("a.db", "b.db"))], [], "sweep axis 'library' cannot vary"),
        ([Axis("evaluation.seeds", ("2", "3"))], [], "one evaluator pool"),
        ([], [Axis("a", ("1", "2")), Axis("b", ("1",))], "one common length"),
    ],
)
def test_bad_axes_are_named(grid: list[Axis], zipped: list[Axis], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        expand(grid, zipped)


def _config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\ntasks: [{FIXTURES / 'tasks' / 'axpy.py'}]\nlibrary: {tmp_path / 'l.db'}\n{extra}"
    )
    return path


def test_unknown_axis_key_names_it_and_the_valid_keys(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"sweep axis 'budget\.evalutions'.*valid keys under budget: evaluations"
    ):
        plan_cells(_config(tmp_path), ["budget.evalutions=1,2"])
    with pytest.raises(ConfigError, match=r"sweep axis 'seed' \(value 'x'\)"):
        plan_cells(_config(tmp_path), ["seed=0,x"])
    with pytest.raises(ConfigError, match=r"sweep cell strategy\.name=greedy: unknown strategy\.params"):
        plan_cells(_config(tmp_path, "strategy: {params: {branches: 2}}\n"), ["strategy.name=pike_b,greedy"])
    with pytest.raises(ConfigError, match="sweep axis 'seed' is empty"):
        plan_cells(_config(tmp_path, "sweep: {grid: {seed: []}}\n"), [])


def test_yaml_section_and_command_line_make_cells(tmp_path: Path) -> None:
    config = _config(tmp_path, "sweep: {grid: {seed: [0, 1]}, zip: {budget.evaluations: [2, 3]}}\n")
    cells = plan_cells(config, ["strategy.name=greedy,random", "budget.max_failed_mutations=5"])
    assert len(cells) == 8
    first = cells[0].config
    assert first.seed == 0 and first.budget.evaluations == 2 and first.strategy.name == "greedy"
    assert first.budget.max_failed_mutations == 5
    assert first.sweep.point == {"seed": 0, "strategy.name": "greedy", "budget.evaluations": 2}
    assert cells[-1].config.sweep.point == {"seed": 1, "strategy.name": "random", "budget.evaluations": 3}
