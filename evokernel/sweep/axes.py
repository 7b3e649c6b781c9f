"""Sweep axes: from the command line (``key=v1,v2``) and the config's ``sweep:`` section, to cells.

Grid axes multiply (every combination is a cell, the first axis varying slowest, as Hydra's
multirun does); zipped axes step together and multiply the grid as one axis. Values stay strings
in ``key=value`` form, so a cell is the same overrides a user would type for one run."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import yaml

from evokernel.config.schema import SweepConfig
from evokernel.exceptions import ConfigError

# Keys that would change the one evaluator pool (or library) the cells share.
SHARED_PREFIXES = ("library", "evaluation", "ray", "sweep")


@dataclass(frozen=True)
class Axis:
    key: str
    values: tuple[str, ...]


def override_value(value: Any) -> str:
    """A YAML value as the right-hand side of ``key=value`` (JSON is YAML's flow style)."""
    return value if isinstance(value, str) else json.dumps(value)


def typed(value: str) -> Any:
    """``"0"`` -> 0, ``"pike_b"`` -> "pike_b": how the override will be read, for tables."""
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value


def split_values(text: str) -> list[str]:
    """Split on commas outside brackets and quotes: ``tasks=[a,b],[c]`` is two values."""
    values: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            values.append("".join(current))
            current = []
            continue
        current.append(ch)
    values.append("".join(current))
    return [v.strip() for v in values]


def split_command_line(items: list[str]) -> tuple[list[str], list[Axis]]:
    """(plain overrides, axes): an item with a top-level comma in its value is an axis."""
    plain, axes = [], []
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value (an axis is key=v1,v2)")
        key, text = (part.strip() for part in item.split("=", 1))
        values = split_values(text)
        if len(values) == 1:
            plain.append(f"{key}={text}")
        else:
            axes.append(Axis(key, tuple(values)))
    return plain, axes


def section_axes(section: SweepConfig) -> tuple[list[Axis], list[Axis]]:
    grid = [Axis(k, tuple(override_value(v) for v in vs)) for k, vs in section.grid.items()]
    zipped = [Axis(k, tuple(override_value(v) for v in vs)) for k, vs in section.zip.items()]
    return grid, zipped


def check_axes(grid: list[Axis], zipped: list[Axis]) -> None:
    """Errors before anything starts: empty axes or values, repeated keys, shared keys, ragged zips."""
    if not grid and not zipped:
        raise ConfigError(
            "no sweep axes: give key=v1,v2 on the command line (e.g. seed=0,1) or a sweep: section "
            "with grid: or zip:"
        )
    seen: set[str] = set()
    for axis in [*grid, *zipped]:
        if axis.key in seen:
            raise ConfigError(f"sweep axis '{axis.key}' is given twice")
        seen.add(axis.key)
        if not axis.values:
            raise ConfigError(f"sweep axis '{axis.key}' is empty: give it at least one value")
        if any(v == "" for v in axis.values):
            raise ConfigError(f"sweep axis '{axis.key}' has an empty value: {','.join(axis.values)!r}")
        if axis.key.split(".")[0] in SHARED_PREFIXES:
            raise ConfigError(
                f"sweep axis '{axis.key}' cannot vary: the cells share one library and one evaluator "
                f"pool (keys under {', '.join(SHARED_PREFIXES)} are the same for every cell)"
            )
    lengths = {a.key: len(a.values) for a in zipped}
    if len(set(lengths.values())) > 1:
        raise ConfigError(f"zipped sweep axes need one common length, got {lengths}")


def expand(grid: list[Axis], zipped: list[Axis]) -> list[dict[str, str]]:
    """Every cell as key -> value (override strings), grid axes first in the order given."""
    check_axes(grid, zipped)
    grid_points = itertools.product(*(a.values for a in grid)) if grid else iter([()])
    zip_points = list(zip(*(a.values for a in zipped), strict=True)) if zipped else [()]
    cells = []
    for g in grid_points:
        for z in zip_points:
            point = dict(zip((a.key for a in grid), g, strict=True))
            point.update(zip((a.key for a in zipped), z, strict=True))
            cells.append(point)
    return cells


def merge_axes(section: SweepConfig, command_line: list[Axis]) -> tuple[list[Axis], list[Axis]]:
    """The config's axes with the command line's on top (a command-line axis replaces the config's
    axis of the same key, grid or zip)."""
    grid, zipped = section_axes(section)
    given = {a.key for a in command_line}
    grid = [a for a in grid if a.key not in given] + command_line
    zipped = [a for a in zipped if a.key not in given]
    return grid, zipped
