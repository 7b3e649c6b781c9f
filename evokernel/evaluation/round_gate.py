"""The host gate of a paired window's rounds (issue 35): pairing.paired_ratios asks it before and
after each round whether the host ran that round at full speed (host_speed.py says why a round
the host was slow in is left out).

**The launch path.** Before each round the gate also reads the eager dispatch path's speed
(host_clock.dispatch_us: one-element launches, on the thread that times the reference) and records
it beside the round (``round_dispatch_us``; pairing.PairedRatio.round_ratios lines up by index).
On the H200 host of sessions 26-28 it flips between ~7 and ~10 us a launch from one second to the
next with every spin fast, and a host-bound eager reference's calls follow it (VanillaRNN's two
modes: 7.3 against 9.8-10.2 us), which pairing cannot cancel against a GPU-bound candidate. The
reading is recorded, not gated on: session 28 ran a pair of loaded runs leaving out every round
whose reading was over 1.15x the node's fast reading, and it kept 43-53 % of the rounds (19 % in
the quiet run), starved windows to 2-3 pairs at the cap and moved the figures more between the
runs than the same rounds ungated (p90 14.2 % against 12.4 %, worst 49.8 % against 27.0 %); with
nothing else running the path read slow in 90 % of its readings (launch_state.py), so the fast
state is not the machine's own state but a minority one (docs/benchmarks.md, session 28). The
GPU's PCIe link generation is recorded beside each reading too (``round_link_gen``,
clocks.pcie_link_gen): whether the slow state is a link that an idle GPU dropped to a lower one.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from evokernel.config.schema import TimingConfig
from evokernel.evaluation import clocks, cpu_pin, host_clock
from evokernel.evaluation.block_timer import BlockTimer

DispatchReader = Callable[[torch.device], float | None]
LinkReader = Callable[[torch.device], int | None]


class RoundGate:
    """The host gate of a paired window (pairing.HostGate): before a round, the window CPU's
    speed (and the launch path's, recorded); after it, whether each side's calls ran on the CPU:
    the eager reference's time off the CPU in its calls (block_timer.BlockTimer.disturbed) and each
    worker's calling thread's run-queue wait in its block (cpu_pin.ThreadWait), both read here on
    the trusted side."""

    def __init__(
        self,
        window: cpu_pin.WindowCpu,
        reference: BlockTimer,
        workers: list[cpu_pin.ThreadWait],
        limit: float,
        device: torch.device,
        read_dispatch: DispatchReader = host_clock.dispatch_us,
        read_link: LinkReader = clocks.pcie_link_gen,
    ) -> None:
        self.window, self.reference, self.workers, self.limit = window, reference, workers, limit
        self.device, self.read_dispatch, self.read_link = device, read_dispatch, read_link
        self.dispatch_us: list[float | None] = []
        self.link_gen: list[int | None] = []

    def fast(self) -> bool:
        self.dispatch_us.append(self.read_dispatch(self.device))
        self.link_gen.append(self.read_link(self.device))  # after: the link the reading crossed
        return self.window.fast()

    def undisturbed(self) -> bool:
        blocks = [w.last for w in self.workers]
        contended = any(waited > (self.limit - 1) * wall for wall, waited in blocks)
        lost = self.reference.disturbed(self.limit)
        return self.window.undisturbed(lost, contended, sum(waited for _, waited in blocks))

    def close(self) -> None:
        """After the pairing: the launch path's record into the window's."""
        self.window.record.update(self.record())

    def record(self) -> dict[str, object]:
        """The launch path's part of the window's record (``pinned`` in a verdict's timing)."""
        return {"round_dispatch_us": self.dispatch_us, "round_link_gen": self.link_gen}


def for_window(
    window: cpu_pin.WindowCpu,
    reference: BlockTimer,
    workers: list[cpu_pin.ThreadWait],
    settings: TimingConfig,
    device: torch.device,
) -> RoundGate:
    """The gate of one paired window on ``device``."""
    return RoundGate(window, reference, workers, settings.host_slowdown_limit, device)
