"""The host gate of a paired window's rounds (issue 35): pairing.paired_ratios asks it before and
after each round whether the host ran that round at full speed (host_speed.py says why a round
the host was slow in is left out)."""

from __future__ import annotations

import torch

from evokernel.evaluation import cpu_pin, host_clock
from evokernel.evaluation.block_timer import BlockTimer


class RoundGate:
    """The host gate of a paired window (pairing.HostGate): before a round, the window CPU's
    speed; after it, whether each side's calls ran on the CPU: the eager reference's time off the
    CPU in its calls (block_timer.BlockTimer.disturbed) and each worker's calling thread's
    run-queue wait in its block (cpu_pin.ThreadWait), both read here on the trusted side.

    Before each round it also reads the eager dispatch path's speed (host_clock.dispatch_us, on
    the thread that times the reference), recorded per round, not gated on: on the H200 host it
    flips between ~7 and ~10 us a launch from one second to the next with every spin fast, in a
    quiet process too (session 26), which moves a host-bound reference against a GPU-bound
    candidate; the rounds' readings beside their ratios (pairing.PairedRatio.round_ratios) say
    whether gating on it would steady the figure."""

    def __init__(
        self,
        window: cpu_pin.WindowCpu,
        reference: BlockTimer,
        workers: list[cpu_pin.ThreadWait],
        limit: float,
        device: torch.device,
    ) -> None:
        self.window, self.reference, self.workers, self.limit = window, reference, workers, limit
        self.device = device
        self.dispatch_us: list[float | None] = []

    def fast(self) -> bool:
        self.dispatch_us.append(host_clock.dispatch_us(self.device))
        return self.window.fast()

    def undisturbed(self) -> bool:
        blocks = [w.last for w in self.workers]
        contended = any(waited > (self.limit - 1) * wall for wall, waited in blocks)
        lost = self.reference.disturbed(self.limit)
        return self.window.undisturbed(lost, contended, sum(waited for _, waited in blocks))
