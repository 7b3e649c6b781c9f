"""Faster ``load_inline`` builds for candidates, installed in the worker before the candidate is
imported; what a build produces stays the candidate's code.

Five changes to a candidate's ``torch.utils.cpp_extension.load_inline`` call, each counted:

* **Precompiled header** (``header``): ``-I`` of the node's precompiled ``torch/extension.h``
  (:mod:`evokernel.evaluation.pch`, which says why gcc's own checks make this safe) when the
  call's ``extra_cflags`` name a built variant and it adds no include paths.
* **No torch header in a torch-free ``.cu``** (``lean_cu``): ``load_inline`` puts
  ``#include <torch/types.h>`` at the top of ``cuda_sources`` whatever they contain, and nvcc
  spends most of a lean candidate's build on it (a 4-line axpy ``.cu``: 2.3 s without, 47.9 s with,
  on the CI machine). When no CUDA source mentions torch, ATen, c10, pybind11 or ``Tensor``, the
  call goes out with ``no_implicit_headers=True`` and the two lines torch would still have added
  (``<torch/extension.h>`` first in ``main.cpp``, so it stays identical, and ``<cuda.h>`` +
  ``<cuda_runtime.h>`` in the ``.cu``). A source that leaned on something the torch header pulled
  in (``<cmath>``, ``<cuda_fp16.h>``, ...) fails to build that way; the call is then made again
  exactly as written (``lean_cu_fallback``), so a candidate can only lose the time of the failed
  attempt, never its build. A failure in the C++ part alone (``main.cpp``, the same in every
  attempt) is the call's own and is not retried (``cpp_failed``).
* **The tensor header for torch's in a ``.cu``** (``tensor_cu``): a ``.cu`` whose torch names are
  all tensors, a few factories and dtypes gets :mod:`evokernel.evaluation.tensor_header` instead
  of any torch header (half the nvcc core-seconds of ``torch/types.h``); a failure falls back to
  ``light_cu`` where it applies, then to the call as written (``tensor_cu_fallback``).
* **torch/types.h for torch/extension.h in a ``.cu``** (``light_cu``): real LLM-written kernels
  (PIKE, KernelBench) start the ``.cu`` with ``#include <torch/extension.h>`` although it only
  needs ``torch::Tensor`` and friends; the header adds the C++ frontend (``torch::nn``, optim,
  data, jit) and pybind11, which nvcc parses three times (cudafe++, cicc, the host compiler).
  Real pike-level3 files: 57-65 s of nvcc as written, 23-27 s with the include replaced by
  ``torch/types.h``, the header ``load_inline`` itself puts first in every ``.cu`` (CI machine,
  nvcc 13; docs/benchmarks.md, session 10). Only when no CUDA source names something that
  header lacks (:data:`EXTENSION_NAMES`); each replaced line stays one line, so compiler messages
  keep their line numbers. A build that fails this way is made again as written
  (``light_cu_fallback``), as for ``lean_cu``. Both change which declarations a build sees, never
  a line of the candidate's code; what is verified and timed is the module that was built.
* **No -arch this nvcc cannot build for** (``arch_dropped``): :mod:`evokernel.evaluation.arch_flags`.
* **A build directory outside the sandbox moved into it** (``redirected``, ``load_inline`` and
  ``load``): :mod:`evokernel.evaluation.build_redirect`.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections import Counter
from pathlib import Path
from typing import Any

from evokernel.evaluation import tensor_header
from evokernel.evaluation.arch_flags import supported_architectures, without_unbuildable_architectures
from evokernel.evaluation.build_redirect import install_makedirs, redirect_arguments
from evokernel.evaluation.pch import header_dir

counts: Counter[str] = Counter()

# Anything a .cu could take from torch/types.h by name; a match (comments included) keeps the call
# as written, which costs only time.
TORCH_NAMES = re.compile(r"torch|TORCH|ATen|\bat::|c10|C10|\bAT_|Tensor|pybind|PYBIND")
CU_PRELUDE = ["#include <cuda.h>", "#include <cuda_runtime.h>"]
# The umbrella headers a .cu takes the C++ frontend and pybind11 from; torch/types.h replaces them.
UMBRELLA_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/(extension|torch|all)\.h[>"]', re.M)
LIGHT_INCLUDE = "#include <torch/types.h>  /* evokernel light_cu: was {0} */"
# What those headers declare beyond torch/types.h, by name (comments included): a match keeps the
# .cu as written. Anything missed costs one failed attempt, never the build.
EXTENSION_NAMES = re.compile(
    r"pybind|PYBIND|\bpy::|\bTHP|TORCH_LIBRARY|torch::(nn|optim|data|jit|serialize|autograd|cuda|fft"
    r"|linalg|special|python|utils|nested|sparse|library|class_|Library|CustomClassHolder)\b"
    r"|at::(parallel_for|parallel_reduce|get_num_threads|set_num_threads)\b"
)


def _sources(value: Any) -> list[str] | None:
    """``load_inline``'s str-or-list source argument as a list; None when it is neither."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(s, str) for s in value):
        return list(value)
    return None


