"""Launch hooks for the integrity stage: counters of the candidate's own kernel launches (Triton
JIT and interpreter, ``load_inline``/``load`` extensions, CUDA graph replays), failed launches and
builds, and :class:`ComputeOps`, the recorder of the ATen compute ops a call dispatches. Installed in
the worker before the candidate is imported; the rules that read these facts live in
:mod:`evokernel.evaluation.integrity`."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evokernel.evaluation.feedback import compiler_errors

_counts = {"triton": 0, "extension": 0, "graph": 0, "interpreting": 0, "failed": 0, "autotuning": 0}
_last_failure = [""]
# Why each failed load_inline/load build failed (compiler error lines), in order.
failed_builds: list[str] = []


def launches() -> int:
    """Launches that returned: a launch that raised (a build failure, a bad grid) is no kernel. A
    CUDA graph replay counts the own launches its capture recorded (:func:`_graph_hooks`)."""
    return _counts["triton"] + _counts["extension"] + _counts["graph"]


def failed_launches() -> int:
    """Launches that raised into the candidate's code. One that raised and a call that still
    returned means the candidate caught it: its try/except fallback ran (rule ``fallback``).
    Configs an autotuner tries and drops (out of resources) are the autotuner's own business."""
    return _counts["failed"]


def last_launch_failure() -> str:
    return _last_failure[0]


def _counted(fn: Callable[..., Any], kind: str, interpreted: bool = False) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        _counts["interpreting"] += interpreted
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            if not _counts["autotuning"]:
                _counts["failed"] += 1
                _last_failure[0] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"[:300]
            raise
        finally:
            _counts["interpreting"] -= interpreted
        if not kwargs.get("warmup", False):
            _counts[kind] += 1
        return result

    return run


def _autotuning(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Around an autotuner's run: its benchmarking drops failing configs by catching their
    errors, which is not the candidate's fallback; its own failure (every config failed) is."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        _counts["autotuning"] += 1
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if _counts["autotuning"] == 1:
                _counts["failed"] += 1
                _last_failure[0] = f"{type(exc).__name__} from an autotuner: {str(exc)[:200]}"
            raise
        finally:
            _counts["autotuning"] -= 1

    return run


# ATen ops that move or make memory rather than compute (overload packet names, trailing "_" of
# in-place forms removed); views are recognised by their schema (``OpOverload.is_view``).
NOT_COMPUTE = frozenset(
    {
        *("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize", "set"),
        *("zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like"),
        *("new_full", "scalar_tensor", "fill", "zero", "arange", "lift_fresh", "lift_fresh_copy"),
        *("copy", "clone", "_to_copy", "to", "contiguous", "detach", "_local_scalar_dense", "item"),
        *("cat", "stack", "constant_pad_nd", "repeat", "record_stream", "_reshape_alias", "reshape"),
        *("flatten", "view_as", "expand_as", "_unsafe_view", "as_strided_scatter"),
    }
)


def compute_op_name(func: torch._ops.OpOverload) -> str | None:
    """``"mm"`` for ``aten.mm.default``, ``"add"`` for ``aten.add_.Tensor``; None for non-compute ops."""
    if func.is_view:
        return None
    name = func.overloadpacket.__name__
    name = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    return None if name in NOT_COMPUTE else name


class ComputeOps(TorchDispatchMode):
    """While active, counts the ATen compute ops dispatched (``ops``: name -> calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __enter__(self) -> ComputeOps:
        _recorders.append(self)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        _recorders.remove(self)
        super().__exit__(*exc)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise (torch >= 2.12) the mode wraps __torch_dispatch__ in torch._disable_dynamo, whose
        # first call imports torch._dynamo (2 s) and rebinds torch.manual_seed: harness-modified.
        return False

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        name = compute_op_name(func) if not _counts["interpreting"] else None
        if name:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


# Active recorders, innermost last: a graph replay adds the ops its capture dispatched to them.
_recorders: list[ComputeOps] = []


def _graph_hooks() -> None:
    """A CUDA graph replays kernels without a Python launch or an ATen dispatch, so what its capture
    did is recorded on the graph (own launches, ATen compute ops) and replayed into the counts: a
    graph of own kernels is an own kernel, a graph of the reference's ATen ops is a recompute."""
    graphs = torch.cuda.graphs.CUDAGraph
    begin, end, replay = graphs.capture_begin, graphs.capture_end, graphs.replay

    def capture_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = ComputeOps()
        self._evk_capture = (launches(), recorder)
        result = begin(self, *args, **kwargs)
        recorder.__enter__()
        return result

    def capture_end(self: Any) -> Any:
        before, recorder = self._evk_capture
        recorder.__exit__(None, None, None)
        self._evk_launches, self._evk_ops = launches() - before, dict(recorder.ops)
        return end(self)

    def replay_counted(self: Any) -> Any:
        result = replay(self)
        _counts["graph"] += getattr(self, "_evk_launches", 0)
        for recorder in _recorders:
            recorder.ops.update(getattr(self, "_evk_ops", {}))
        return result

    graphs.capture_begin = functools.wraps(begin)(capture_begin)  # type: ignore[method-assign]
    graphs.capture_end = functools.wraps(end)(capture_end)  # type: ignore[method-assign]
    graphs.replay = functools.wraps(replay)(replay_counted)  # type: ignore[method-assign]


class _CountedExtension:
    """A compiled extension module whose callables count as own-kernel launches."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        return _counted(value, "extension") if callable(value) and not isinstance(value, type) else value


def install_launch_hooks() -> None:
    import torch.utils.cpp_extension as cpp_extension
    from triton.runtime import autotuner, jit

    jit.JITFunction.run = _counted(jit.JITFunction.run, "triton")
    _graph_hooks()
    autotuner.Autotuner.run = _autotuning(autotuner.Autotuner.run)
    try:
        from triton.runtime import interpreter
    except ImportError:  # an old Triton without the interpreter: only the compiled path exists
        interpreter = None
    if interpreter is not None:
        interpreter.InterpretedFunction.run = _counted(
            interpreter.InterpretedFunction.run, "triton", interpreted=True
        )
    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)

        def wrapped(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
            try:
                result = _original(*args, **kwargs)
            except Exception as exc:
                # Kept: a candidate that catches it runs its fallback, and the verdict says why.
                errors = compiler_errors(str(exc))
                failed_builds.append("; ".join(errors[:3]) or f"{type(exc).__name__}: {str(exc)[:200]}")
                raise
            return _CountedExtension(result) if isinstance(result, ModuleType) else result

        setattr(cpp_extension, name, functools.wraps(original)(wrapped))
