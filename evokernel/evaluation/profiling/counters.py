"""``counters``: Nsight Compute's view of the kernels that take >= 5 % of a call.

The supervisor runs ``ncu`` over a fresh process (:mod:`evokernel.evaluation.profiling.target`)
that rebuilds the model with the same inputs, confines itself as the worker does, warms up, and
makes one call between ``cudaProfilerStart/Stop``; only that call's kernels named in the timeline
are profiled (``-k regex:``), each launch at most :data:`MAX_PROFILED_LAUNCHES` times in all.
``--clock-control none``: Nsight Compute would otherwise lock the GPU's clocks to base for the
replay, and other candidates' timings on the same GPU would see it. The log goes to a directory
the target cannot write, and what it holds is parsed from CSV (``--page raw``).

Per kernel: DRAM and SM throughput (% of peak), achieved and theoretical occupancy, registers per
thread, shared memory per block (static + dynamic) and the top warp-stall reasons (the
WarpStateStats section's stalls per issued instruction).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MIN_SHARE = 0.05
MAX_PROFILED_LAUNCHES = 24
METRICS = (
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
)
SECTIONS = ("WarpStateStats", "Occupancy")
_STALL = re.compile(r"issue_stalled_(\w+?)_per_(?:issue|warp)_active\.ratio$")
_NCU_PLACES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu")


def find_ncu() -> str | None:
    """The ``ncu`` executable: $EVOKERNEL_NCU, PATH, $CUDA_HOME/bin, the usual install places."""
    candidates = [os.environ.get("EVOKERNEL_NCU"), shutil.which("ncu")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(str(Path(os.environ[var]) / "bin" / "ncu"))
    candidates += list(_NCU_PLACES)
    for path in candidates:
        if path and Path(path).is_file() and os.access(path, os.X_OK):
            return path
    return None


def ncu_version(ncu: str) -> str | None:
    try:
        done = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return lines[-1].strip() if done.returncode == 0 and lines else None


def selected(timeline: dict[str, Any]) -> list[dict[str, Any]]:
    """The timeline's kernels that take at least :data:`MIN_SHARE` of the call's GPU time."""
    kernels = timeline.get("kernels") or []
    return [k for k in kernels if k.get("base") and float(k.get("share") or 0.0) >= MIN_SHARE]


def command(ncu: str, log: Path, kernels: list[dict[str, Any]], target: list[str]) -> list[str]:
    names = sorted({str(k["base"]) for k in kernels})
    launches = min(MAX_PROFILED_LAUNCHES, sum(int(k["launches"]) for k in kernels))
    regex = "regex:^(" + "|".join(re.escape(n) for n in names) + ")$"
    cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none", "--target-processes", "all"]
    cmd += ["--metrics", ",".join(METRICS)]
    for section in SECTIONS:
        cmd += ["--section", section]
    cmd += ["-k", regex, "-c", str(max(launches, 1)), "--csv", "--page", "raw", "--print-units", "base"]
    return [*cmd, "--log-file", str(log), *target]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


# Our name for each figure -> Nsight Compute's metric (a column of ``--page raw``).
COLUMNS = {
    "time_ns": "gpu__time_duration.sum",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "registers": "launch__registers_per_thread",
}
MERGED = ("dram_pct", "sm_pct", "occupancy_pct", "theoretical_occupancy_pct", "registers", "smem_bytes")


def parse(text: str) -> list[dict[str, Any]]:
    """One row per profiled launch from ``ncu --csv --page raw`` output (other lines skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    out = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not (row.get("ID") or "").strip().isdigit():
            continue  # the units row
        stalls = []
        for key, value in row.items():
            match = _STALL.search(key or "")
            number = _number(value or "")
            if match and number is not None and "not_issued" not in key and match.group(1) != "selected":
                stalls.append((match.group(1), number))
        found: dict[str, Any] = {"name": row.get("Kernel Name", "")}
        for ours, metric in COLUMNS.items():
            found[ours] = _number(row.get(metric) or "")
        smem = [_number(row.get(f"launch__shared_mem_per_block_{k}") or "") for k in ("static", "dynamic")]
        known = [v for v in smem if v is not None]
        found["smem_bytes"] = sum(known) if known else None
        found["stalls"] = sorted(stalls, key=lambda s: -s[1])[:3]
        out.append(found)
    return out


def merge(timeline_kernels: list[dict[str, Any]], launches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per timeline kernel (its share and time kept), the mean of its profiled launches."""
    merged = []
    for kernel in timeline_kernels:
        mine = [r for r in launches if base_of(str(r["name"])) == kernel["base"]]
        if not mine:
            continue
        row: dict[str, Any] = {"name": kernel["name"], "ms": kernel["ms"], "share": kernel["share"]}
        for key in MERGED:
            values = [float(r[key]) for r in mine if r.get(key) is not None]
            row[key] = round(sum(values) / len(values), 2) if values else None
        row["stalls"] = [[k, round(v, 2)] for k, v in mine[0]["stalls"]]
        row["profiled_launches"] = len(mine)
        merged.append(row)
    return merged


def base_of(name: str) -> str:
    from evokernel.evaluation.profiling.timeline import base_name

    return base_name(name)


def run_counters(
    ncu: str,
    timeline: dict[str, Any],
    workdir: Path,
    request_path: Path,
    mode: str,
    timeout_s: float,
    lock_dir: Path,
) -> dict[str, Any]:
    """Run Nsight Compute over the target for ``timeline``'s main kernels; the merged rows or a reason."""
    kernels = selected(timeline)
    if not kernels:
        return {"status": "skipped: no kernel takes 5 % of the call", "kernels": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evk-ncu-") as tmp:
        log = Path(tmp) / "ncu.csv"
        # -P: the cwd is the candidate's directory, which must never be on the target's sys.path.
        target = [
            sys.executable,
            "-P",
            "-m",
            "evokernel.evaluation.profiling.target",
            str(request_path),
            mode,
        ]
        proc = subprocess.Popen(
            command(ncu, log, kernels, target),
            cwd=workdir,
            env={**os.environ, "TMPDIR": str(lock_dir)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"status": f"failed: Nsight Compute took over {timeout_s:.0f} s", "kernels": []}
        text = log.read_text(errors="replace") if log.exists() else ""
    seconds = round(time.perf_counter() - started, 3)
    rows = merge(kernels, parse(text))
    if not rows:
        errors = [ln for ln in (text + "\n" + (output or "")).splitlines() if "ERR" in ln or "rror" in ln]
        tail = " | ".join(errors[-3:]) or (output or "").strip()[-300:] or f"exit {proc.returncode}"
        return {"status": f"failed: {tail[:400]}", "kernels": [], "seconds": seconds}
    return {"status": "ok", "kernels": rows, "seconds": seconds}
