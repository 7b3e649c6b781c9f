"""Is the host's slow launch path an idle machine? (issue 35)

On the H200 host of sessions 26-27 the eager dispatch path (host_clock.dispatch_us: one-element
``add_`` launches) reads ~6.5-7.5 us a launch or ~9-11 us, from one second to the next, with every
CPU spin fast; a host-bound eager reference's calls follow it and pairing cannot cancel that. In
session 27 the quiet list (one candidate at a time, the node otherwise idle) read fast in 51 % of
its rounds against 61-70 % under the pool's load, its 5th percentile 6.98 against 6.50 us: as if
the launch path were slower the quieter the machine. Two causes would look like that: the CPU
package's idle states (an idle package clocks its uncore, which carries the MMIO doorbell writes,
down) and the GPU's or its link's (an idle GPU's PCIe link in a low-power state).

This times the dispatch path, on one pinned CPU as a timing window does, in windows of three
conditions in shuffled blocks (each block one window of each, so the host's drift falls on all):

* ``alone``: nothing else runs;
* ``cpus_busy``: ``--busy`` spinning processes on other CPUs (kept stopped between windows);
* ``gpu_busy``: a long GPU sleep kernel on a side stream through the window;
* ``link_busy``: another process copying 1 MiB host-to-device back to back through the window
  (kept stopped between windows): the PCIe traffic of a loaded pool's other processes.

Every reading has the PCIe generation the GPU's link ran at beside it (clocks.pcie_link_gen), and
the summary splits the readings by it (``by_link_gen``): an idle GPU drops its link to a lower
generation, and a launch crosses it. Session 28 (H200): alone 10 % fast, cpus_busy 8 %, gpu_busy
22 %, against 56-65 % of the readings inside loaded runs' windows.

Per condition: the readings' median, p10 and p90, and the share of readings in the fast state
(within ``--limit`` of the 5th percentile of all readings), then, last, one JSON line. If
``cpus_busy`` reads fast where ``alone`` does not, the slow state is the idle package; if
``gpu_busy`` does, the idle GPU; if ``link_busy`` does or the fast readings are the high link
generation's, the idle link. None: the cause is elsewhere (the driver, the kernel).

    python3 experiments/bench/launch_state.py [--blocks 15] [--window-s 1.5] [--busy 8]
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
import time
from pathlib import Path
from typing import Any

import torch
from round_figures import by_link_gen

from evokernel.evaluation.clocks import pcie_link_gen
from evokernel.evaluation.host_clock import dispatch_us

CONDITIONS = ("alone", "cpus_busy", "gpu_busy", "link_busy")
SPINNER = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"
READING_GAP_S = 0.05  # spun between dispatch readings inside a window (each ~1 ms of launches)
GPU_CYCLES_PER_S = 2.0e9  # an H100's or H200's top SM clock (1.98 GHz): the sleep outlasts the window
SETTLE_S = 0.1  # after a condition is set up (spinners continued, the sleep queued), every window
COPIER = (
    "import os, sys, torch\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "src = torch.empty(1 << 20, dtype=torch.uint8).pin_memory()\n"
    "dst = torch.empty(1 << 20, dtype=torch.uint8, device='cuda')\n"
    "dst.copy_(src); torch.cuda.synchronize(); print('ready', flush=True)\n"
    "while True:\n"
    "    dst.copy_(src, non_blocking=True); torch.cuda.synchronize()\n"
)
ASPM_POLICY = Path("/sys/module/pcie_aspm/parameters/policy")


def aspm_policy() -> str | None:
    """The host's PCIe active-state power management policy, where the kernel shows it."""
    try:
        return ASPM_POLICY.read_text().strip()
    except OSError:
        return None


