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

These facts travel to the supervisor, which decides by one table of rules
(:mod:`evokernel.evaluation.rules`); see also :mod:`evokernel.evaluation.harness`.
"""

from __future__ import annotations

import builtins
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from evokernel.evaluation import channel
from evokernel.evaluation.launch_hooks import (
    NOT_COMPUTE,
    ComputeOps,
    compute_op_name,
    failed_builds,
    failed_launches,
    install_launch_hooks,
    last_launch_failure,
    launches,
)

__all__ = [
    "NOT_COMPUTE",
    "ComputeOps",
    "changed_harness",
    "child_processes",
    "compute_op_name",
    "failed_builds",
    "failed_launches",
    "harness_snapshot",
    "install_launch_hooks",
    "last_launch_failure",
    "launches",
    "pool_streams",
    "python_threads",
    "recomputed_reference",
    "side_stream_work",
    "streams_left_running",
]


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
        **_module_objects(),
    }


# The harness's own modules: every function and class they bind, and every method of their
# classes, is in the snapshot. Replacing the worker's ``time_callable`` (the name the worker
# calls, not the timing module's) once timed a kernel 49x faster than it ran (issue 33).
HARNESS_MODULES = (
    "evokernel.evaluation.worker",
    "evokernel.evaluation.worker_timing",
    # The replies the worker writes its facts into (a replaced to_json could drop a failed build).
    "evokernel.evaluation.replies",
    "evokernel.evaluation.block_timer",
    "evokernel.evaluation.timing",
    "evokernel.evaluation.timing_stats",
    "evokernel.evaluation.host_clock",
    "evokernel.evaluation.clocks",
    "evokernel.evaluation.loading",
    "evokernel.evaluation.channel",
    "evokernel.evaluation.integrity",
    "evokernel.evaluation.launch_hooks",
    "evokernel.evaluation.guards",
)


def _module_objects() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name in HARNESS_MODULES:
        module = sys.modules.get(name)
        for attr, value in vars(module).items() if module is not None else ():
            if attr.startswith("__") or not callable(value):
                continue
            found[f"{name}.{attr}"] = value
            if isinstance(value, type) and value.__module__ == name:
                for method, member in vars(value).items():
                    if callable(member) or isinstance(member, staticmethod | classmethod | property):
                        found[f"{name}.{attr}.{method}"] = member
    return found


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
