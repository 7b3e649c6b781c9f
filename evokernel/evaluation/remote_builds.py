"""The worker's side of the node's object cache (:mod:`evokernel.evaluation.object_cache`).

Installed under every other ``load_inline`` wrapper (the launch counter and inline_builds' header
changes wrap it), so what a call becomes is decided as before and only the build moves: a call
the cache takes is sent to the supervisor, which answers with the path of the compiled module
(imported here as torch imports its own builds), the compiler's output (raised as torch raises
a failed build: ``Error building extension '<name>': ...``) or ``local``: torch builds it here.

The profiling target (a later process of the same candidate, with no link to the supervisor)
reads the objects it may import from ``remote_builds.json`` in the working directory, which this
module writes; it only imports files beneath the cache root, and whatever the worker wrote there
only changes its own candidate's profile.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from evokernel.evaluation.object_cache import FLAGS, STRINGS

Ask = Callable[[dict[str, Any]], dict[str, Any]]
# Arguments the trusted side builds (object_cache.call_arguments); any other keeps the build here.
SENT = ("name", "functions", *STRINGS, *FLAGS)
# Given, these change nothing the cache builds: torch's messages and intermediates in a build
# directory the candidate does not see.
IGNORED = ("verbose", "keep_intermediates")
RECORD = "remote_builds.json"
# What this process imported from the cache, by call (written to RECORD for the profiling target).
_known: dict[str, list[str]] = {}


def portable(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The call as the JSON the supervisor reads, or None when the worker builds it itself."""
    if arguments.get("is_python_module", True) is not True:
        return None
    call = {}
    for key, value in arguments.items():
        if key in IGNORED or key == "is_python_module":
            continue
        if key not in SENT:
            return None
        call[key] = list(value) if isinstance(value, tuple) else value
    try:
        json.dumps(call)
    except (TypeError, ValueError):
        return None
    return call


def call_key(call: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(call, sort_keys=True).encode()).hexdigest()


def import_object(name: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the extension {name} from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def install(ask: Ask, workdir: Path) -> None:
    """Send eligible ``load_inline`` calls to the supervisor through ``ask``."""
    import torch.utils.cpp_extension as cpp_extension

    original = cpp_extension.load_inline
    signature = inspect.signature(original)
    record = workdir / RECORD

    @functools.wraps(original)
    def load_inline(*args: Any, **kwargs: Any) -> Any:
        try:
            call = portable(dict(signature.bind(*args, **kwargs).arguments))
        except TypeError:
            call = None  # a wrong call: torch says what is wrong with it
        if call is None:
            return original(*args, **kwargs)
        answer = ask(call)
        if isinstance(answer.get("object"), str) and isinstance(answer.get("name"), str):
            module = import_object(answer["name"], answer["object"])
            _known[call_key(call)] = [answer["name"], answer["object"]]
            record.write_text(json.dumps(_known))
            return module
        if isinstance(answer.get("error"), str):
            raise RuntimeError(f"Error building extension '{call['name']}': {answer['error']}")
        return original(*args, **kwargs)

    cpp_extension.load_inline = load_inline


def recorded(workdir: Path, root: str | None) -> Ask:
    """For a later process of the same candidate: answers from the worker's record, for objects
    beneath ``root`` only; anything else is built locally."""
    base = Path(root).resolve() if root else None

    def ask(call: dict[str, Any]) -> dict[str, Any]:
        try:
            known = json.loads((workdir / RECORD).read_text())
            name, path = known[call_key(call)]
        except (OSError, ValueError, KeyError, TypeError):
            return {"local": "not in the worker's record"}
        if base is None or not Path(path).resolve().is_relative_to(base):
            return {"local": "not beneath the object cache"}
        return {"object": path, "name": name}

    return ask