def _explicit_header_sources(
    arguments: dict[str, Any], parameters: Any
) -> tuple[list[str], list[str]] | None:
    """(cuda, cpp) sources of a call that can go out with ``no_implicit_headers=True``, or None."""
    if "no_implicit_headers" not in parameters or arguments.get("no_implicit_headers"):
        return None
    cuda = _sources(arguments.get("cuda_sources"))
    cpp = _sources(arguments.get("cpp_sources"))
    if not cuda or cpp is None or arguments.get("sycl_sources"):
        return None
    return cuda, cpp


def _with_explicit_headers(arguments: dict[str, Any], cpp: list[str], cuda: list[str]) -> dict[str, Any]:
    """The call with torch's implicit headers off: ``<torch/extension.h>`` first in ``main.cpp``
    as torch would put it (so main.cpp stays identical), and ``cuda`` as the CUDA sources."""
    return {
        **arguments,
        "cpp_sources": ["#include <torch/extension.h>", *cpp],
        "cuda_sources": cuda,
        "no_implicit_headers": True,
    }


def lean_cu_arguments(arguments: dict[str, Any], parameters: Any) -> dict[str, Any] | None:
    """The call's arguments with torch's implicit headers replaced by the ones a torch-free
    ``.cu`` needs, or None when the call is not eligible."""
    sources = _explicit_header_sources(arguments, parameters)
    if sources is None or any(TORCH_NAMES.search(source) for source in sources[0]):
        return None
    cuda, cpp = sources
    return _with_explicit_headers(arguments, cpp, [*CU_PRELUDE, *cuda])


