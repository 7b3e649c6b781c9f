"""Which ``load_inline`` calls the trusted side builds (:mod:`evokernel.evaluation.object_cache`).

A worker's call arrives as JSON; :func:`call_arguments` turns it into ``load_inline`` keyword
arguments only when every argument is one the cache builds, of the type torch expects, and the
whole is small. Anything else (include paths, build directories, SYCL, a malformed call) is
answered ``local``: the worker builds it itself, as before the cache.
"""

from __future__ import annotations

import json
import re
from typing import Any

# The load_inline arguments a call may send and their types; any other (include paths, build
# directories, SYCL) is built by the worker itself, as before.
STRINGS = ("cpp_sources", "cuda_sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags")
FLAGS = ("with_cuda", "with_pytorch_error_handling", "use_pch", "no_implicit_headers")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
# What a call may send: ~1 MB of sources covers the corpus's largest file 20 times over.
MAX_CALL_BYTES = 4 << 20


def call_arguments(call: Any) -> dict[str, Any] | None:
    """The worker's call as ``load_inline`` keyword arguments, or None when it is malformed or
    not one the cache builds (the worker then builds it itself)."""
    if not isinstance(call, dict) or len(json.dumps(call)) > MAX_CALL_BYTES:
        return None
    name = call.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return None
    arguments: dict[str, Any] = {"name": name}
    for key, value in call.items():
        if key == "name":
            continue
        if key in STRINGS:
            if isinstance(value, list) and all(isinstance(s, str) for s in value):
                arguments[key] = list(value)
            elif isinstance(value, str) and key.endswith("sources"):
                arguments[key] = value
            elif value is not None:
                return None
        elif key in FLAGS:
            if value is not None and not isinstance(value, bool):
                return None
            arguments[key] = value
        elif key == "functions":
            if not _names(value):
                return None
            arguments[key] = value
        else:
            return None
    return arguments if "cpp_sources" in arguments else None


def _names(value: Any) -> bool:
    """``functions``: None, a name, a list of names or {name: docstring}."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    if isinstance(value, list):
        return all(isinstance(s, str) for s in value)
    return value is None or isinstance(value, str)
