"""Benchmark: where a real kernel file's ``load_inline`` build time goes, compile step by step.

    python3 experiments/bench/corpus_builds.py CORPUS/solutions/orig/task_8.py ... [--pch DIR]

Question (issue 23): of the ~50 s a real level-3 CUDA candidate spends in its build, how much is
torch's headers in the ``.cu`` (nvcc's preprocessing, cudafe++, cicc, the host compiler), how much
the generated ``main.cpp`` (pybind11 bindings), and what do the build paths of
``evokernel/evaluation/inline_builds.py`` save? Method: each file is run with ``load_inline``
replaced by a recorder (no build); each recorded call is then given to the real ``load_inline``
with a flag no compiler knows, which writes the ``build.ninja`` and stops; its compile lines are
re-run alone, one process at a time: ``cuda.cu`` as written and with ``torch/types.h`` for
``torch/extension.h`` (``nvcc --time`` gives the phases), ``main.cpp`` without and (``--pch``, a
root from ``python -m evokernel.evaluation.pch``) with the precompiled header. Seconds are wall
seconds of one process (the machine otherwise idle). The link and import are not timed (on a
CPU-only torch there are no CUDA libraries to link). The per-call cost of ``load_inline`` when
nothing needs building (source hashing, ninja's check, the import) is timed on a C++-only
extension. ``--include`` adds a directory to every compile (a CPU-only torch lacks
``c10/cuda/impl/cuda_cmake_macros.h``). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import torch.utils.cpp_extension as cpp_extension

from evokernel.evaluation.inline_builds import light_cu_arguments
from evokernel.evaluation.pch import PROBE_FLAG, header_dir


def recorded_calls(path: Path) -> list[dict[str, Any]]:
    """The keyword arguments of every ``load_inline`` call the file makes at import."""
    calls: list[dict[str, Any]] = []
    real = cpp_extension.load_inline

    def record(*args: Any, **kwargs: Any) -> Any:
        import inspect

        calls.append(dict(inspect.signature(real).bind(*args, **kwargs).arguments))
        return types.SimpleNamespace()

    cpp_extension.load_inline = record  # type: ignore[assignment]
    try:
        with contextlib.suppress(Exception):  # code after the call may use the module: irrelevant
            exec(compile(path.read_text(), str(path), "exec"), {"__name__": "corpus_file"})
    finally:
        cpp_extension.load_inline = real
    return calls


def ninja_lines(call: dict[str, Any], directory: Path) -> dict[str, str]:
    """The variables of the ``build.ninja`` torch writes for this call (the build itself stops at
    the probe flag)."""
    probe = {
        **call,
        "extra_cflags": [*(call.get("extra_cflags") or []), PROBE_FLAG],
        "extra_cuda_cflags": [*(call.get("extra_cuda_cflags") or []), PROBE_FLAG],
        "build_directory": str(directory),
        "verbose": False,
    }
    directory.mkdir(parents=True)
    with contextlib.suppress(RuntimeError):
        cpp_extension.load_inline(**probe)
    text = (directory / "build.ninja").read_text()
    return {k: v.replace(PROBE_FLAG, "") for k, v in re.findall(r"^(\w+) = (.*)$", text, re.M)}


def timed(command: str, cwd: Path) -> tuple[float, str]:
    start = time.monotonic()
    done = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True)
    seconds = round(time.monotonic() - start, 2)
    if done.returncode:
        print(f"FAILED ({seconds} s): {command[:160]}\n{done.stderr[-1500:]}", file=sys.stderr)
        return -seconds, done.stderr
    return seconds, done.stderr


def nvcc_phases(csv: Path) -> dict[str, float]:
    phases: dict[str, float] = {}
    for line in csv.read_text().splitlines()[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 7 and cells[1]:
            phases[cells[1]] = round(phases.get(cells[1], 0.0) + float(cells[6]) / 1000, 2)
    return phases


def one_call(call: dict[str, Any], work: Path, include: str, pch: Path | None) -> dict[str, Any]:
    var = ninja_lines(call, work / "as_written")
    extra = f" -I{include}" if include else ""
    out: dict[str, Any] = {"name": call["name"]}
    built = work / "as_written"
    if (built / "cuda.cu").is_file():
        nvcc = f"{var['nvcc']} {var['cuda_cflags']}{extra} {var.get('cuda_post_cflags', '')}"
        seconds, _ = timed(f"{nvcc} -c {built}/cuda.cu -o w.o --time w.csv", built)
        out["cu_as_written_s"], out["cu_as_written_phases"] = seconds, nvcc_phases(built / "w.csv")
        light = light_cu_arguments(call)
        if light is not None:
            ninja_lines(light, work / "light")  # writes the light cuda.cu
            cu = work / "light" / "cuda.cu"
            seconds, _ = timed(f"{nvcc} -c {cu} -o l.o --time l.csv", work / "light")
            out["cu_light_s"], out["cu_light_phases"] = seconds, nvcc_phases(work / "light" / "l.csv")
    cxx = f"{var['cxx']} {var['cflags']}{extra} {var.get('post_cflags', '')}"
    out["main_cpp_s"], _ = timed(f"{cxx} -c {built}/main.cpp -o m.o", built)
    directory = header_dir(pch, call.get("extra_cflags")) if pch else None
    if directory is not None:
        out["main_cpp_pch_s"], trace = timed(f"{cxx} -I{directory} -H -c {built}/main.cpp -o p.o", built)
        out["pch_used"] = "! " in trace
    return out


def per_call_overhead(work: Path) -> float:
    """Seconds a fresh interpreter spends in a ``load_inline`` call whose extension is already
    built (the checks, ninja's no-op, the import): median of 3, less the same interpreter without
    the call."""
    args = {"name": "evk_noop", "cpp_sources": "int one() { return 1; }", "functions": ["one"]}
    work.mkdir(parents=True)
    call = f"c.load_inline(**{args!r}, build_directory={str(work)!r})"
    subprocess.run([sys.executable, "-c", f"import torch.utils.cpp_extension as c; {call}"], check=True)

    def median_run(code: str) -> float:
        samples = []
        for _ in range(3):
            start = time.monotonic()
            subprocess.run([sys.executable, "-c", code], check=True)
            samples.append(time.monotonic() - start)
        return statistics.median(samples)

    bare = median_run("import torch.utils.cpp_extension as c")
    return round(median_run(f"import torch.utils.cpp_extension as c; {call}") - bare, 3)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument(
        "--pch", type=Path, help="a precompiled-header root (python -m evokernel.evaluation.pch)"
    )
    parser.add_argument("--include", default="", help="an extra -I directory for every compile")
    args = parser.parse_args()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")  # no GPU here: the H100/H200's arch
    if cpp_extension.CUDA_HOME is None and os.environ.get("CUDA_HOME"):
        cpp_extension.CUDA_HOME = os.environ["CUDA_HOME"]  # a CPU-only torch looks for none
    results: dict[str, Any] = {"machine": f"{os.cpu_count()} CPUs", "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        results["load_inline_no_build_s"] = per_call_overhead(Path(tmp) / "noop")
        for path in args.files:
            calls = recorded_calls(path)
            results["files"][f"{path.parent.name}/{path.name}"] = [
                one_call(call, Path(tmp) / f"{path.stem}_{n}", args.include, args.pch)
                for n, call in enumerate(calls)
            ]
            print(json.dumps(results["files"][f"{path.parent.name}/{path.name}"]), flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
