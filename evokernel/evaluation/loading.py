"""Loading task and candidate modules, making inputs and models: shared by supervisor and worker.

Both processes make a trial's inputs themselves from the same seed (``torch.manual_seed`` then
``get_inputs()``), so inputs never cross the process line; a worker whose inputs differ produces
outputs that do not match, which is its own failure.

Inputs are made on the evaluation device itself (``get_inputs()`` runs under ``with device:``, so
``torch.randn`` draws from that device's generator): on a GPU the host RNG took 0.3-0.5 s per
32 M-element input in each of the two processes, for every trial and every timing (~40 % of an
evaluation at full size), the device's takes microseconds. The values differ from CPU draws of
the same seed, the same way on both sides.

Models are built as KernelBench and PIKE build them, under every profile (:func:`build_model`):
seeded, constructed on the CPU, then moved. Built under the device context instead, a candidate
that makes some parameters with the legacy ``torch.Tensor(...)`` constructor (CPU whatever the
context) and the rest as the reference does drew them from another generator than the
reference's, got other weights, and failed a correct kernel at max error 0.055 (issue 34). One
way for every profile, so a verdict never depends on which build path its profile took; it costs
a host-RNG initialisation per variant and side, once per evaluation, never per trial. The mode
is the profile's (profiles.py): eval mode, as PIKE's evaluator, except ``kernelbench``'s training
mode, as KernelBench's, whose harness never calls ``.eval()`` (session 29: two BatchNorm-folding
PIKE kernels pass in eval mode and fail KernelBench's check at errors of 2.3 and 5.3).
"""

from __future__ import annotations

import importlib.util
import linecache
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

# Weights of both models come from this generator state; inputs of a trial from its own seed.
INIT_SEED = 42


def load_module(path: Path, name: str, overrides: dict[str, Any] | None = None) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    module.__dict__.update(overrides or {})
    return module


def load_source(source: str, name: str, overrides: dict[str, Any] | None = None) -> ModuleType:
    """A module made from ``source`` held in memory, never from a file. The trusted side loads the
    task this way: a file in the evaluation's directory could have been rewritten by the candidate
    between two reads (issue 33: a ``reference.py`` the supervisor imported ran the candidate's code
    unconfined). The source is registered in ``linecache`` under a name no file has, so
    ``inspect.getsource`` (Triton's ``@jit`` needs it) and tracebacks still see it."""
    filename = f"<evokernel:{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    module = ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    module.__dict__.update(overrides or {})
    return module


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, device) for v in value)
    return value


def clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list | tuple):
        return type(value)(clone(v) for v in value)
    return value


def flatten(out: Any) -> list[Any]:
    if isinstance(out, tuple | list):
        return [x for item in out for x in flatten(item)]
    return [out]


def make_inputs(task: ModuleType, seed: int, device: torch.device) -> list[Any]:
    torch.manual_seed(seed)
    with device:
        return list(to_device(task.get_inputs(), device))


def build_model(entry: Any, init_inputs: list[Any], device: torch.device, training: bool = False) -> Any:
    """``entry(*init_inputs)`` after :data:`INIT_SEED`, built on the CPU and moved to ``device``,
    in eval mode, or in training mode where the profile says so (profiles.py: ``kernelbench``):
    parameters made in the same order get the same values whatever they are called and whichever
    constructor made them."""
    torch.manual_seed(INIT_SEED)
    with torch.device("cpu"):
        model = entry(*init_inputs)
    return model.to(device).train(training)


def build_reference(task: ModuleType, device: torch.device, training: bool = False) -> Any:
    return build_model(task.Model, task.get_init_inputs(), device, training)


def copy_reference_weights(reference: Any, candidate: Any) -> str:
    """How the candidate got the reference's weights. Both are built after ``INIT_SEED``, so
    parameters made in the same order hold the same values under any names ("same seed");
    where names and shapes match exactly, the reference's state is also copied ("exact copy"),
    so a candidate that initialises differently is not failed for it. "no parameters" when the
    reference has none."""
    ref_state, cand_state = reference.state_dict(), candidate.state_dict()
    if not ref_state:
        return "no parameters"
    if ref_state.keys() == cand_state.keys() and all(
        ref_state[k].shape == cand_state[k].shape for k in ref_state
    ):
        candidate.load_state_dict(ref_state)
        return "exact copy (same names and shapes)"
    return "same seed (names or shapes differ from the reference's)"


def candidate_class(module: ModuleType) -> Any:
    """The class to evaluate: ``ModelNew``, or else a ``Model`` class the candidate file defines
    itself (PIKE's and some published solutions' format). A ``Model`` it did not define (imported,
    or bound from elsewhere) is never taken; None when neither is there."""
    entry = getattr(module, "ModelNew", None)
    if entry is not None and callable(entry):
        return entry
    own = getattr(module, "Model", None)
    if isinstance(own, type) and own.__module__ == module.__name__:
        return own
    return None


def is_compile_error(exc: BaseException) -> bool:
    """Triton's JIT compiles at the first launch, so its compile errors surface during a call.
    ``OutOfResources`` (a tile needing more shared memory than the GPU has) is a build failure too."""
    mod, name = type(exc).__module__, type(exc).__name__
    from_triton = mod.startswith("triton") and ("Compil" in name or name == "OutOfResources")
    return from_triton or isinstance(exc, SyntaxError)


def bitwise_equal(a: Any, b: Any) -> bool:
    """Same values bit for bit (NaN equals NaN in the same place), same shape and dtype."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
            return False
        if a.is_floating_point() or a.is_complex():
            return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
        return bool(torch.equal(a, b))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(bitwise_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
