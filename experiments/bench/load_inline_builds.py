"""Benchmark: where a CUDA ``load_inline`` build's time goes on this node (GPU machine, needs nvcc).

    python3 experiments/bench/load_inline_builds.py                      # phases, PCH, 10 at once
    python3 experiments/bench/load_inline_builds.py --concurrent 0      # phases and PCH only

Question (pool issue): can 10 ``load_inline`` candidates be built fast enough for >= 15/min on
one node, and what would a precompiled torch header buy? Method: one candidate of each layout of
``throughput_candidates.py`` is built by ``load_inline`` itself (wall seconds); its ``build.ninja``
gives the exact compile lines, which are then re-run alone: ``main.cpp`` with g++, ``cuda.cu`` with
``nvcc --time`` (per phase), ``main.cpp`` against a ``torch/extension.h.gch`` built with the same
flags (``-Winvalid-pch -H`` shows it was used), and ``nvcc -t 2``. Finally ``--concurrent`` distinct
kernelbench-layout candidates are built at once (``MAX_JOBS=2`` each), as the pool does. Seconds
are of child CPU time where the line says ``cpu``. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from throughput_candidates import cuda_candidates


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def shell(command: str, cwd: Path) -> tuple[float, float, str]:
    """(wall s, child cpu s, stderr) of one compile line; a failure is printed, not hidden."""
    cpu, start = child_cpu(), time.monotonic()
    done = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        print(f"FAILED: {command[:200]}\n{done.stderr[-2000:]}", file=sys.stderr)
    return round(time.monotonic() - start, 2), round(child_cpu() - cpu, 2), done.stderr


def build(source: str, directory: Path, jobs: int) -> float:
    """Wall seconds of the candidate's own ``load_inline`` call, in a fresh interpreter."""
    directory.mkdir(parents=True, exist_ok=True)
    module = directory / "candidate.py"
    module.write_text(source.replace("verbose=False", f"verbose=False, build_directory={str(directory)!r}"))
    code = f"import runpy; runpy.run_path({str(module)!r})"
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "MAX_JOBS": str(jobs)},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        print(f"BUILD FAILED in {directory}:\n{done.stderr[-2000:]}", file=sys.stderr)
    return round(time.monotonic() - start, 2)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrent", type=int, default=10, help="builds at once at the end (0: skip)")
    args = parser.parse_args()
    results: dict[str, object] = {"cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for layout in ("kernelbench", "lean"):
            results[f"{layout}_one_build_s"] = build(cuda_candidates(layout)[0][2], root / layout, 2)
        ninja = (root / "kernelbench" / "build.ninja").read_text()
        var = dict(re.findall(r"^(\w+) = (.*)$", ninja, re.M))
        cxx, nvcc, post = var["cxx"], var["nvcc"], var.get("post_cflags", "")
        cflags, cuda_cflags = var["cflags"], var["cuda_cflags"]
        work, built = root / "work", root / "kernelbench"
        work.mkdir()
        results["main_cpp_cpu_s"] = shell(f"{cxx} {cflags} -c {built}/main.cpp -o m.o {post}", work)[1]
        results["cuda_cu_cpu_s"] = shell(
            f"{nvcc} {cuda_cflags} -c {built}/cuda.cu -o c.o --time t.csv", work
        )[1]
        phases = {}
        for row in (work / "t.csv").read_text().splitlines()[1:]:
            cells = [c.strip() for c in row.split(",")]
            if len(cells) >= 8 and cells[1]:
                phases[cells[1]] = round(float(cells[6]) / 1000, 2)
        results["cuda_cu_phases_s"] = phases
        include = re.search(r"-isystem (\S+/torch/include) ", cflags)
        assert include, "no torch include directory in the ninja cflags"
        # Built without the per-extension name define, which torch/extension.h never reads.
        pch_flags = re.sub(r"-DTORCH_EXTENSION_NAME=\S+", "", cflags)
        (root / "pch" / "torch").mkdir(parents=True)
        gch = root / "pch" / "torch" / "extension.h.gch"
        header = f"{include.group(1)}/torch/extension.h"
        results["pch_build_cpu_s"] = shell(f"{cxx} {pch_flags} -x c++-header {header} -o {gch} {post}", work)[
            1
        ]
        results["pch_mb"] = round(gch.stat().st_size / 2**20, 1)
        _, cpu, trace = shell(
            f"{cxx} -I {root / 'pch'} -Winvalid-pch -H {cflags} -c {built}/main.cpp -o m2.o", work
        )
        results["main_cpp_pch_cpu_s"], results["pch_used"] = cpu, f"! {gch}" in trace
        results["cuda_cu_t2_wall_s"] = shell(f"{nvcc} {cuda_cflags} -t 2 -c {built}/cuda.cu -o c2.o", work)[0]
        print(json.dumps(results), flush=True)
        if args.concurrent:
            sources = [c[2] for c in cuda_candidates("kernelbench")][: args.concurrent]
            start = time.monotonic()
            with cf.ThreadPoolExecutor(len(sources)) as pool:
                walls = list(pool.map(lambda i: build(sources[i], root / f"many{i}", 2), range(len(sources))))
            results["concurrent"] = {
                "builds": len(sources),
                "total_wall_s": round(time.monotonic() - start, 1),
                "median_build_s": sorted(walls)[len(walls) // 2],
            }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
