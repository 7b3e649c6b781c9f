"""Which processes and threads used a set of cores over a while (issue 37's split cluster).

Every ``--interval`` s it reads each thread's CPU time and the CPU it last ran on
(``/proc/PID/task/TID/stat``) and charges the CPU time since the last reading to that CPU: a
sampled picture (a thread that moved between readings is charged to where it ended), good to
name what else ran on a GPU node's cores while its timing windows found their CPU contended.
Prints the top tenants of ``--cores`` (process name / thread name, core-seconds) and of the
other cores, and last one JSON line.

Usage (pin it off the cores it watches)::

    taskset -c 15 python3 experiments/bench/cpu_tenants.py --cores 0-3 --seconds 120
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_set(spec: str) -> set[int]:
    """``0-3,8`` as {0, 1, 2, 3, 8}."""
    cores: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        cores.update(range(int(low), int(high or low) + 1))
    return cores


def process_name(pid: str) -> str:
    """Ray's process titles (``ray::EvaluatorWorker.evaluate``, ``raylet``) or the command's name."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    first = argv[0].decode(errors="replace")
    if first.startswith("ray::") or not first:
        return first.split(" ")[0] or "?"
    name = Path(first).name
    if name.startswith("python") and len(argv) > 1:  # the script or module it runs
        rest = [a.decode(errors="replace") for a in argv[1:3]]
        script = rest[1] if rest[0] == "-m" and len(rest) > 1 else rest[0]
        return f"{name} {Path(script).name}"
    return name


def threads() -> dict[tuple[str, str], tuple[str, int, int]]:
    """(pid, tid) -> (thread name, CPU ticks so far, last CPU), for every thread readable."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            out[pid, tid] = (name, int(fields[11]) + int(fields[12]), int(fields[36]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cores", default="0-3", help="the cores to name the tenants of")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    watched = cpu_set(args.cores)
    names: dict[str, str] = {}
    on_watched: Counter[tuple[str, str]] = Counter()
    elsewhere: Counter[str] = Counter()
    before, start = threads(), time.monotonic()
    while time.monotonic() - start < args.seconds:
        time.sleep(args.interval)
        now = threads()
        for key, (thread, ticks, cpu) in now.items():
            used = ticks - before.get(key, (thread, ticks, cpu))[1] if key in before else 0
            if used <= 0:
                continue
            process = names.setdefault(key[0], process_name(key[0]))
            if cpu in watched:
                on_watched[process, thread] += used
            else:
                elsewhere[process] += used
        before = now
    wall = time.monotonic() - start
    total = sum(on_watched.values()) / TICKS
    share = total / wall / len(watched)
    print(f"cores {args.cores}: {total:.1f} core-s of {wall * len(watched):.0f} ({share:.1%})")
    for (process, thread), ticks in on_watched.most_common(args.top):
        print(f"  {ticks / TICKS:8.1f}  {process} / {thread}")
    print(f"other cores: {sum(elsewhere.values()) / TICKS:.1f} core-s")
    for process, ticks in elsewhere.most_common(8):
        print(f"  {ticks / TICKS:8.1f}  {process}")
    by_process: Counter[str] = Counter()
    for (process, _), ticks in on_watched.items():
        by_process[process] += ticks
    print(
        json.dumps(
            {
                "cores": args.cores,
                "wall_s": round(wall, 1),
                "busy_share": round(share, 3),
                "by_process_core_s": {p: round(t / TICKS, 1) for p, t in by_process.most_common(args.top)},
                "by_thread_core_s": {
                    f"{p} / {t}": round(n / TICKS, 1) for (p, t), n in on_watched.most_common(args.top)
                },
                "elsewhere_core_s": {p: round(t / TICKS, 1) for p, t in elsewhere.most_common(8)},
            }
        )
    )


if __name__ == "__main__":
    main()
