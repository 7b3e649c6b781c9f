"""How often a fork chain outruns ``sessions.kill_session`` on a crowded, busy node.

The chain: each link forks and exits at once, its child moves to a process group of its own and
sleeps 2 ms, so the live end moves to a new pid ~400 times a second (what a candidate could run
to outlive its kill). The node: ``--others`` sleeping processes (a busy GPU node's evaluations,
their workers and Ray's) and ``--spinners`` busy loops. A trial starts a chain, kills its session
0.5 s later and counts the pids the kernel hands out over the next second: a chain left running
makes hundreds, the node's own forks a few. An escaped chain ends itself at its deadline (6 s).

Usage::

    python3 experiments/bench/fork_chain_kill.py --trials 20 --others 1500

Prints each trial's count, then one JSON line. Session 34 (2-core CPU machine): 19 of 30 chains
escaped at 1,500 others before kill_session probed the newest pids by number, 0 of 30 after.
Leave the machine otherwise idle: another process's forks count too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from evokernel.evaluation import sessions

CHAIN = """
import os, sys, time
deadline = float(sys.argv[1])
while time.time() < deadline:
    if os.fork() != 0:
        os._exit(0)
    os.setpgid(0, 0)
    time.sleep(0.002)
"""
LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
PID_MAX = Path("/proc/sys/kernel/pid_max")
CHAIN_LIFE_S = 6.0


def pids_allocated_in(seconds: float) -> int:
    first = int(LAST_PID.read_text())
    time.sleep(seconds)
    return (int(LAST_PID.read_text()) - first) % int(PID_MAX.read_text())


def trial() -> tuple[int, bool]:
    """(pids allocated in the second after the kill, whether the chain was running before it)."""
    end = time.time() + CHAIN_LIFE_S
    first = subprocess.Popen([sys.executable, "-S", "-c", CHAIN, str(end)], start_new_session=True)
    first.wait(timeout=30)
    time.sleep(0.3)
    running = pids_allocated_in(0.2) > 20
    sessions.kill_session(first.pid)
    time.sleep(0.3)
    after = pids_allocated_in(1.0)
    if after >= 50:
        time.sleep(max(0.0, end - time.time()) + 0.5)  # the escaped chain ends before the next
    return after, running


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--others", type=int, default=1500)
    parser.add_argument("--spinners", type=int, default=2)
    args = parser.parse_args()
    others = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.others)]
    spinners = [
        subprocess.Popen([sys.executable, "-S", "-c", "while True: pass"]) for _ in range(args.spinners)
    ]
    counts: list[int] = []
    started = 0
    try:
        for i in range(args.trials):
            after, running = trial()
            started += running
            counts.append(after)
            note = "" if running else " (chain not seen)"
            print(f"trial {i}: {after} pids in the second after the kill{note}")
    finally:
        for process in others + spinners:
            process.kill()
            process.wait()
    escaped = sum(c >= 50 for c in counts)
    print(
        json.dumps(
            {
                "bench": "fork_chain_kill",
                "trials": args.trials,
                "chains_seen_running": started,
                "others": args.others,
                "spinners": args.spinners,
                "cpus": len(os.sched_getaffinity(0)),
                "escaped": escaped,
                "max_pids_after": max(counts, default=0),
            }
        )
    )


if __name__ == "__main__":
    main()
