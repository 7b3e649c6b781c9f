"""Host-clock figures of a call, beside the event-timed ones: the side-stream check's evidence.

``wall_median_ms`` is the median of a few calls bracketed by device synchronizes on the host clock,
and ``sync_wait_ms`` the part of it after the call returned: GPU work still pending then.
``stream_tail_ms`` is the part of that wait after the timed stream itself had finished (an event
recorded on it when the call returned has completed): GPU work on *other* streams that the call
left running and the timed stream never waited for -- the side-stream trick, whose cost the
events never see. A call whose work is all on the timed stream, or joined back into it, leaves
no tail beyond the cost of a device synchronize with nothing pending. ``probe_wall_ms``,
``probe_wait_ms`` and ``probe_tail_ms`` are the same figures for a one-element ``add_`` timed
between those calls: the synchronize's own cost under the same CPU load. ``contended`` says the
probe waited for a time slice (another CUDA context kept the GPU busy: another
candidate's hung kernel, another job), so the figures were taken on a shared GPU.

The side-stream check (the supervisor's) uses the tail (as ``tail_excess_ms``, paired with the probe
call by call), not the wait: the wait compares GPU work with host time, and a side-stream call's
events are not a clean yardstick -- its batched events overlap the hidden work, so they measure the
host's launch time (0.24 ms for 8 hidden 0.1 ms softmax passes on an H100, whose wait was then 0.5
ms: under the 2x-median bound that rule used). The tail of that call is the hidden work itself (0.61
ms), and 2-6 µs above the probe's for the bundled seeds.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

# Synchronized host-clock calls taken after the event samples, for the side-stream check: 15
# pairs, because beside another context's hung kernel (time-slicing) single tails jump by up to
# ~0.1 ms, and the median of 5 put a correct 5 us kernel's tail 0.094 ms above the probe's.
WALL_REPS = 15
# A synchronized one-element add takes ~20-50 us on an idle GPU; a time-sliced one waits for a slice.
CONTENDED_PROBE_MS = 0.5


def wall_medians(fn: Callable[[], Any], device: torch.device) -> dict[str, float]:
    """Host-clock medians (ms) of synchronized calls of ``fn`` and of a trivial probe, interleaved
    so both see the same contention: ``wall`` (the whole call), ``wait`` (from the call's return
    to the end of the device synchronize: the GPU work still pending when it returned) and
    ``tail`` (the part of the wait after the stream that was current at the call had finished);
    ``tail_excess``: the median over the pairs of (call tail - the next probe's tail), each pair
    taken back to back, so contention that hits a few samples moves neither side's median of
    the difference (a side-stream call's excess is there in every pair)."""
    probe = torch.zeros(1, device=device)
    stream = torch.cuda.current_stream(device)  # the timed stream, even if fn changes the current one
    samples: dict[str, list[float]] = {
        f"{prefix}{key}": [] for prefix in ("", "probe_") for key in ("wall", "wait", "tail")
    }
    for _ in range(WALL_REPS):
        for target, prefix in ((fn, ""), (lambda: probe.add_(1), "probe_")):
            torch.cuda.synchronize(device)
            done = torch.cuda.Event()
            t0 = time.perf_counter()
            target()
            t1 = time.perf_counter()
            done.record(stream)
            done.synchronize()
            t2 = time.perf_counter()
            torch.cuda.synchronize(device)
            t3 = time.perf_counter()
            samples[prefix + "wall"].append((t3 - t0) * 1e3)
            samples[prefix + "wait"].append((t3 - t1) * 1e3)
            samples[prefix + "tail"].append((t3 - t2) * 1e3)
    medians = {key: statistics.median(values) for key, values in samples.items()}
    pairs = zip(samples["tail"], samples["probe_tail"], strict=True)
    medians["tail_excess"] = statistics.median(a - b for a, b in pairs)
    return medians


# A synchronized one-element add on an idle H100 takes ~20-50 us; one that waits for another
# context's time slice takes a slice (~ms).
IDLE_PROBE_MS = 0.15
IDLE_PROBES = 3
# Drains that clear take up to ~0.45 s (H200, 16 in flight); those that do not ran past 2 s, another
# process's work beside the window (timing_window.BUSY_WINDOWS gives such a window up).
DRAIN_LIMIT_S = 1.0


def wait_gpu_quiet(device: torch.device) -> dict[str, Any]:
    """Until ``IDLE_PROBES`` synchronized probes in a row finish under ``IDLE_PROBE_MS`` (the GPU
    runs no other context's work: what stopped processes had queued has drained), at most
    ``DRAIN_LIMIT_S``. ``{"drain_ms", "quiet"}`` for the timing's record."""
    if device.type != "cuda":
        return {}
    probe = torch.zeros(1, device=device)
    start = time.perf_counter()
    idle = 0
    while idle < IDLE_PROBES and time.perf_counter() - start < DRAIN_LIMIT_S:
        t0 = time.perf_counter()
        probe.add_(1)
        torch.cuda.synchronize(device)
        idle = idle + 1 if (time.perf_counter() - t0) * 1e3 < IDLE_PROBE_MS else 0
    return {"drain_ms": round((time.perf_counter() - start) * 1e3, 3), "quiet": idle >= IDLE_PROBES}


# Calls in one dispatch reading: a one-element add issues in ~5-10 us on an idle H100 host, so
# 50 take well under a millisecond of the window.
DISPATCH_CALLS = 50


def dispatch_us(device: torch.device, stream: torch.cuda.Stream | None = None) -> float | None:
    """The median host microseconds of issuing a one-element ``add_`` on ``device`` (no
    synchronize between calls): the speed of the eager dispatch path -- the path a host-bound
    eager reference's calls take -- on the calling thread's CPU now. The spin (host_speed.py) is
    interpreter work only; this one goes through torch's dispatcher and the CUDA launch. Recorded
    beside the window's spin, not gated on (issue 35: eager references ran up to 2.09x slower in
    one run's window than in the other's with spins 1.01-1.14x apart). None off the GPU.
    ``stream``: launch on it and wait for it alone, not the device (a benchmark that keeps the
    GPU busy on another stream meanwhile: experiments/bench/launch_state.py)."""
    if device.type != "cuda":
        return None
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        probe = torch.zeros(1, device=device)
        probe.add_(1)  # the first call of a thread pays for its setup
        times = []
        for _ in range(DISPATCH_CALLS):
            t0 = time.perf_counter_ns()
            probe.add_(1)
            times.append(time.perf_counter_ns() - t0)
    if stream is not None:
        stream.synchronize()
    else:
        torch.cuda.synchronize(device)
    return round(statistics.median(times) / 1e3, 2)
