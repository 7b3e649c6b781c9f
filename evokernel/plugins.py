"""Find plug-in classes by name without importing every plug-in up front.

Resolution order for a name: a built-in listed by its plug-in package (``BUILTINS`` in
``evokernel.strategies`` and ``evokernel.mutators``; ``MIGRATIONS``/``RESETS`` in
``evokernel.islands``), then an installed package's entry point in the group ``evokernel.<kind>``,
then a ``module:Class`` path (or ``path/to/file.py:Class``, for
a strategy kept beside an experiment). Only the class asked for is imported, so a run using
``tune`` never imports litellm.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from evokernel.exceptions import ConfigError, PluginError

T = TypeVar("T")

# Where each kind's built-ins are listed: (package, dict name). Each plug-in package names its own
# built-ins; this module only knows where to look (by name, so it imports none of them up front).
HOMES: dict[str, tuple[str, str]] = {
    "strategies": ("evokernel.strategies", "BUILTINS"),
    "mutators": ("evokernel.mutators", "BUILTINS"),
    "migrations": ("evokernel.islands", "MIGRATIONS"),
    "resets": ("evokernel.islands", "RESETS"),
}


def builtins(kind: str) -> dict[str, str]:
    """Built-in name -> ``module:Class`` for ``kind`` (imports the plug-in package's __init__ only)."""
    package, attr = HOMES[kind]
    found: dict[str, str] = getattr(importlib.import_module(package), attr)
    return found


def __getattr__(name: str) -> Any:
    if name == "BUILTINS":  # the old registry's table, assembled on demand
        return {kind: builtins(kind) for kind in HOMES}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SINGULAR = {"strategies": "strategy", "mutators": "mutator", "migrations": "migration", "resets": "reset"}


def construct(cls: type[T], params: Mapping[str, Any], key: str, what: str) -> T:
    """``cls(**params)``; a parameter its ``__init__`` does not take is a ConfigError naming the
    config ``key`` (e.g. ``strategy.params``), the plug-in (``what``) and the valid names."""
    valid = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ConfigError(
            f"unknown {key} key(s) {', '.join(unknown)} for {what} {getattr(cls, 'name', cls.__name__)!r}; "
            f"valid keys: {', '.join(valid) or '(none)'}"
        )
    return cls(**params)


def _load_file(path: Path, kind: str, name: str) -> ModuleType:
    """Import a plug-in from a ``.py`` file (``path/to/my_strategy.py:MyStrategy``)."""
    if not path.is_file():
        raise PluginError(f"{SINGULAR[kind]} {name!r}: no file {path} (relative paths are from {Path.cwd()})")
    module_name = f"evokernel_plugin_{path.stem}_{abs(hash(str(path.resolve()))):x}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot load {SINGULAR[kind]} {name!r} from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _import(path: str, kind: str, name: str) -> Any:
    module_name, _, attr = path.rpartition(":")
    what = SINGULAR[kind]
    if module_name.endswith(".py"):
        module = _load_file(Path(module_name), kind, name)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise PluginError(f"cannot import {what} {name!r} from module {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise PluginError(f"module {module_name!r} has no {attr!r} (asked for {what} {name!r})") from exc


def available(kind: str) -> list[str]:
    """Built-in and installed names for ``kind`` (nothing is imported)."""
    return sorted(builtins(kind)) + sorted(ep.name for ep in entry_points(group=f"evokernel.{kind}"))


def resolve(kind: str, name: str) -> Any:
    """The class registered as ``name`` for ``kind`` ("strategies", "mutators", "migrations" or
    "resets"); third-party packages register under the entry-point group ``evokernel.<kind>``."""
    known = builtins(kind)
    if name in known:
        return _import(known[name], kind, name)
    for ep in entry_points(group=f"evokernel.{kind}"):
        if ep.name == name:
            return ep.load()
    if ":" in name:
        return _import(name, kind, name)
    raise PluginError(
        f"unknown {SINGULAR[kind]} {name!r}; built-in and installed: {', '.join(available(kind))}; "
        f"or give a 'package.module:Class' or 'path/to/file.py:Class' path"
    )
