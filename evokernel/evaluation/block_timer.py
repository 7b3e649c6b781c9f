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
from evokernel.evaluation.timing import (
    L2_FLUSH_BYTES,
    TimingSettings,
    _settle,
    collect_batch,
    enqueue_batch,
)
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

    def settle(self) -> float:
        """The first call (JIT builds, autotuning) and the discarded warm-up; returns one call's
        milliseconds as the warm-up ended (what the supervisor sizes this side's blocks by)."""
        start = time.perf_counter()
        if self.cuda:
            self._idle = clock_state(self.device)
            torch.cuda.synchronize(self.device)
            self.fn()
            torch.cuda.synchronize(self.device)
            self.warmup_ms, self.settled = _settle(
                self.fn, self.device, self.settings, self.flush, self.prepare
            )
            probe = collect_batch(enqueue_batch(self.fn, self.flush, 3, self.prepare), self.device)
            return statistics.median(probe)
        self.fn()
        while (time.perf_counter() - start) * 1e3 < self.settings.warmup_ms:
            self.fn()
        self.warmup_ms = round((time.perf_counter() - start) * 1e3, 2)
        return self._cpu_calls(1)[0]

    def block(self, calls: int) -> list[float]:
        """``calls`` timed calls (at most MAX_BLOCK_CALLS); their milliseconds are kept and returned."""
        calls = max(1, min(MAX_BLOCK_CALLS, int(calls)))
        if not self.cuda:
            samples = self._cpu_calls(calls)
        else:
            pairs = enqueue_batch(self.fn, self.flush, calls, self.prepare)
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
        self.samples.extend(samples)
        return samples

    def _cpu_calls(self, calls: int) -> list[float]:
        samples = []
        for _ in range(calls):
            if self.prepare is not None:
                self.prepare()
            t0 = time.perf_counter()
            self.fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        return samples

    def result(self) -> TimingResult:
        """The summary of every timed sample so far, as a :class:`TimingResult`."""
        summary = _summary(self.samples or [0.0])
        if not self.cuda:
            return replace(summary, warmup_ms=self.warmup_ms, method="perf_counter")
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
        return replace(summary, warmup_ms=round(self.warmup_ms, 2), settled=self.settled, clock=clock)

    def close(self) -> None:
        self.flush = None
