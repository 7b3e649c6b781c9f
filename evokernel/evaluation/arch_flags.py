"""GPU architecture flags in a candidate's ``load_inline`` call that the installed nvcc cannot
build for.

Why: LLM-written kernels often pin an architecture (``-arch=sm_70``, ``-arch=sm_75``: 5 of the 90
published PIKE level-3 files). CUDA 13's nvcc dropped sm_70 and older (``nvcc fatal : Unsupported
gpu architecture 'compute_70'``), so such a file fails to build on a current toolchain although the
field accepted it, and its kernel would have run on the GPU in hand through PTX JIT anyway. A flag
naming an architecture nvcc does not list (``nvcc --list-gpu-arch``) is dropped together with its
value; torch then adds the ``-gencode`` of the GPU in hand, as for every call that names none.

What it cannot do: make a kernel pass. The source is unchanged and is built for the GPU it runs on;
only code that branches on ``__CUDA_ARCH__`` sees the real architecture instead of the pinned one.
Flags for architectures nvcc supports are left as written, so a call that builds as written is
never changed.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

# -arch=sm_70, --gpu-architecture=compute_70, -code=sm_70, -gencode=arch=compute_70,code=sm_70, and
# each of those with its value as the next argument.
ARCH_OPTION = re.compile(r"^(-arch|--gpu-architecture|-code|--gpu-code|-gencode|--generate-code)(=.*)?$")
ARCH_NUMBER = re.compile(r"\b(?:sm|compute|lto)_(\d+)[af]?\b")


@functools.cache
def supported_architectures(nvcc: str) -> frozenset[int] | None:
    """The architecture numbers ``nvcc`` builds for (75, 80, ... on CUDA 13), or None when it
    cannot say (no nvcc, or one older than ``--list-gpu-arch``): then no flag is dropped."""
    if not Path(nvcc).exists():
        return None
    try:
        listed = subprocess.run(
            [nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    numbers = frozenset(int(n) for n in ARCH_NUMBER.findall(listed))
    return numbers or None


def without_unbuildable_architectures(flags: list[str], supported: frozenset[int]) -> list[str] | None:
    """``flags`` less every architecture option that names a number outside ``supported`` (with
    its value when that is the next argument), or None when there is none to drop."""
    kept: list[str] = []
    dropped = False
    i = 0
    while i < len(flags):
        flag = flags[i]
        match = ARCH_OPTION.match(flag) if isinstance(flag, str) else None
        if match is None:
            kept.append(flag)
            i += 1
            continue
        group = flags[i : i + 1] if match.group(2) else flags[i : i + 2]
        numbers = {int(n) for part in group if isinstance(part, str) for n in ARCH_NUMBER.findall(part)}
        if numbers and not numbers <= supported:
            dropped = True
        else:
            kept.extend(group)
        i += len(group)
    return kept if dropped else None
