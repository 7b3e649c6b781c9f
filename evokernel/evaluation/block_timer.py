"""One side of a paired timing (:mod:`evokernel.evaluation.pairing`): a callable timed in blocks
of calls that the supervisor interleaves with the other side's blocks.

Each call is timed as :func:`evokernel.evaluation.timing.time_callable` times it (``prepare``
outside the timed window, an L2 flush, CUDA events read after one synchronize per block; on a
CPU ``perf_counter``), and warm-up settles the clock the same way. What differs is who decides
when to stop: the supervisor, from both sides' samples together. The candidate's side runs in the
worker (worker.py's ``time`` phases), the eager reference's in the supervisor.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from evokernel.evaluation.clocks import clock_state, sm_clock_mhz
from evokernel.evaluation.host_speed import own_schedstat
from evokernel.evaluation.timed_calls import (
    L2_FLUSH_BYTES,
    collect_batch,
    enqueue_batch,
    idle_start,
    settle_clock,
)
from evokernel.evaluation.timing import TimingSettings
from evokernel.evaluation.timing_stats import TimingResult, _summary

# Calls a block may hold: a block is ~``paired_block_ms`` of calls, but never so many that one
# block of a 1 µs call spends longer in Python than the pairing's resolution (200 x ~15 µs).
MAX_BLOCK_CALLS = 200


class BlockTimer:
    def __init__(
        self,
        fn: Callable[[], Any],
        device: torch.device,
        settings: TimingSettings,
        prepare: Callable[[], Any] | None = None,
    ) -> None:
        self.fn, self.device, self.settings, self.prepare = fn, device, settings, prepare
        self.cuda = device.type == "cuda"
        self.flush = (
            torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device=device) if self.cuda else None
        )
        self.samples: list[float] = []
        self.warmup_ms = 0.0
        self.settled: bool | None = None
        self.blocks = 0
        self._idle: dict[str, Any] = {}
        self._first: dict[str, Any] = {}
        self._last: dict[str, Any] = {}
        self._sm_mhz: list[int] = []
        # The host's side of the timed calls (host_speed.py): per block, the ns spent issuing its
        # calls and, of those, on a CPU and waiting on a run queue; and its typical call's ms off
        # the CPU (from each call's wall and thread-CPU ns: timing.enqueue_batch) beside its
        # median timed ms.
        self._host: list[tuple[int, int, int]] = []
        # Per block, a call's own issuing in ms (from before its first event to after its last,
        # the mean over the block's calls): not the prepare, the flush or an idle start's wait.
        self.call_issue_ms: list[float] = []
        self._off_cpu: list[tuple[float, float]] = []
        self.disturbed_blocks = 0

    def settle(self) -> float:
        """The first call (JIT builds, autotuning) and the discarded warm-up; returns one call's
        milliseconds as the warm-up ended (what the supervisor sizes this side's blocks by)."""
        start = time.perf_counter()
        if self.cuda:
            self._idle = clock_state(self.device)
            torch.cuda.synchronize(self.device)
            self.fn()
            torch.cuda.synchronize(self.device)
            self.warmup_ms, self.settled = settle_clock(
                self.fn, self.device, self.settings, self.flush, self.prepare
            )
            probe = collect_batch(
                enqueue_batch(self.fn, self.flush, 3, self.prepare, idle=idle_start(self.settings)),
                self.device,
            )
            return statistics.median(probe)
        self.fn()
        while (time.perf_counter() - start) * 1e3 < self.settings.warmup_ms:
            self.fn()
        self.warmup_ms = round((time.perf_counter() - start) * 1e3, 2)
        return self._cpu_calls(1)[0]

    def block(self, calls: int) -> list[float]:
        """``calls`` timed calls (at most MAX_BLOCK_CALLS); their milliseconds are kept and returned."""
        calls = max(1, min(MAX_BLOCK_CALLS, int(calls)))
        wall, (cpu, wait) = time.perf_counter_ns(), own_schedstat()
        per_call: list[tuple[int, int]] = []
        if not self.cuda:
            samples = self._cpu_calls(calls, per_call)
            self._issued(wall, cpu, wait)
        else:
            pairs = enqueue_batch(
                self.fn, self.flush, calls, self.prepare, per_call, idle=idle_start(self.settings)
            )
            self._issued(wall, cpu, wait)
            self.blocks += 1
            # Read while the block runs (after the synchronize the GPU is idle and says so): the
            # full state on blocks 1, 2, 4, 8, ... keeps NVML queries to a handful per timing.
            if self.blocks & (self.blocks - 1) == 0:
                self._last = clock_state(self.device)
                self._first = self._first or self._last
                sm = self._last.get("sm_mhz")
            else:
                sm = sm_clock_mhz(self.device)
            if sm:
                self._sm_mhz.append(sm)
            samples = collect_batch(pairs, self.device)
        self.call_issue_ms.append(statistics.fmean(w for w, _ in per_call) / 1e6)
        off_cpu_ms = statistics.median((w - c) / 1e6 for w, c in per_call)
        self._off_cpu.append((off_cpu_ms, statistics.median(samples)))
        self.samples.extend(samples)
        return samples

    def disturbed(self, limit: float) -> bool:
        """Whether the last block's typical call was issued with this thread off its CPU (runnable
        on a run queue, its vCPU stolen below the VM, or asleep) for more than ``limit - 1`` of
        the call's timed time: a host-bound call is then that much slow, whatever a spin before
        the round said (host_speed.py). Medians, as the pair ratio takes them: one preempted call
        in a block does not make it disturbed. Never without a limit. A launch into a full queue
        waits on a CPU (the driver spins), so a GPU-bound call's issuing is not counted off the
        CPU: of 55 GPU-bound reference windows (issuing under half the call) in two H200 runs, 53
        lost no round and the other two had 30 % of their issuing off the CPU (session 19)."""
        if limit <= 0 or not self._off_cpu:
            return False
        off_cpu_ms, median_ms = self._off_cpu[-1]
        if off_cpu_ms <= (limit - 1) * median_ms:
            return False
        self.disturbed_blocks += 1
        return True

    def _issued(self, wall: int, cpu: int, wait: int) -> None:
        now, (cpu_now, wait_now) = time.perf_counter_ns(), own_schedstat()
        self._host.append((now - wall, cpu_now - cpu, wait_now - wait))

    def host(self) -> dict[str, float]:
        """How the host issued the timed calls: ``issue_ms``, the median over blocks of one call's
        own issuing time (from before its first event to after its last; near the timed median:
        the call is host-bound, the host's speed is its time; over it: the events did not see
        all of it, as under ``call_start=queued`` the flush can hide it); ``off_cpu_ms``, the
        median over blocks of a typical call's issuing time off the CPU; ``cpu_share`` and
        ``wait_share``, the parts of the blocks' whole issuing time (prepares and flushes too) the
        thread spent on a CPU and runnable on a run queue (the rest: asleep, or the CPU taken
        below the VM); ``disturbed_blocks`` (:meth:`disturbed`)."""
        if not self._host:
            return {}
        issued = sum(x[0] for x in self._host) or 1
        return {
            "issue_ms": round(statistics.median(self.call_issue_ms), 4),
            "off_cpu_ms": round(statistics.median(x[0] for x in self._off_cpu), 4),
            "cpu_share": round(sum(x[1] for x in self._host) / issued, 3),
            "wait_share": round(sum(x[2] for x in self._host) / issued, 3),
            "disturbed_blocks": self.disturbed_blocks,
        }

    def _cpu_calls(self, calls: int, host: list[tuple[int, int]] | None = None) -> list[float]:
        samples = []
        for _ in range(calls):
            if self.prepare is not None:
                self.prepare()
            cpu = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            self.fn()
            wall = time.perf_counter_ns() - t0
            if host is not None:
                host.append((wall, time.thread_time_ns() - cpu))
            samples.append(wall / 1e6)
        return samples

    def result(self) -> TimingResult:
        """The summary of every timed sample so far, as a :class:`TimingResult`."""
        summary = _summary(self.samples or [0.0])
        if not self.cuda:
            return replace(summary, warmup_ms=self.warmup_ms, method="perf_counter", host=self.host())
        clock = {}
        if self._last:
            clock = {
                "idle_sm_mhz": self._idle.get("sm_mhz"),
                "start_sm_mhz": self._first.get("sm_mhz"),
                "min_sm_mhz": min(self._sm_mhz) if self._sm_mhz else None,
                "max_sm_mhz": max(self._sm_mhz) if self._sm_mhz else None,
                "end_sm_mhz": self._last.get("sm_mhz"),
                "limit_sm_mhz": self._last.get("max_sm_mhz"),
                "temp_c": self._last.get("temp_c"),
                "power_w": self._last.get("power_w"),
                "reasons": self._last.get("reasons"),
            }
        return replace(
            summary, warmup_ms=round(self.warmup_ms, 2), settled=self.settled, clock=clock, host=self.host()
        )

    def close(self) -> None:
        self.flush = None
