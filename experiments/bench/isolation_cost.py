"""Benchmark: what the candidate isolation (Landlock + seccomp, evaluation/isolation.py) adds per
candidate on the fork-server path, the pool's path.

    python experiments/bench/isolation_cost.py              # 12 pairs on CPU (Triton interpreter)
    python experiments/bench/isolation_cost.py --pairs 30 --device cuda

Method. One warm ``ForkServer``; the same legit candidate (the axpy seed: a Triton kernel, correct)
evaluated in pairs, isolation ``off`` and ``required`` side by side in one run, the order
alternating per pair (ABBA) so drift of a shared machine falls on both. Figures, medians over the
pairs:

* ``apply_ms``: the worker's own time to build and enter the Landlock domain and install the seccomp
  filter (``details["isolation"]["apply_ms"]``), the direct cost;
* ``build_s`` and ``wall_s`` with and without, and their paired differences: the end-to-end view,
  where the direct cost is far below the noise of a multi-second evaluation;
* ``fork_ms``: the alternatives side by side, each a fork of this process that does one thing and
  exits: nothing, ``confine`` (the layers evokernel uses), ``unshare(CLONE_NEWNET)`` (root only) and
  ``unshare(CLONE_NEWUSER | CLONE_NEWNET)`` (unprivileged user namespaces), the network namespace
  that ``unshare --net`` or bubblewrap would give; ``null`` where the kernel refused;
* ``session_sweep_ms``: the /proc scan that kills a candidate's whole session (sessions.py), paid
  by every candidate in every mode, timed here on its own.

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evokernel.config.schema import TimingConfig
from evokernel.evaluation import isolation, sessions
from evokernel.evaluation.forkserver import ForkServer
from evokernel.evaluation.request import build_request
from evokernel.evaluation.sandbox import run_sandboxed
from evokernel.tasks import load_task
from evokernel.types import Status

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tests" / "fixtures" / "tasks" / "axpy.py"
FAST = TimingConfig(warmup_ms=1, min_reps=3, max_reps=10, max_ms=30)


def stage_s(details: dict[str, Any], name: str) -> float:
    return next(float(s["seconds"]) for s in details["stages"] if s["stage"] == name)


CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000


def forked_ms(step: Callable[[], bool], repeats: int = 30) -> float | None:
    """Median ms of fork + ``step`` + exit + wait; None when ``step`` failed."""
    times = []
    for _ in range(repeats):
        read, write = os.pipe()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                ok = step()
            finally:
                os.write(write, b"1" if ok else b"0")
                os._exit(0)
        ok = os.read(read, 1) == b"1"
        os.waitpid(pid, 0)
        times.append(1000 * (time.perf_counter() - start))
        os.close(read)
        os.close(write)
        if not ok:
            return None
    return round(statistics.median(times), 3)


def alternatives() -> dict[str, float | None]:
    libc = ctypes.CDLL(None, use_errno=True)
    isolation.machine_paths()
    with tempfile.TemporaryDirectory(prefix="evk-bench-isolation-") as tmp:
        return {
            "nothing": forked_ms(lambda: True),
            "landlock+seccomp": forked_ms(lambda: bool(isolation.confine("required", Path(tmp), []))),
            "netns": forked_ms(lambda: libc.unshare(CLONE_NEWNET) == 0),
            "userns+netns": forked_ms(lambda: libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    support = isolation.check("required")
    task = load_task(TASK)
    assert task.seed_source is not None
    base = build_request(
        task,
        task.seed_source,
        device=args.device,
        scale="small" if args.device == "cpu" else "full",
        timing=FAST,
    )
    rows: dict[str, list[dict[str, float]]] = {"off": [], "required": []}
    with tempfile.TemporaryDirectory(prefix="evk-bench-isolation-") as root:
        server = ForkServer(args.device, Path(root))
        try:
            server.wait_ready()
            run_sandboxed({**base, "isolation": "off"}, 120, launcher=server.spawn)  # warm caches
            for pair in range(args.pairs):
                order = ("off", "required") if pair % 2 == 0 else ("required", "off")
                for mode in order:
                    start = time.perf_counter()
                    ev = run_sandboxed({**base, "isolation": mode}, 120, launcher=server.spawn)
                    wall = time.perf_counter() - start
                    if ev.status is not Status.CORRECT:
                        raise SystemExit(f"{mode}: {ev.status.value}: {ev.reason}")
                    applied = ev.details.get("isolation", {})
                    rows[mode].append(
                        {
                            "wall_s": wall,
                            "build_s": stage_s(ev.details, "build"),
                            "apply_ms": float(applied.get("apply_ms", 0.0)),
                        }
                    )
                print(
                    f"pair {pair + 1}/{args.pairs}: "
                    + ", ".join(f"{m} {rows[m][-1]['wall_s']:.3f} s" for m in order),
                    flush=True,
                )
        finally:
            server.close()
    sweeps = []
    for _ in range(50):
        start = time.perf_counter()
        sessions.kill_session(-1)  # no session has id -1: the scan alone
        sweeps.append(1000 * (time.perf_counter() - start))

    def median(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[mode])

    def paired(key: str) -> float:
        return statistics.median(b[key] - a[key] for a, b in zip(rows["off"], rows["required"], strict=True))

    result = {
        "bench": "isolation_cost",
        "device": args.device,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, kernel {platform.release()}",
        "landlock_abi": support.landlock_abi,
        "seccomp": support.seccomp,
        "pairs": args.pairs,
        "apply_ms_median": round(median("required", "apply_ms"), 3),
        "apply_ms_max": round(max(r["apply_ms"] for r in rows["required"]), 3),
        "build_s_median": {m: round(median(m, "build_s"), 4) for m in rows},
        "wall_s_median": {m: round(median(m, "wall_s"), 4) for m in rows},
        "added_build_ms_paired_median": round(1000 * paired("build_s"), 2),
        "added_wall_ms_paired_median": round(1000 * paired("wall_s"), 2),
        "fork_ms": alternatives(),
        "uid": os.getuid(),
        "session_sweep_ms_median": round(statistics.median(sweeps), 3),
        "processes_scanned": len(os.listdir("/proc")),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
