"""Stage 4, integrity: run-time facts about each candidate call, gathered inside the worker.

* **Own kernel launched**: Triton launches are counted by wrapping ``JITFunction.run`` (compiled)
  and ``InterpretedFunction.run`` (``TRITON_INTERPRET=1``), which every ``kernel[grid](...)`` and
  autotuner launch goes through; CUDA/C++ extensions by wrapping the modules that
  ``torch.utils.cpp_extension.load_inline``/``load`` return. Both hooks are installed before the
  candidate is imported, so its ``import`` statements bind the wrapped objects. A call that
  launches none of them computed with ATen alone (or returned a cached result).
* **Nothing left behind**: no Python threads or child processes beyond those alive before the
  call, and on a GPU the
  current stream is still the one the harness set.
* **Harness unchanged**: the functions verdicts and timings depend on are the same objects after
  the call as before the candidate was imported.

These facts travel to the supervisor, which decides; see :mod:`evokernel.evaluation.harness`.
"""

from __future__ import annotations

import builtins
import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

_counts = {"triton": 0, "extension": 0}


def launches() -> int:
    return _counts["triton"] + _counts["extension"]


def _counted(fn: Callable[..., Any], kind: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("warmup", False):
            _counts[kind] += 1
        return fn(*args, **kwargs)

    return run


class _CountedExtension:
    """A compiled extension module whose callables count as own-kernel launches."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        return _counted(value, "extension") if callable(value) and not isinstance(value, type) else value


def install_launch_hooks() -> None:
    import torch.utils.cpp_extension as cpp_extension
    from triton.runtime import jit

    jit.JITFunction.run = _counted(jit.JITFunction.run, "triton")
    try:
        from triton.runtime import interpreter
    except ImportError:  # an old Triton without the interpreter: only the compiled path exists
        interpreter = None
    if interpreter is not None:
        interpreter.InterpretedFunction.run = _counted(interpreter.InterpretedFunction.run, "triton")
    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)

        def wrapped(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            result = _original(*args, **kwargs)
            return _CountedExtension(result) if isinstance(result, ModuleType) else result

        setattr(cpp_extension, name, functools.wraps(original)(wrapped))


def harness_snapshot() -> dict[str, Any]:
    """The objects whose replacement would let a candidate fake a verdict or a timing."""
    cuda = torch.cuda
    return {
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "torch.cuda.synchronize": cuda.synchronize,
        "torch.cuda.Event": cuda.Event,
        "torch.cuda.Event.elapsed_time": cuda.Event.elapsed_time,
        "torch.cuda.Event.record": cuda.Event.record,
        "torch.allclose": torch.allclose,
        "torch.equal": torch.equal,
        "torch.Tensor.clone": torch.Tensor.clone,
        "torch.Tensor.copy_": torch.Tensor.copy_,
        "torch.Tensor.cpu": torch.Tensor.cpu,
        "torch.Tensor.__eq__": torch.Tensor.__eq__,
        "torch.manual_seed": torch.manual_seed,
        "builtins.type": builtins.type,
        "builtins.isinstance": builtins.isinstance,
        "builtins.len": builtins.len,
        "threading.enumerate": threading.enumerate,
        "integrity.launches": launches,
    }


def changed_harness(before: dict[str, Any]) -> list[str]:
    now = harness_snapshot()
    return [name for name, obj in before.items() if now.get(name) is not obj]


def python_threads() -> set[int]:
    return {t.ident or 0 for t in threading.enumerate()}


def child_processes() -> set[int]:
    """Live children of this process (``/proc/self/task/*/children``; zombies count until reaped)."""
    out: set[int] = set()
    tasks = Path("/proc/self/task")
    for task in tasks.iterdir() if tasks.exists() else []:
        try:
            out.update(int(p) for p in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue  # a thread that ended while we looked, or a kernel without the file
    return out
