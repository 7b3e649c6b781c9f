"""GPU clock readings that go beside a timing: what the SM clock was while the figure was taken.

Read, never set: evokernel does not lock clocks or change persistence mode, so a timing says what
the clock was instead. :func:`clock_state` asks NVML directly through ``ctypes`` (the driver's
``libnvidia-ml.so.1``; microseconds per query, no package needed: ``torch.cuda.clock_rate``
needs pynvml and averages over a 1/6-1 s sample period). :func:`gpu_clocks` asks ``nvidia-smi``
(tens of milliseconds, a subprocess) and is for once-per-run records. Both return ``{}`` where
there is nothing to ask (no GPU, no driver library).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from typing import Any

import torch

# nvmlClockType_t / nvmlTemperatureSensors_t values and nvmlClocksEventReasons bits (nvml.h).
_NVML_CLOCK_SM = 1
_NVML_TEMPERATURE_GPU = 0
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
    """The initialised NVML library, or None; tried once per process."""
    if "lib" not in _nvml:
        _nvml["lib"] = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() == 0:
                _nvml["lib"] = lib
        except (OSError, AttributeError):
            pass  # no driver library here (a CPU machine): clock readings are simply absent
    return _nvml["lib"]


def _handle(lib: Any, device: torch.device) -> ctypes.c_void_p | None:
    uuid = f"GPU-{torch.cuda.get_device_properties(device).uuid}"
    if uuid not in _nvml:
        handle = ctypes.c_void_p()
        ok = lib.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(handle)) == 0
        _nvml[uuid] = handle if ok else None
    handle_or_none: ctypes.c_void_p | None = _nvml[uuid]
    return handle_or_none


def _uint(lib: Any, name: str, handle: ctypes.c_void_p, *args: int) -> int | None:
    value = ctypes.c_uint()
    try:
        status = getattr(lib, name)(handle, *args, ctypes.byref(value))
    except AttributeError:  # an older driver without this entry point
        return None
    return int(value.value) if status == 0 else None


def _reasons(lib: Any, handle: ctypes.c_void_p) -> list[str] | None:
    mask = ctypes.c_ulonglong()
    # The 'ClocksEvent' name is the current one (driver >= 535); 'ClocksThrottle' the older alias.
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        try:
            status = getattr(lib, name)(handle, ctypes.byref(mask))
        except AttributeError:
            continue
        if status == 0:
            return [label for bit, label in _REASONS.items() if mask.value & bit]
    return None


def sm_clock_mhz(device: torch.device) -> int | None:
    """The SM clock now (one NVML query), or None where NVML is not there."""
    if device.type != "cuda":
        return None
    lib = _library()
    handle = _handle(lib, device) if lib is not None else None
    if lib is None or handle is None:
        return None
    return _uint(lib, "nvmlDeviceGetClockInfo", handle, _NVML_CLOCK_SM)


def clock_state(device: torch.device) -> dict[str, Any]:
    """``{"sm_mhz", "max_sm_mhz", "temp_c", "power_w", "reasons"}`` from NVML, or ``{}``.

    ``reasons`` lists why the clock is below its maximum right now (``sw-power-cap``, ``hw-thermal``,
    ``idle``, ...); an empty list means nothing holds it back."""
    if device.type != "cuda":
        return {}
    lib = _library()
    handle = _handle(lib, device) if lib is not None else None
    if lib is None or handle is None:
        return {}
    power_mw = _uint(lib, "nvmlDeviceGetPowerUsage", handle)
    return {
        "sm_mhz": _uint(lib, "nvmlDeviceGetClockInfo", handle, _NVML_CLOCK_SM),
        "max_sm_mhz": _uint(lib, "nvmlDeviceGetMaxClockInfo", handle, _NVML_CLOCK_SM),
        "temp_c": _uint(lib, "nvmlDeviceGetTemperature", handle, _NVML_TEMPERATURE_GPU),
        "power_w": None if power_mw is None else round(power_mw / 1000, 1),
        "reasons": _reasons(lib, handle),
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