def light_cu_arguments(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The call's arguments with every ``#include <torch/extension.h>`` (``torch.h``, ``all.h``)
    line of its CUDA sources replaced by ``torch/types.h``, or None when there is none to replace
    or a source names what only the umbrella header declares."""
    cuda = _sources(arguments.get("cuda_sources"))
    if not cuda or arguments.get("sycl_sources"):
        return None
    if not any(UMBRELLA_INCLUDE.search(source) for source in cuda):
        return None
    if any(EXTENSION_NAMES.search(source) for source in cuda):
        return None

    def light(match: re.Match[str]) -> str:
        return LIGHT_INCLUDE.format(f"torch/{match.group(1)}.h")

    return {**arguments, "cuda_sources": [UMBRELLA_INCLUDE.sub(light, source) for source in cuda]}


def tensor_cu_arguments(arguments: dict[str, Any], parameters: Any) -> dict[str, Any] | None:
    """The call's arguments with the tensor header (tensor_header.py) for torch's headers in its
    ``.cu``, or None when the call is not eligible."""
    sources = _explicit_header_sources(arguments, parameters)
    if sources is None or not tensor_header.eligible(sources[0]):
        return None
    cuda, cpp = sources
    prelude = "\n".join(tensor_header.PRELUDE)
    return _with_explicit_headers(arguments, cpp, [prelude, *map(tensor_header.without_torch_includes, cuda)])


def install(header_root: str | None, light: bool = True, workdir: Path | None = None) -> None:
    """Wrap ``load_inline`` and ``load`` (whatever wraps them already, e.g. the launch counter,
    stays inside). ``workdir``: the confined candidate's directory, where a build directory
    outside it is moved (build_redirect.py); None (an unconfined process: the precompiled
    header's own test, a tool) moves nothing."""
    import torch.utils.cpp_extension as cpp_extension

    own = workdir
    if own is not None:
        _install_load(own)
        install_makedirs(own, counts)
    original = cpp_extension.load_inline
    signature = inspect.signature(original)

    @functools.wraps(original)
    def load_inline(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)  # a wrong call: torch says what is wrong with it
        arguments = dict(bound.arguments)
        if own is not None:
            arguments = _in_own_directory(arguments, own)
        arch_fixed = _buildable_architectures(arguments.get("extra_cuda_cflags"))
        if arch_fixed is not None:
            arguments["extra_cuda_cflags"] = arch_fixed
            counts["arch_dropped"] += 1
        directory = None
        if header_root and not arguments.get("extra_include_paths"):
            directory = header_dir(Path(header_root), arguments.get("extra_cflags"))
        if directory is not None:
            arguments["extra_cflags"] = [f"-I{directory}", *(arguments.get("extra_cflags") or [])]
            counts["header"] += 1
        # The lightest build first; each that fails to build falls back to the next, and last
        # to the call as written.
        attempts = [("lean_cu", lean_cu_arguments(arguments, signature.parameters))]
        if light and attempts[0][1] is None:
            attempts = [
                ("tensor_cu", tensor_cu_arguments(arguments, signature.parameters)),
                ("light_cu", light_cu_arguments(arguments)),
            ]
        for kind, changed in attempts:
            if changed is None:
                continue
            try:
                module = original(**changed)
            except RuntimeError as exc:
                if "Error building extension" not in str(exc):
                    raise
                if fails_as_written(str(exc)):
                    counts["cpp_failed"] += 1
                    raise
                counts[f"{kind}_fallback"] += 1
            else:
                counts[kind] += 1
                return module
        return original(**arguments)

    cpp_extension.load_inline = load_inline


# ninja names each target it failed to build (torch puts its output in the error unless the call
# is verbose): main.o is the C++ part, which every attempt leaves as written, so when it alone
# failed the call as written fails the same way. Retrying it anyway cost PIKE's orig/task_43
# (``-std=c++14`` against torch's C++17 headers) three failed builds, past the 300 s timeout
# under a loaded node's builds (session 29, H200), where it belonged with own-kernel.
FAILED_TARGET = re.compile(r"^FAILED: (\S+)", re.M)


def fails_as_written(message: str) -> bool:
    """A failed attempt whose only failed ninja target is the C++ part (``main.o``)."""
    targets = set(FAILED_TARGET.findall(message))
    return bool(targets) and targets <= {"main.o"}


def _in_own_directory(arguments: dict[str, Any], workdir: Path) -> dict[str, Any]:
    moved = redirect_arguments(arguments, workdir)
    if moved is None:
        return arguments
    counts["redirected"] += 1
    return moved[0]


def _install_load(workdir: Path) -> None:
    """``load`` (sources from files) gets only the build directory's move."""
    import torch.utils.cpp_extension as cpp_extension

    original = cpp_extension.load
    signature = inspect.signature(original)

    @functools.wraps(original)
    def load(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        return original(**_in_own_directory(dict(bound.arguments), workdir))

    cpp_extension.load = load


def _buildable_architectures(flags: Any) -> list[str] | None:
    """The call's CUDA flags less architectures this nvcc cannot build for (arch_flags.py)."""
    if not isinstance(flags, list) or not flags:
        return None
    from torch.utils.cpp_extension import CUDA_HOME

    supported = supported_architectures(str(Path(CUDA_HOME or "/nonexistent", "bin", "nvcc")))
    return None if supported is None else without_unbuildable_architectures(flags, supported)


NOTES = (
    ("arch_dropped", "without an -arch this nvcc cannot build for (torch's for the GPU in hand)"),
    ("header", "with the precompiled torch header"),
    ("lean_cu", "without torch's header in the .cu"),
    ("lean_cu_fallback", "rebuilt as written after failing without it"),
    ("tensor_cu", "with the tensor header for torch's in the .cu"),
    ("tensor_cu_fallback", "rebuilt after failing with the tensor header"),
    ("light_cu", "with torch/types.h for torch/extension.h in the .cu"),
    ("light_cu_fallback", "rebuilt as written after failing with torch/types.h"),
    ("cpp_failed", "not rebuilt as written: their C++ part, which no attempt changes, failed"),
    ("redirected", "in work/redirected/ instead of a build directory outside the sandbox"),
    ("redirected_makedirs", "directories made in work/redirected/ for os.makedirs outside the sandbox"),
)


def inline_build_note(claimed: Any) -> str:
    """The build stage's note from the worker's counts (a claim, shown for diagnosis only)."""
    if not isinstance(claimed, dict):
        return ""
    parts = [
        f"{claimed[key]} {text}" for key, text in NOTES if type(claimed.get(key)) is int and claimed[key] > 0
    ]
    return f"load_inline builds: {', '.join(parts)}" if parts else ""
