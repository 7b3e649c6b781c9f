"""A sweep's cells as configs: expand the axes, check every cell loads, and store or match them.

Each cell is a run whose stored config carries ``sweep.id``, ``sweep.cell`` and ``sweep.point``
(:mod:`evokernel.analysis.runs` groups runs by them), so the library alone knows a sweep."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from evokernel.config.loading import load_config, to_dict
from evokernel.config.schema import ExperimentConfig
from evokernel.db import SolutionLibrary
from evokernel.exceptions import ConfigError, EvoKernelError
from evokernel.sweep.axes import Axis, expand, merge_axes, split_command_line, typed
from evokernel.tasks import load_tasks


@dataclass(frozen=True)
class Cell:
    index: int
    point: dict[str, str]
    config: ExperimentConfig
    overrides: tuple[str, ...]

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.point.items())


def plan_cells(config_path: str | Path, items: list[str]) -> list[Cell]:
    """Load the config once per cell (base overrides, then the cell's axis values), so an unknown
    axis key or a bad value fails here, naming the axis, before any run starts."""
    plain, axes = split_command_line(items)
    base = load_config(config_path, plain)
    grid, zipped = merge_axes(base.sweep, axes)
    points = expand(grid, zipped)
    for axis in [*grid, *zipped]:
        _check_axis(config_path, plain, axis)
    cells = []
    for index, point in enumerate(points):
        overrides = (*plain, *(f"{k}={v}" for k, v in point.items()))
        config = load_config(config_path, overrides)
        _check_strategy(config, point)
        config.sweep.grid = {a.key: [typed(v) for v in a.values] for a in grid}
        config.sweep.zip = {a.key: [typed(v) for v in a.values] for a in zipped}
        config.sweep.name = base.sweep.name or base.name
        config.sweep.cell = index
        config.sweep.point = {k: typed(v) for k, v in point.items()}
        cells.append(Cell(index, point, config, overrides))
    return cells


def _check_axis(config_path: str | Path, plain: list[str], axis: Axis) -> None:
    for value in axis.values:
        try:
            load_config(config_path, [*plain, f"{axis.key}={value}"])
        except ConfigError as exc:
            raise ConfigError(f"sweep axis '{axis.key}' (value {value!r}): {exc}") from exc


def _check_strategy(config: ExperimentConfig, point: dict[str, str]) -> None:
    """A strategy axis with params another strategy lacks would fail only when that cell starts."""
    from evokernel.plugins import resolve

    try:
        resolve("strategies", config.strategy.name).from_params(dict(config.strategy.params))
    except EvoKernelError as exc:
        where = " ".join(f"{k}={v}" for k, v in point.items())
        raise ConfigError(f"sweep cell {where}: {exc}") from exc


def new_sweep_id() -> str:
    return "sw" + uuid.uuid4().hex[:10]


def create_cells(
    library: SolutionLibrary, sweep_id: str, cells: list[Cell], have: set[int]
) -> dict[int, str]:
    """Create the runs of the cells not in ``have`` as ``pending`` runs (tasks registered), so a
    sweep killed before a cell started still lists it; returns cell index -> run id."""
    created = {}
    for cell in cells:
        if cell.index in have:
            continue
        cell.config.sweep.id = sweep_id
        stored = to_dict(cell.config)
        run_id = library.create_run(cell.config.name, stored, cell.config.seed)
        for position, task in enumerate(load_tasks(cell.config.tasks)):
            library.register_task(run_id, task, position)
        library.set_run_status(run_id, "pending")
        created[cell.index] = run_id
    return created


def check_same_sweep(sweep_id: str, cells: list[Cell], stored: dict[int, dict[str, object]]) -> None:
    """The command line given to ``--resume`` must describe the sweep that was started."""
    for cell in cells:
        was = stored.get(cell.index)
        now = {k: typed(v) for k, v in cell.point.items()}
        if was is not None and was != now:
            raise ConfigError(
                f"this command line gives a different sweep than {sweep_id}: cell {cell.index} was "
                f"{was}, now {now}; resume with the command line that started it, or without CONFIG"
            )
    extra = set(stored) - {c.index for c in cells}
    if extra:
        raise ConfigError(f"sweep {sweep_id} has cells {sorted(extra)} that this command line does not give")
