"""Find plug-in classes by name without importing every plug-in up front.

Resolution order for a name: a built-in listed here, then an installed package's entry point in
the group ``evokernel.<kind>``, then a ``module:Class`` path. Only the class asked for is
imported, so a run using ``tune`` never imports litellm.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from evokernel.exceptions import PluginError

BUILTINS: dict[str, dict[str, str]] = {
    "strategies": {"pike_b": "evokernel.strategies.pike_b:PikeB"},
    "mutators": {"tune": "evokernel.mutators.tune:TuneMutator", "llm": "evokernel.mutators.llm:LLMMutator"},
}


def _import(path: str, kind: str, name: str) -> Any:
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PluginError(f"cannot import {kind[:-1]} {name!r} from module {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise PluginError(f"module {module_name!r} has no {attr!r} (asked for {kind[:-1]} {name!r})") from exc


def resolve(kind: str, name: str) -> Any:
    """The class registered as ``name`` for ``kind`` ("strategies" or "mutators")."""
    builtins = BUILTINS[kind]
    if name in builtins:
        return _import(builtins[name], kind, name)
    for ep in entry_points(group=f"evokernel.{kind}"):
        if ep.name == name:
            return ep.load()
    if ":" in name:
        return _import(name, kind, name)
    known = sorted(builtins) + sorted(ep.name for ep in entry_points(group=f"evokernel.{kind}"))
    raise PluginError(
        f"unknown {kind[:-1]} {name!r}; built-in and installed: {', '.join(known)}; "
        f"or give a 'package.module:Class' path"
    )
