"""The host gate of a paired window's rounds (issue 35): pairing.paired_ratios asks it before and
after each round whether the host ran that round at full speed (host_speed.py says why a round
the host was slow in is left out).

**The launch path.** Before each round the gate also reads the eager dispatch path's speed
(host_clock.dispatch_us: one-element launches, on the thread that times the reference). On the
H200 host of session 26 it flips between ~7 and ~10 us a launch from one second to the next with
every spin fast, in a quiet process on one pinned CPU too, and a host-bound eager reference's
calls follow it (VanillaRNN's two modes: 7.3 against 9.8-10.2 us), which pairing cannot cancel
against a GPU-bound candidate. Every reading is recorded beside its round
(``round_dispatch_us``; pairing.PairedRatio.round_ratios lines up by index). With
``launch_slowdown_limit`` set, a round whose reading is over that many times the node's fast
reading is also left out, and each round's host-gate answer alone is recorded
(``round_host_fast``: the figure without the launch gate, re-derivable from the same run). The
node's fast reading (its *anchor*) is kept in the node's quiet registry (quiet.node_registry),
one file per GPU (by UUID): the lowest over the node's windows of each window's lower-quartile
reading, so one lucky reading does not set it and a window spent wholly in the slow state (whose
own lowest reading is slow) does not either. A node's first window, with no anchor yet, measures
against its own lowest reading so far.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation import cpu_pin, host_clock
from evokernel.evaluation.block_timer import BlockTimer

# The window's reading that becomes a candidate for the node's anchor: its lower quartile.
ANCHOR_QUANTILE = 0.25

DispatchReader = Callable[[torch.device], float | None]


def device_key(device: torch.device) -> str:
    """A GPU by its UUID: every Ray actor of a multi-GPU node sees its own GPU as ``cuda:0``, and
    each GPU's launch path (its PCIe link, its socket) has its own speed."""
    if device.type == "cuda":
        return f"GPU-{torch.cuda.get_device_properties(device).uuid}"
    return f"{device.type}{device.index or 0}"


def anchor_path(registry: Path, device: torch.device) -> Path:
    return registry / f"launch-anchor-{device_key(device)}"


def read_anchor(path: Path) -> float | None:
    """The node's fast dispatch reading (us), or None when none was kept or the file is unreadable."""
    try:
        value = float(path.read_text())
    except (OSError, ValueError):
        return None
    return value if value > 0 else None


def remember_anchor(path: Path, readings: list[float | None]) -> float | None:
    """Lower the node's anchor to this window's lower-quartile reading if that is lower; the
    anchor after. Written whole (a rename), so another actor's window on the same GPU never reads
    half a number."""
    values = sorted(r for r in readings if r is not None and r > 0)
    old = read_anchor(path)
    if not values:
        return old
    low = values[int(ANCHOR_QUANTILE * (len(values) - 1))]
    if old is not None and old <= low:
        return old
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(f"{low}")
    os.replace(partial, path)
    return low


class RoundGate:
    """The host gate of a paired window (pairing.HostGate): before a round, the window CPU's
    speed and the launch path's (above); after it, whether each side's calls ran on the CPU: the
    eager reference's time off the CPU in its calls (block_timer.BlockTimer.disturbed) and each
    worker's calling thread's run-queue wait in its block (cpu_pin.ThreadWait), both read here on
    the trusted side. ``launch_limit`` 0 reads and records the launch path without gating on it."""

    def __init__(
        self,
        window: cpu_pin.WindowCpu,
        reference: BlockTimer,
        workers: list[cpu_pin.ThreadWait],
        limit: float,
        device: torch.device,
        launch_limit: float = 0.0,
        anchor_us: float | None = None,
        anchor_file: Path | None = None,
        read_dispatch: DispatchReader = host_clock.dispatch_us,
    ) -> None:
        self.window, self.reference, self.workers, self.limit = window, reference, workers, limit
        self.device, self.launch_limit, self.anchor_us = device, launch_limit, anchor_us
        self.anchor_file, self.read_dispatch = anchor_file, read_dispatch
        self.dispatch_us: list[float | None] = []
        self.launch_slow_rounds = 0
        # Per round, the host gate's answer alone (before and after the round), so a gated
        # window's figure without the launch gate can be re-derived beside it from one run.
        self.host_fast: list[bool] = []
        self._host_before = True

    def fast(self) -> bool:
        reading = self.read_dispatch(self.device)
        self.dispatch_us.append(reading)
        self._host_before = self.window.fast()  # always asked: a slow spin moves the window's CPU
        launch = self._launch_fast(reading)
        self.launch_slow_rounds += int(not launch)
        return self._host_before and launch

    def _launch_fast(self, reading: float | None) -> bool:
        if self.launch_limit <= 0 or reading is None:
            return True
        seen = [r for r in self.dispatch_us if r is not None]
        anchor = self.anchor_us if self.anchor_us is not None else min(seen)
        return reading <= self.launch_limit * anchor

    def undisturbed(self) -> bool:
        blocks = [w.last for w in self.workers]
        contended = any(waited > (self.limit - 1) * wall for wall, waited in blocks)
        lost = self.reference.disturbed(self.limit)
        undisturbed = self.window.undisturbed(lost, contended, sum(waited for _, waited in blocks))
        self.host_fast.append(self._host_before and undisturbed)
        return undisturbed

    def close(self) -> None:
        """After the pairing: the launch path's record into the window's, and this window's
        readings offered to the node's anchor."""
        self.window.record.update(self.record())
        if self.anchor_file is not None:
            remember_anchor(self.anchor_file, self.dispatch_us)

    def record(self) -> dict[str, object]:
        """The launch path's part of the window's record (``pinned`` in a verdict's timing)."""
        out: dict[str, object] = {"round_dispatch_us": self.dispatch_us}
        if self.launch_limit > 0:
            out.update(
                launch_limit=self.launch_limit,
                launch_anchor_us=self.anchor_us,
                launch_slow_rounds=self.launch_slow_rounds,
                round_host_fast=self.host_fast,  # ungated, round_kept says the same
            )
        return out


def for_window(
    window: cpu_pin.WindowCpu,
    reference: BlockTimer,
    workers: list[cpu_pin.ThreadWait],
    settings: TimingConfig,
    device: torch.device,
    registry: Path,
) -> RoundGate:
    """The gate of one paired window on ``device``, with the node's anchor from ``registry``."""
    path = anchor_path(registry, device)
    return RoundGate(
        window,
        reference,
        workers,
        settings.host_slowdown_limit,
        device,
        launch_limit=settings.launch_slowdown_limit,
        anchor_us=read_anchor(path),
        anchor_file=path,
    )
