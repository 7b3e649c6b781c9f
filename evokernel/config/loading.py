"""Load an experiment config: YAML file + ``key=value`` overrides, checked against the schema.

An unknown key anywhere is a :class:`~evokernel.exceptions.ConfigError` naming the key and the
valid keys at that level; a value of the wrong type names the key and the expected type.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

from evokernel.config.schema import PROFILE_NAMES, ExperimentConfig
from evokernel.config.timing_config import CALL_STARTS
from evokernel.exceptions import ConfigError


def _valid_keys(full_key: str) -> tuple[str, list[str]]:
    """The parent path of ``full_key`` and the schema's field names there."""
    parts = full_key.split(".")
    node: Any = ExperimentConfig
    walked: list[str] = []
    for part in parts[:-1]:
        fields = {f.name: f for f in dataclasses.fields(node)} if dataclasses.is_dataclass(node) else {}
        if part not in fields:
            break
        default = fields[part].default_factory
        node = default() if callable(default) else None
        walked.append(part)
        if not dataclasses.is_dataclass(node):
            break
    names = [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else []
    return ".".join(walked) or "(top level)", names


def _key_error(exc: OmegaConfBaseException, origin: str) -> ConfigError:
    full_key = str(getattr(exc, "full_key", "") or "")
    if isinstance(exc, ConfigKeyError | ConfigAttributeError) and full_key:
        parent, names = _valid_keys(full_key)
        return ConfigError(
            f"unknown config key '{full_key}' in {origin}; valid keys under {parent}: {', '.join(names)}"
        )
    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    where = f"'{full_key}'" if full_key else "a value"
    return ConfigError(f"invalid {where} in {origin}: {first_line}")


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Schema defaults, then the YAML file, then the overrides; returns a checked config object."""
    merged: DictConfig = OmegaConf.structured(ExperimentConfig)
    base_dir = Path.cwd()
    if path is not None:
        file = Path(path)
        if not file.is_file():
            raise ConfigError(f"config file {file} does not exist")
        base_dir = file.resolve().parent
        try:
            loaded = OmegaConf.load(file)
        except yaml.YAMLError as exc:
            raise _yaml_error(exc, file) from exc
        try:
            _mutators_list_form(loaded, str(file))
            merged = OmegaConf.merge(merged, loaded)  # type: ignore[assignment]
        except OmegaConfBaseException as exc:
            raise _key_error(exc, str(file)) from exc
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value (e.g. budget.evaluations=32)")
    try:
        merged = OmegaConf.merge(merged, OmegaConf.from_dotlist(list(overrides)))  # type: ignore[assignment]
        config: ExperimentConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except (ValidationError, OmegaConfBaseException) as exc:
        raise _key_error(exc, "the command-line overrides" if overrides else str(path)) from exc
    config.tasks = [_resolve_task_path(t, base_dir, "task") for t in config.tasks]
    config.seed_kernels = [_resolve_task_path(t, base_dir, "seed_kernels") for t in config.seed_kernels]
    _check(config)
    return config


def _mutators_list_form(loaded: DictConfig | ListConfig, origin: str) -> None:
    """Turn ``mutators: [{name, params}, ...]`` into the schema's form, in place: a built-in's
    params become its section (``mutators.llm.*``) and its name goes to ``mutators.builtins`` (so
    the list says which built-ins run); any other name becomes a ``mutators.plugins`` entry."""
    if not isinstance(loaded, DictConfig) or not isinstance(loaded.get("mutators"), ListConfig):
        return
    from evokernel.plugins import builtins

    known = builtins("mutators")
    form: dict[str, Any] = {"builtins": [], "plugins": []}
    entries: list[Any] = OmegaConf.to_container(loaded.mutators)  # type: ignore[assignment]
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "name" not in entry or set(entry) - {"name", "params"}:
            raise ConfigError(
                f"mutators[{i}] in {origin} must be {{name: ..., params: {{...}}}}, not {entry!r}"
            )
        name, params = str(entry["name"]), entry.get("params") or {}
        if name in known:
            form["builtins"].append(name)
            form[name] = params
        else:
            form["plugins"].append({"name": name, "params": params})
    loaded.mutators = form


def _yaml_error(exc: yaml.YAMLError, file: Path) -> ConfigError:
    """One line naming the file and the line (1-based) where the YAML parser gave up."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{file}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(file)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return ConfigError(f"YAML syntax error in {where}: {problem}")


def _resolve_task_path(entry: str, base_dir: Path, what: str) -> str:
    """Relative task paths are looked up beside the config file first, then in the current folder;
    a path found in neither is an error naming both places tried."""
    p = Path(entry).expanduser()
    if p.is_absolute():
        if not p.exists():
            raise ConfigError(f"{what} path {p} does not exist")
        return str(p)
    beside, here = (base_dir / p).resolve(), p.resolve()
    if beside.exists():
        return str(beside)
    if here.exists():
        return str(here)
    tried = f"{beside} (beside the config) and {here} (current folder)" if here != beside else str(here)
    raise ConfigError(f"{what} path {entry!r} does not exist: tried {tried}")


def _check(config: ExperimentConfig) -> None:
    # YAML reads on/off/yes/no/true/false as booleans, which the str field then holds as 'True'/'False'.
    confirm = config.evaluation.confirm_best
    config.evaluation.confirm_best = {"True": "on", "False": "off"}.get(confirm, confirm)
    choices = {
        "evaluation.device": (config.evaluation.device, ("auto", "cpu", "cuda")),
        "evaluation.scale": (config.evaluation.scale, ("auto", "small", "full")),
        "evaluation.profile": (config.evaluation.profile, PROFILE_NAMES),
        "evaluation.isolation": (config.evaluation.isolation, ("required", "best-effort")),
        "evaluation.profiling": (config.evaluation.profiling, ("none", "timeline", "counters")),
        "evaluation.builds": (config.evaluation.builds, ("local", "pool")),
        "evaluation.confirm_best": (config.evaluation.confirm_best, ("auto", "on", "off")),
        "evaluation.timing.call_start": (config.evaluation.timing.call_start, CALL_STARTS),
    }
    for key, (value, valid) in choices.items():
        if value not in valid:
            raise ConfigError(f"{key}={value!r} is not one of {', '.join(valid)}")
    if config.evaluation.builds == "pool" and not config.evaluation.object_cache:
        raise ConfigError(
            "evaluation.builds=pool needs evaluation.object_cache=true: pooled builds reach the "
            "evaluators through the node's object cache"
        )
    if config.evaluation.builds_ahead < -1:
        raise ConfigError(
            f"evaluation.builds_ahead={config.evaluation.builds_ahead} must be -1 (automatic: as many as "
            "evaluation.concurrency_per_worker under builds=pool or on a GPU), 0 (none) or more"
        )
    if config.budget.evaluations < 1:
        raise ConfigError("budget.evaluations must be at least 1")
    limit = config.evaluation.timing.host_slowdown_limit
    if limit != 0 and limit <= 1:
        raise ConfigError(
            f"evaluation.timing.host_slowdown_limit={limit} must be 0 (off) or above 1 (e.g. 1.15: a round "
            "of pairs whose host spin is 15 % slower than the fastest seen is left out)"
        )
    for key in ("window_spread", "window_spread_host_bound"):
        spread = getattr(config.evaluation.timing, key)
        if not 0 <= spread < 1:
            raise ConfigError(
                f"evaluation.timing.{key}={spread} must be at least 0 and under 1 (a relative spread "
                "between timing windows, e.g. 0.04 for 4 %; 0 adds nothing to a window's interval)"
            )
    patience = config.evaluation.timing.stranger_patience_s
    if not 0 <= patience < math.inf:
        raise ConfigError(
            f"evaluation.timing.stranger_patience_s={patience} must be 0 (the backoffs alone) or more "
            "seconds (e.g. 60: timing windows wait up to a minute in all for another process's kernels)"
        )
    if config.evaluation.seeds < 2:
        raise ConfigError(
            "evaluation.seeds must be at least 2: one seed cannot tell a lucky kernel from a right one"
        )
    if not config.tasks:
        raise ConfigError("no tasks: set tasks=[path/to/task.py, ...] in the config or on the command line")
    from evokernel.db.urls import check_url

    check_url(config.library)


def to_dict(config: ExperimentConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def from_dict(data: dict[str, Any], overrides: Sequence[str] = ()) -> ExperimentConfig:
    """Rebuild a stored config (e.g. of a run being resumed), with optional overrides on top."""
    merged = OmegaConf.merge(OmegaConf.structured(ExperimentConfig), OmegaConf.create(data))
    try:
        merged = OmegaConf.merge(merged, OmegaConf.from_dotlist(list(overrides)))
        config: ExperimentConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except OmegaConfBaseException as exc:
        raise _key_error(exc, "the command-line overrides") from exc
    _check(config)
    return config
