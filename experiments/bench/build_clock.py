"""A build's own clock under load (issue 37): what does the node take from a build, and does the
clock give exactly that back?

A real confined build through the object cache (``ObjectCache.answer``, as a supervisor makes
one): a pybind11 CPU extension whose compile is ~4 s of one core (a constexpr loop), with fresh
cache roots so every build compiles. Each run is one of:

* ``alone``: nothing else runs;
* ``busy N``: N spinning processes per CPU of this process's affinity (the load of a node whose
  other candidates compile and check), started before the build;
* ``stopped S``: the build's session stopped for S s once its compiler runs (a quiet window:
  quiet.py stops every compiler of the node while a candidate is timed).

Per run: the build's wall seconds, its core-seconds (``wait4``), what the clock says it was held
back (``held_s``) and the wall less that (``own_s``): if the clock is right, ``own_s`` stays at
``alone``'s wall whatever the load, while the wall grows. Conditions run in shuffled rounds.
Prints a table, then one JSON line.

    python3 experiments/bench/build_clock.py [--rounds 3] [--busy 1 2] [--stop 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evokernel.evaluation import sessions
from evokernel.evaluation.object_cache import ObjectCache

SHIM = """#include <pybind11/pybind11.h>
namespace torch { template <class F> F wrap_pybind_function(F f) { return f; } }
constexpr long spin(long n) { long s = 0;
  for (long i = 0; i < n; ++i) for (long j = 0; j < 1000; ++j) s += (i ^ j) % 7; return s; }
static_assert(spin(3000) >= 0, "");
"""


FIGURES = ("wall_s", "cpu_s", "held_s", "own_s")


def build_call(n: int) -> dict[str, Any]:
    return {
        "name": f"evk_clock_{n}",
        "cpp_sources": [f"{SHIM}int add_{n}(int x) {{ return x + {n}; }}\n"],
        "functions": [f"add_{n}"],
        "no_implicit_headers": True,
        "extra_cflags": ["-fconstexpr-ops-limit=100000000000"],
    }


@contextmanager
def spinners(per_cpu: int) -> Any:
    cpus = sorted(os.sched_getaffinity(0))
    code = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(c)]) for c in cpus for _ in range(per_cpu)]
    try:
        time.sleep(0.3)
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def stopper(root: Path, stop_s: float) -> threading.Thread:
    """Stop the session of the build staged under ``root`` for ``stop_s`` once it compiles."""

    def find() -> int | None:
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    command = Path(f"/proc/{entry.name}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"object_build" in command and str(root).encode() in command:
                    return os.getsid(int(entry.name))
        return None

    def stop() -> None:
        end = time.monotonic() + 60
        sid = None
        while sid is None and time.monotonic() < end:
            sid = find()
            time.sleep(0.02)
        if sid is None:
            return
        time.sleep(0.3)
        members = sessions.session_members(sid, zombies=False)
        for pid in members:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(stop_s)
        for pid in members:
            os.kill(pid, signal.SIGCONT)

    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    return thread


def one(condition: str, n: int, isolation: str) -> dict[str, Any]:
    import torch.utils.cpp_extension as cpp_extension

    with tempfile.TemporaryDirectory(prefix="evk-clock-") as tmp:
        root = Path(tmp)
        cache = ObjectCache(root, isolation, [], {"PATH": "/usr/bin:/bin"}, max_held_s=600.0)
        cpp_extension.JIT_EXTENSION_VERSIONER.entries.pop(f"evk_clock_{n}", None)
        kind, _, amount = condition.partition(" ")
        thread = stopper(root, float(amount)) if kind == "stopped" else None
        start = time.perf_counter()
        if kind == "busy":
            with spinners(int(amount)):
                start = time.perf_counter()
                reply = cache.answer(build_call(n), start + 600)
        else:
            reply = cache.answer(build_call(n), start + 600)
        wall = time.perf_counter() - start
        if thread is not None:
            thread.join()
    if "object" not in reply:
        raise SystemExit(f"the build failed: {reply}")
    return {
        "condition": condition,
        "wall_s": round(wall, 3),
        "cpu_s": round(cache.build_cpu_s, 3),
        "held_s": round(cache.held_s, 3),
        "own_s": round(wall - cache.held_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, nargs="*", default=[1, 2], help="spinners per CPU")
    parser.add_argument("--stop", type=float, nargs="*", default=[5.0], help="seconds stopped")
    parser.add_argument("--isolation", default="required")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    conditions = ["alone", *(f"busy {b}" for b in args.busy), *(f"stopped {s:g}" for s in args.stop)]
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    n = 0
    for r in range(args.rounds):
        order = conditions[:]
        rng.shuffle(order)
        for condition in order:
            n += 1
            row = {"round": r, **one(condition, n, args.isolation)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("| condition | wall s | core s | held s | own s (wall - held) |")
    print("|---|---|---|---|---|")
    summary: dict[str, Any] = {}
    for condition in conditions:
        mine = [r for r in rows if r["condition"] == condition]
        med = {k: round(statistics.median(r[k] for r in mine), 3) for k in FIGURES}
        summary[condition] = med
        print(f"| {condition} | {med['wall_s']} | {med['cpu_s']} | {med['held_s']} | {med['own_s']} |")
    alone = summary["alone"]["own_s"]
    own_ratio = {c: round(s["own_s"] / alone, 3) for c, s in summary.items()}
    print(
        json.dumps(
            {
                "bench": "build_clock",
                "cpus": len(os.sched_getaffinity(0)),
                "rounds": args.rounds,
                "medians": summary,
                "own_over_alone": own_ratio,
            }
        )
    )


if __name__ == "__main__":
    main()
