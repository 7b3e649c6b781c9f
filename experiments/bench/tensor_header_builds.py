"""Benchmark: the tensor header (``tensor_cu``) against ``torch/types.h`` (``light_cu``) for real
kernels' ``.cu`` files, in core-seconds of nvcc (issue 37; no GPU needed).

    python3 experiments/bench/tensor_header_builds.py --corpus ../shared/corpora/pike-level3 --count 24

Question: of a level-3 CUDA candidate's ~40 core-seconds of build, ~25 are its ``.cu`` parsing
torch's headers three times; how many of the corpus's ``load_inline`` calls can take the tensor
header (:mod:`evokernel.evaluation.tensor_header`), do they build with it, and what does a
``.cu`` cost with it against the build path before it? Method: every CUDA file's calls are
recorded (``corpus_builds.recorded_calls``: the file runs with ``load_inline`` replaced); each
call is checked by ``tensor_cu_arguments``; for ``--count`` files (a stratified sample, or all)
with an eligible call, torch writes the ``.cu`` both ways (``light_cu_arguments``, or the call as
written where it has no umbrella include, which gets torch's implicit ``torch/types.h``: what a
build made before) and each is compiled by the ``build.ninja``'s own nvcc line, alone, ``--jobs``
at once; core-seconds by ``os.wait4`` of nvcc (its phases are its children). The link and main.cpp
are the same both ways and not timed. On a CPU-only torch, ``c10/cuda/impl/cuda_cmake_macros.h``
is missing and a stand-in directory is added to every compile. The last line printed is one JSON
object.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import inspect
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.utils.cpp_extension as cpp_extension
from corpus_builds import ninja_lines, recorded_calls
from corpus_throughput import language, stratified

from evokernel.evaluation.arch_flags import supported_architectures, without_unbuildable_architectures
from evokernel.evaluation.inline_builds import light_cu_arguments, tensor_cu_arguments

PARAMETERS = inspect.signature(cpp_extension.load_inline).parameters


def compile_cu(directory: Path, var: dict[str, str], include: list[str]) -> dict[str, Any]:
    """nvcc of ``directory/cuda.cu`` as its build.ninja's variables ``var`` say: ok, wall and core
    seconds."""
    command = [
        *shlex.split(var["nvcc"]),
        *shlex.split(var["cuda_cflags"]),
        *(f"-I{path}" for path in include),
        *shlex.split(var.get("cuda_post_cflags", "")),
        "-c",
        str(directory / "cuda.cu"),
        "-o",
        str(directory / "cuda.o"),
    ]
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    errors = [line for line in stderr.splitlines() if "error" in line or "fatal" in line][:2]
    return {
        "ok": proc.returncode == 0,
        "wall_s": round(time.monotonic() - started, 2),
        "core_s": round(usage.ru_utime + usage.ru_stime, 2),
        **({"errors": errors} if proc.returncode else {}),
    }


def buildable(call: dict[str, Any]) -> dict[str, Any]:
    """The call less architectures this nvcc cannot build for, as the worker sends it
    (inline_builds.py: ``arch_dropped``)."""
    flags = call.get("extra_cuda_cflags")
    supported = supported_architectures(str(Path(cpp_extension.CUDA_HOME or "", "bin", "nvcc")))
    if not isinstance(flags, list) or not flags or supported is None:
        return call
    fixed = without_unbuildable_architectures(flags, supported)
    return call if fixed is None else {**call, "extra_cuda_cflags": fixed}


def both_ways(name: str, call: dict[str, Any], tensor: dict[str, Any], include: list[str]) -> dict[str, Any]:
    call, tensor = buildable(call), buildable(tensor)
    before = light_cu_arguments(call) or call
    with tempfile.TemporaryDirectory() as tmp:
        ways = (("before", before), ("tensor", tensor))
        variables = {way: ninja_lines(args, Path(tmp) / way) for way, args in ways}
        return {
            "call": name,
            **{way: compile_cu(Path(tmp) / way, var, include) for way, var in variables.items()},
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, required=True, help="a folder with solutions/*/")
    parser.add_argument("--count", default="all", help="files to compile (a stratified sample) or all")
    parser.add_argument("--jobs", type=int, default=2, help="compiles at once")
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        help="a -I directory for every compile (e.g. the CUDA "
        "libraries' headers ATen/cuda/CUDAContext.h needs, where the toolkit lacks them)",
    )
    parser.add_argument("--only", default="", help="only these calls (comma-separated names, as printed)")
    args = parser.parse_args()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # no GPU needed: the H100/H200's arch
    if cpp_extension.CUDA_HOME is None:
        cpp_extension.CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    include = list(args.include)
    stand_in = Path(tempfile.mkdtemp()) / "c10" / "cuda" / "impl"
    if torch.version.cuda is None:  # a CPU-only torch: the header CUDA builds generate
        stand_in.mkdir(parents=True)
        (stand_in / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        include.append(str(stand_in.parents[2]))
    files = sorted(args.corpus.glob("solutions/*/*.py"))
    calls: list[tuple[str, Any, dict[str, Any] | None]] = []
    for path in files:
        if language(path.read_text()) != "cuda":
            continue
        for n, call in enumerate(recorded_calls(path)):
            name = f"{path.parent.name}/{path.stem}:{n}"
            if call.get("cuda_sources") and (not args.only or name in args.only.split(",")):
                calls.append((name, call, tensor_cu_arguments(call, PARAMETERS)))
    eligible = [(n, c, t) for n, c, t in calls if t is not None]
    print(f"{len(calls)} CUDA load_inline calls, {len(eligible)} eligible for the tensor header", flush=True)
    sample = stratified(eligible, args.count)
    rows = []
    with cf.ThreadPoolExecutor(args.jobs) as pool:
        jobs = [pool.submit(both_ways, name, call, tensor, include) for name, call, tensor in sample]
        for job in cf.as_completed(jobs):
            rows.append(job.result())
            print(json.dumps(rows[-1]), flush=True)
    built = [r for r in rows if r["tensor"]["ok"] and r["before"]["ok"]]
    failed = [r for r in rows if not r["tensor"]["ok"] and r["before"]["ok"]]
    before = [r["before"]["core_s"] for r in built]
    after = [r["tensor"]["core_s"] for r in built]
    print(
        json.dumps(
            {
                "machine": f"{os.cpu_count()} CPUs",
                "torch": torch.__version__,
                "calls": len(calls),
                "eligible": len(eligible),
                "compiled": len(rows),
                "built_both_ways": len(built),
                "tensor_failed": len(failed),
                "failed_attempt_core_s": [r["tensor"]["core_s"] for r in failed],
                "before_core_s_median": round(statistics.median(before), 2) if before else None,
                "tensor_core_s_median": round(statistics.median(after), 2) if after else None,
                "saved_core_s_median": (
                    round(statistics.median(b - a for b, a in zip(before, after, strict=True)), 2)
                    if built
                    else None
                ),
                "ratio_median": (
                    round(statistics.median(a / b for b, a in zip(before, after, strict=True)), 3)
                    if built
                    else None
                ),
                "argv": sys.argv[1:],
            }
        )
    )


if __name__ == "__main__":
    main()