def cpu_mhz(cpu: int) -> float | None:
    """The measuring CPU's current clock, where the kernel shows it (a container may not)."""
    try:
        return int(Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq").read_text()) / 1e3
    except (OSError, ValueError):
        return None


def window_median(w: dict[str, Any]) -> float | None:
    return round(statistics.median(w["readings"]), 2) if w["readings"] else None


def quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def window(
    condition: str,
    seconds: float,
    device: torch.device,
    spinners: list[subprocess.Popen[bytes]],
    copier: subprocess.Popen[bytes] | None,
    cpu: int,
) -> dict[str, Any]:
    # The probe on a stream of its own in every condition, so a busy side stream never holds its
    # wait (dispatch_us would otherwise synchronize the whole device).
    probe = torch.cuda.Stream(device) if device.type == "cuda" else None
    side = torch.cuda.Stream(device) if device.type == "cuda" else None
    if condition == "cpus_busy":
        for p in spinners:
            os.kill(p.pid, signal.SIGCONT)
    if condition == "link_busy" and copier is not None:
        if copier.poll() is not None:
            raise SystemExit(f"the link_busy copier died (exit code {copier.returncode})")
        os.kill(copier.pid, signal.SIGCONT)
    if condition == "gpu_busy" and side is not None:
        with torch.cuda.stream(side):
            torch.cuda._sleep(int((seconds + 0.2) * GPU_CYCLES_PER_S))
    time.sleep(SETTLE_S)
    readings, links, mhz = [], [], []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        reading = dispatch_us(device, probe)
        if reading is not None:
            readings.append(reading)
            links.append(pcie_link_gen(device))  # after: the link the reading crossed
        mhz.append(cpu_mhz(cpu))
        # Busy between readings, as a window's thread is between rounds (it times blocks).
        gap_end = time.perf_counter() + READING_GAP_S
        while time.perf_counter() < gap_end:
            pass
    if condition == "cpus_busy":
        for p in spinners:
            os.kill(p.pid, signal.SIGSTOP)
    if condition == "link_busy" and copier is not None:
        os.kill(copier.pid, signal.SIGSTOP)
    if side is not None:
        side.synchronize()
    clocks = [m for m in mhz if m is not None]
    return {
        "condition": condition,
        "readings": readings,
        "links": links,
        "cpu_mhz": statistics.median(clocks) if clocks else None,
    }


def fast_share(readings: list[float], ceiling: float) -> float:
    return sum(r <= ceiling for r in readings) / len(readings)


def link_readings(windows: list[dict[str, Any]]) -> list[tuple[float, object]]:
    """Every window's readings beside the PCIe generation read after each."""
    return [pair for w in windows for pair in zip(w["readings"], w["links"], strict=True)]


def summary(windows: list[dict[str, Any]], limit: float) -> dict[str, Any]:
    every = sorted(r for w in windows for r in w["readings"])
    if not every:
        return {"readings": 0}
    ceiling = limit * quantile(every, 0.05)
    out: dict[str, Any] = {"fast_ceiling_us": round(ceiling, 2)}
    for condition in CONDITIONS:
        mine = [w for w in windows if w["condition"] == condition]
        values = sorted(r for w in mine for r in w["readings"])
        if not values:
            continue
        shares = [
            sum(r <= ceiling for r in w["readings"]) / len(w["readings"]) for w in mine if w["readings"]
        ]
        clocks = [w["cpu_mhz"] for w in mine if w["cpu_mhz"] is not None]
        out[condition] = {
            "windows": len(mine),
            "readings": len(values),
            "median_us": round(statistics.median(values), 2),
            "p10_us": round(quantile(values, 0.1), 2),
            "p90_us": round(quantile(values, 0.9), 2),
            "fast_share": round(fast_share(values, ceiling), 3),
            "windows_all_slow": sum(s == 0 for s in shares),
            "windows_all_fast": sum(s == 1 for s in shares),
            "cpu_mhz": round(statistics.median(clocks)) if clocks else None,
            "by_link_gen": by_link_gen(link_readings(mine), ceiling),
        }
    out["by_link_gen"] = by_link_gen(link_readings(windows), ceiling)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--blocks", type=int, default=15, help="each one window of every condition")
    parser.add_argument("--window-s", type=float, default=1.5)
    parser.add_argument("--busy", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="spinning CPUs")
    parser.add_argument("--limit", type=float, default=1.15, help="of the 5th percentile: the fast state")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    device = torch.device(args.device)
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1]
    os.sched_setaffinity(0, {cpu})  # the measuring thread on one CPU, as a timing window's
    others = [c for c in cpus if c != cpu]
    # The copier on a CPU of its own (neither the measuring one nor a spinner's, where there is
    # one), so link_busy adds traffic on the link, not a busy CPU.
    copier_cpu = others[-1] if others else cpu
    others = [c for c in others if c != copier_cpu][: args.busy] or others[: args.busy]
    spinners: list[subprocess.Popen[bytes]] = []
    copier = None
    rng = random.Random(args.seed)
    windows = []
    try:
        if device.type == "cuda":
            copier = subprocess.Popen([sys.executable, "-c", COPIER, str(copier_cpu)], stdout=subprocess.PIPE)
            assert copier.stdout is not None
            if copier.stdout.readline() != b"ready\n":  # its context made, its first copy done
                raise SystemExit(f"the link_busy copier did not start (exit code {copier.wait()})")
            os.kill(copier.pid, signal.SIGSTOP)
        spinners += [subprocess.Popen([sys.executable, "-c", SPINNER, str(c)]) for c in others]
        for p in spinners:
            os.kill(p.pid, signal.SIGSTOP)
        if device.type == "cuda":
            torch.zeros(1, device=device).add_(1)  # the context, before the first window
        for block in range(args.blocks):
            order = list(CONDITIONS)
            rng.shuffle(order)
            for condition in order:
                time.sleep(rng.uniform(0.2, 0.8))  # windows come after varying idle, as in a pool
                windows.append(window(condition, args.window_s, device, spinners, copier, cpu))
            print(f"block {block + 1}/{args.blocks}", flush=True)
    finally:
        for p in [*spinners, *([copier] if copier is not None else [])]:
            p.kill()
            p.wait()
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "measuring_cpu": cpu,
        "busy_cpus": len(others),
        "copier_cpu": copier_cpu if copier is not None else None,
        "window_s": args.window_s,
        "aspm_policy": aspm_policy(),
        **summary(windows, args.limit),
        # Each window's median reading in the order timed: whether the state follows the condition.
        "sequence": [
            (w["condition"], round(statistics.median(w["readings"]), 2) if w["readings"] else None)
            for w in windows
        ],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
