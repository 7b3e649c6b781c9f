"""GPU clock readings that go beside a timing: what the SM clock was while the figure was taken.

Read, never set: evokernel does not lock clocks or change persistence mode, so a timing says what
the clock was instead. :func:`clock_state` asks NVML through NVIDIA's own binding
(``nvidia-ml-py``, imported as ``pynvml``; microseconds per query: ``torch.cuda.clock_rate``
averages over a 1/6-1 s sample period). :func:`gpu_clocks` asks ``nvidia-smi`` (tens of
milliseconds, a subprocess) and is for once-per-run records. Both return ``{}`` where there is
nothing to ask (no GPU, no driver library, no binding installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import torch

from evokernel.evaluation.host_clock import wait_gpu_quiet

# nvmlClocksEventReasons bits (nvml.h), as the labels a timing record carries.
_REASONS = {
    0x1: "idle",
    0x2: "application-clocks",
    0x4: "sw-power-cap",
    0x8: "hw-slowdown",
    0x10: "sync-boost",
    0x20: "sw-thermal",
    0x40: "hw-thermal",
    0x80: "hw-power-brake",
    0x100: "display-clocks",
}

_nvml: dict[str, Any] = {}


def _library() -> Any:
    """The initialised ``pynvml`` module, or None; tried once per process."""
    if "lib" not in _nvml:
        _nvml["lib"] = None
        try:
            import pynvml
        except ImportError:
            return None  # the binding is not installed here: clock readings are simply absent
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:
            return None  # no driver library here (a CPU machine), or NVML refused to start
        _nvml["lib"] = pynvml
    return _nvml["lib"]


def _handle(nvml: Any, device: torch.device) -> Any:
    uuid = f"GPU-{torch.cuda.get_device_properties(device).uuid}"
    if uuid not in _nvml:
        try:
            _nvml[uuid] = nvml.nvmlDeviceGetHandleByUUID(uuid.encode())
        except nvml.NVMLError:
            _nvml[uuid] = None
    return _nvml[uuid]


def _nvml_for(device: torch.device) -> tuple[Any, Any]:
    """``(pynvml, the device's handle)``; the handle is None where there is nothing to ask (a CPU
    device, no driver library, no binding)."""
    if device.type != "cuda":
        return None, None
    nvml = _library()
    return nvml, (_handle(nvml, device) if nvml is not None else None)


def _ask(nvml: Any, name: str, handle: Any, *args: int) -> int | None:
    """One NVML query; None when it fails or the driver predates the entry point."""
    try:
        return int(getattr(nvml, name)(handle, *args))
    except (nvml.NVMLError, AttributeError):
        return None


def _reasons(nvml: Any, handle: Any) -> list[str] | None:
    # The 'ClocksEvent' name is the current one (driver >= 535); 'ClocksThrottle' the older alias.
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        mask = _ask(nvml, name, handle)
        if mask is not None:
            return [label for bit, label in _REASONS.items() if mask & bit]
    return None


def sm_clock_mhz(device: torch.device) -> int | None:
    """The SM clock now (one NVML query), or None where NVML is not there."""
    nvml, handle = _nvml_for(device)
    if handle is None:
        return None
    return _ask(nvml, "nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM)


def pcie_link_gen(device: torch.device) -> int | None:
    """The PCIe generation the GPU's link runs at now (one NVML query), or None where NVML is not
    there. A GPU drops its link to a lower generation when idle to save power; a launch's doorbell
    write and command fetch cross that link, so the eager dispatch path may follow it (issue 35:
    the H200 host's ~7 against ~10 us launch states, slow in 90 % of an idle process's readings,
    session 28's launch_state.py)."""
    nvml, handle = _nvml_for(device)
    if handle is None:
        return None
    return _ask(nvml, "nvmlDeviceGetCurrPcieLinkGeneration", handle)


def clock_state(device: torch.device) -> dict[str, Any]:
    """``{"sm_mhz", "max_sm_mhz", "temp_c", "power_w", "reasons"}`` from NVML, or ``{}``.

    ``reasons`` lists why the clock is below its maximum right now (``sw-power-cap``, ``hw-thermal``,
    ``idle``, ...); an empty list means nothing holds it back."""
    nvml, handle = _nvml_for(device)
    if handle is None:
        return {}
    power_mw = _ask(nvml, "nvmlDeviceGetPowerUsage", handle)
    return {
        "sm_mhz": _ask(nvml, "nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM),
        "max_sm_mhz": _ask(nvml, "nvmlDeviceGetMaxClockInfo", handle, nvml.NVML_CLOCK_SM),
        "temp_c": _ask(nvml, "nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU),
        "power_w": None if power_mw is None else round(power_mw / 1000, 1),
        "reasons": _reasons(nvml, handle),
    }


def gpu_clocks(device: torch.device) -> dict[str, str]:
    """SM clock, its maximum and the temperature from nvidia-smi, when it is there to ask."""
    exe = shutil.which("nvidia-smi")
    if exe is None or device.type != "cuda":
        return {}
    uuid = str(torch.cuda.get_device_properties(device).uuid)
    query = "clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw"
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={query}", "--format=csv,noheader", "-i", f"GPU-{uuid}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.strip().splitlines()[0].split(",")] if out.strip() else []
    return dict(zip(query.split(","), values, strict=False))


def gpu_users(device: torch.device, since_us: int, window: set[int]) -> dict[str, Any]:
    """Which processes ran kernels on ``device`` since ``since_us`` (NVML's per-process SM samples,
    microseconds since the epoch, ~6 a second): ``{"seen_self", "users": [[pid, max SM %, samples,
    who]]}``, ``who`` being ``window`` for the timing's own processes (``window``) and otherwise the
    process's name and state (:func:`_who`) or ``?`` (another pid namespace: ``seen_self`` says
    whether NVML's pids are this namespace's at all). Another context running in a timing window
    time-slices the GPU with both sides (quiet.py), which no host measurement sees. ``{}`` where
    NVML is not there."""
    nvml, handle = _nvml_for(device)
    if handle is None:
        return {}
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except nvml.NVMLError_NotFound:
        samples = []  # no process ran a kernel since then
    except nvml.NVMLError as exc:
        return {"error": str(exc)}
    peak: dict[int, list[int]] = {}
    for s in samples:
        if s.timeStamp >= since_us:
            seen = peak.setdefault(int(s.pid), [0, 0])
            seen[0], seen[1] = max(seen[0], int(s.smUtil)), seen[1] + 1
    try:
        running = {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}
    except nvml.NVMLError:
        running = set()
    users = [[pid, sm, n, _who(pid, window)] for pid, (sm, n) in sorted(peak.items()) if sm > 0]
    return {"seen_self": os.getpid() in running, "users": users}


# A process at this peak SM share or more shared a window: an idle context's samples read 0-5 %.
SHARED_SM_PERCENT = 20
# How far back the drain's last check looks: NVML samples a process ~6 times a second, so 0.5 s
# holds ~3 samples of anything still running.
ALONE_LOOKBACK_US = 500_000
# States (/proc/<pid>/stat) of a process that cannot be issuing work: stopped (a quiet window's
# SIGSTOP: ``T``; a tracer's: ``t``), a zombie or dead (its context is gone).
_NOT_ISSUING = frozenset("TtZX")


def sharing_users(record: dict[str, Any]) -> list[list[Any]]:
    """The users of a :func:`gpu_users` record that shared the window: not the window's own
    processes, at :data:`SHARED_SM_PERCENT` of the SMs or more."""
    return [u for u in record.get("users", []) if u[3] != "window" and u[1] >= SHARED_SM_PERCENT]


def running_strangers(record: dict[str, Any]) -> list[list[Any]]:
    """The sharing users still able to issue work: their state is this namespace's (``seen_self``)
    and neither stopped nor gone. A stopped process's queued kernels drain (the probes wait for
    them); a running one's never do, and short probes get through beside it in time slices."""
    if not record.get("seen_self"):
        return []  # NVML's pids are another namespace's: nobody here can be named or judged
    return [u for u in sharing_users(record) if u[3] != "?" and u[3][-1] not in _NOT_ISSUING]


def wait_gpu_alone(device: torch.device, window: set[int]) -> dict[str, Any]:
    """The timing window's drain: :func:`~evokernel.evaluation.host_clock.wait_gpu_quiet` (what
    stopped processes had queued runs out), then who ran kernels in the last
    :data:`ALONE_LOOKBACK_US` (:func:`gpu_users`, ``window`` being the window's own pids). A
    process outside the window, not stopped and at :data:`SHARED_SM_PERCENT` of the SMs or more
    makes the window not quiet and is named in ``running``: the GPU time-slices between contexts,
    so the probes alone cleared in 0.3 s beside a process running 8192x8192 matmuls back to back
    (H100, session 20). ``{"drain_ms", "quiet"[, "running"]}``; ``{}`` off the GPU."""
    drained = wait_gpu_quiet(device)
    if not drained.get("quiet"):
        return drained
    since_us = time.time_ns() // 1000 - ALONE_LOOKBACK_US
    running = running_strangers(gpu_users(device, since_us, window))
    if running:
        return {**drained, "quiet": False, "running": running}
    return drained


def shared_with(record: dict[str, Any]) -> str:
    """What a timing's stage line says of a window another process's kernels shared (the
    :func:`gpu_users` record, with the drain's ``busy_windows``), or "" when none did."""
    others = sharing_users(record)
    if not others:
        return ""
    pid, sm, _, who = max(others, key=lambda u: u[1])
    given_up = record.get("busy_windows", 0)
    after = f", after {given_up} window{'s' * (given_up != 1)} given up for it" if given_up else ""
    return (
        f"; another process's kernels ran in the window (pid {pid}, {who}, up to {sm} % of the "
        f"SMs{after}): the figure may be off"
    )


def _who(pid: int, window: set[int]) -> str:
    """``window``, or the process's name and state letter (``T``: stopped by a quiet window, its
    kernels already queued still running; ``R``/``S``: not stopped), or ``?``."""
    if pid in window:
        return "window"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "?"
    return f"{stat[stat.index('(') + 1 : stat.rindex(')')]} {stat[stat.rindex(')') + 2]}"
