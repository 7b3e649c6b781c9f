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
* **No PyTorch recompute** (rule ``pytorch-recompute``): a dummy Triton launch satisfies the
  own-kernel fact, so during one correctness call (the default sizes' last seed) the worker also
  records the ATen *compute* ops the candidate's forward dispatches (:class:`ComputeOps`, a
  ``TorchDispatchMode``), and the supervisor records the reference's on the same inputs. Compute
  means everything but allocation, views, copies, fills and dtype/device moves
  (:data:`NOT_COMPUTE`); ATen ops dispatched from a C++ extension count too (they go through the
  same dispatcher), ops inside a Triton-interpreter launch do not (that is the interpreter moving
  buffers). The rule: **the candidate is refused when it dispatches every compute op the
  reference dispatches, each at least as many times** (reference set non-empty, in-place and
  out-of-place forms alike): then ATen did all of the reference's work and its own kernel at most
  a part again. A mixed candidate that leaves any of the reference's compute op calls to its own
  kernel passes: ``torch.matmul`` plus a Triton bias+GELU epilogue for ``gelu(linear(x))``
  dispatches ``mm`` but not ``gelu``. Not caught: the same computation re-expressed with *different* ATen ops
  (``addcmul`` for ``mul`` + ``add``) beside a dummy launch; a reference made of data movement only
  (nothing to recompute). The rule is off when the run allows plain-PyTorch rewrites. Under any
  dispatch mode ``Subclass(tensor)`` construction fails, so a candidate building a tensor subclass
  gets ``runtime_error`` on that call (outputs must be plain tensors anyway); earlier seeds run
  without the recorder, so the specific checks speak first.

The op list is a claim of the candidate's process, like every fact here. It is still meaningful:
the reference side is recorded by the supervisor itself, the recorder is installed by the harness
around the call, and subverting it takes code the static rules refuse by name (dispatch-mode
introspection, monkey-patching, importing the harness); what it catches is the common reward hack
(the reference's forward pasted after a token launch), not an adversary who rewrites the recorder.

These facts travel to the supervisor, which decides; see :mod:`evokernel.evaluation.harness`.
"""

from __future__ import annotations

import builtins
import functools
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evokernel.evaluation import channel
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


def recomputed_reference(reference_ops: dict[str, int], candidate_ops: dict[str, int]) -> str | None:
    """The rule's reason when the candidate dispatched every compute op of the reference at least as
    many times as the reference did: then ATen did all of the reference's work. Counts, not kinds:
    a level-3 network calls ``relu`` 49 times, and a candidate whose own kernel fuses some of them
    still dispatches ``relu`` for the rest; by kinds alone it looked like a recompute (8 of 76 real
    kernels on the PIKE corpus, session 9), by counts its kernel visibly took work off ATen."""
    if not reference_ops or any(candidate_ops.get(op, 0) < n for op, n in reference_ops.items()):
        return None
    ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(reference_ops.items()))
    return (
        f"the candidate dispatched every PyTorch compute op of the reference at least as often ({ops}); "
        "its kernel does none of the reference's work"
    )


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


def pool_streams(device: torch.device) -> list[torch.cuda.Stream]:
    """Every stream of torch's per-device pool, at every priority. ``torch.cuda.Stream()`` (and
    ``at::cuda::getStreamFromPool`` in an extension, and the capture stream of
    ``torch.cuda.graph``) hands these out round robin, 32 per priority, so asking for 64 at each
    priority and keeping the distinct ones finds them all."""
    seen: dict[int, torch.cuda.Stream] = {}
    # Out-of-range priorities map to the nearest valid one; torch has at most a few levels.
    for priority in range(0, -9, -1):
        for _ in range(64):
            stream = torch.cuda.Stream(device, priority=priority)
            seen.setdefault(int(stream.stream_id), stream)
    return list(seen.values())


def streams_left_running(streams: list[torch.cuda.Stream], own: torch.cuda.Stream) -> tuple[int, float]:
    """Right after a call returns: how many of ``streams`` still had work after the call's own stream
    had finished, and how long the device stayed busy after that (host clock, ms). That is the work a
    timer whose events sit on the call's stream would not see. Joined work (``own.wait_stream(side)``)
    ends before the call's stream does and is not counted, whatever ran on the side; neither is side
    work that happened to end first, which that timer saw too. The streams busy at the return are
    found first and only they are asked again, so the second look is a few microseconds after the
    call's stream ends. (Events on idle streams were tried first: on an H200 their timestamps lagged
    the call's stream by 0.2-0.35 ms with nothing queued, so they cannot tell.)"""
    busy = [s for s in streams if not s.query()]
    if not busy:
        return 0, 0.0
    own.synchronize()
    start = time.perf_counter()
    left = sum(1 for s in busy if not s.query())
    if not left:
        return 0, 0.0
    torch.cuda.synchronize()
    return left, round((time.perf_counter() - start) * 1e3, 4)


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
        "torch.cuda.CUDAGraph.replay": torch.cuda.graphs.CUDAGraph.replay,
        "integrity.ComputeOps": ComputeOps.__torch_dispatch__,
        # The worker's side of the output channel: a replaced share_cuda could hand the supervisor
        # a forged CUDA IPC handle, on which the driver may segfault (channel.py).
        "channel.encode_tensors": channel.encode_tensors,
        "channel.share_cuda": channel.share_cuda,
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


# Side-stream check: events time only the current stream; work left on other streams shows as a
# tail after it (host_clock.py). Work outside the timed stream tolerated per call: a quarter of
# the timed median plus 50 us of host jitter. A legit call leaves no such work; the side-stream
# hack of the corpus leaves ~0.5 ms against a 0.24 ms median.
SIDE_STREAM_RATIO = 0.25
SIDE_STREAM_SLACK_MS = 0.05


def side_stream_work(timing: dict[str, Any]) -> str | None:
    """Why the timed call left GPU work running outside the timed stream, or None: the GPU work
    still running after the timed stream had finished, beyond a trivial probe's (the synchronize's
    own cost under the same load), per back-to-back pair of calls."""
    excess = timing.get("tail_excess_ms")
    if excess is None or excess <= SIDE_STREAM_RATIO * timing["median_ms"] + SIDE_STREAM_SLACK_MS:
        return None
    tail, probe = timing.get("stream_tail_ms"), float(timing.get("probe_tail_ms") or 0.0)
    return (
        f"the GPU was still busy {tail:.4g} ms after the timed stream had finished (a trivial "
        f"kernel: {probe:.4g} ms; {excess:.4g} ms more per call, pair by pair) but that stream "
        f"took only {timing['median_ms']:.4g} ms a call: work ran outside the timed stream"
    )
