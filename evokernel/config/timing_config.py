"""The ``evaluation.timing`` section of the experiment config (:mod:`evokernel.config.schema`
nests it): how a candidate and its references are timed, every number with the measurement that
chose it. Its own module because each of its keys carries the reason for its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# TimingConfig.call_start's choices (evaluation/timed_calls.py).
CALL_STARTS = ("queued", "idle")


@dataclass
class TimingConfig:
    """Timing is by time, not count: warm up for ``warmup_ms``, then repeat until the median's
    relative standard error falls under ``target_rse`` or ``max_ms``/``max_reps`` is reached.
    The config's ``evaluation.timing`` section and the sandbox's settings
    (:func:`evokernel.evaluation.timing.time_callable`) are this one class."""

    warmup_ms: float = 25.0
    min_reps: int = 10
    # Timed samples span at least this long on a GPU: under a power cap the SM clock dips for a few
    # ms at a time, and a 10-sample stop (~5 ms) caught one dip or none (matmul_fp16: 419.3 us at
    # 60 samples, 421.4-423.7 us at 310-1000, in five fresh processes; benchmarks.md).
    min_ms: float = 100.0
    max_reps: int = 1000
    max_ms: float = 1000.0
    # 0.2 %: medians that stop at an RSE of 0.5 % differ between fresh processes by ~2.3 sigma of
    # five draws, ~1.1 % -- what timing_fidelity measured (1.07 / 0.89 / 1.49 % at 0.5 %).
    target_rse: float = 0.002
    # Always time CUDA-graph replays of the call too (reported beside); launch-bound calls get it anyway.
    cuda_graph: bool = False
    # Warmup ends when 3 windows of 5 ms agree within settle_tol (clock settled), after at least
    # warmup_ms and at most settle_max_ms.
    settle_tol: float = 0.01
    settle_max_ms: float = 300.0
    # Event p10 under this: also time per-call CUDA-graph replays, and compare graph to graph
    # when the baseline is launch-bound too (0 = never).
    launch_bound_us: float = 20.0
    # Eager/compile baselines (timed once per task, GPU and software, then cached): timed samples
    # span at least this long; cuBLAS under the power cap drifts ~2 % between 100 ms windows.
    baseline_min_ms: float = 1000.0
    # Paired timing (evaluation/pairing.py): the candidate and the eager reference alternate in
    # blocks of ~paired_block_ms each; sampling stops when the speedup's 95 % interval is within
    # +-paired_halfwidth of it (after paired_min_pairs pairs and min_ms a side), or a side reaches
    # max_ms / max_reps.
    paired_halfwidth: float = 0.01
    paired_min_pairs: int = 10
    paired_block_ms: float = 10.0
    # While a candidate is timed, the node's compiles (every evaluator's nvcc/g++/ninja) are
    # stopped and continued right after, at most half of any 10 s (evaluation/quiet.py).
    quiet_builds: bool = True
    # On a GPU, the window's two (three) sides run on one CPU in turn: host-bound calls' speed moves
    # 1.4-1.9x between CPUs from moment to moment, which pairing cancels only on a shared CPU
    # (evaluation/cpu_pin.py).
    same_cpu: bool = True
    # With same_cpu: the window takes the fastest CPU it can claim, and a round of pairs whose host
    # spin took over this times the fastest seen, whose threads waited on a run queue or whose
    # reference calls ran off the CPU for over (this - 1) of its time, is left out and the window
    # moves (0 = off): a GPU-bound candidate against a host-bound reference cannot cancel the
    # host's speed, which moves 1.3-3x between CPUs and moments (evaluation/host_speed.py).
    host_slowdown_limit: float = 1.15
    # The relative spread of one window's speedup between windows, which no interval from one
    # window's pairs sees, added to the interval in quadrature after sampling stopped
    # (evaluation/pairing.with_window_spread; 0 = the window's interval alone). Four pairs of
    # identical 16-in-flight runs on an H200 (sessions 22, 27, 28) put it at 2.9-4.1 % when a
    # side's host issuing outlasted its events (a host-bound eager reference against a GPU-bound
    # candidate: the host's state moves between windows) and 0-0.33 % otherwise; the defaults
    # are those upper ends, rounded, since the changes' tails are heavier than normal ones.
    window_spread: float = 0.003
    window_spread_host_bound: float = 0.04
    # The most the timing windows wait, in all, for a GPU that another process's kernels keep
    # busy (evaluation/timing_window.py): after 0.5-8 s backoffs (15.5 s), every 8 s more until
    # this; then the window is kept beside them and says so. 60 s outlasts one 37-40 s trial of a
    # slow candidate released by the GPU lock's patience (session 32, H200: such a trial shared
    # four kept windows, figures off by 7-117 %); on a GPU another user's job shares for good,
    # every evaluation waits this long for nothing, so 0 there (the backoffs alone).
    stranger_patience_s: float = 60.0
    # How each flushed, event-timed call starts (evaluation/timed_calls.py, "Where a call starts"):
    # queued -- back to back behind its L2 flush, so the event window holds the GPU's time when the
    # host keeps ahead and the host's issue time less the flush's (~60-80 us) when it does not;
    # idle -- after the flush has finished, so it holds the call's whole latency, host issue
    # included, and moves with the host's speed one to one (which pairing cancels).
    call_start: str = "queued"

    def for_baseline(self) -> TimingConfig:
        """Baselines: timed samples span ``baseline_min_ms``; the caps grow with it (a flushed call
        costs at least ~0.09 ms, the 256 MiB flush itself, so 1 s is at most ~11 000 calls)."""
        span = max(self.min_ms, self.baseline_min_ms)
        return replace(
            self,
            min_ms=span,
            max_ms=max(self.max_ms, 2 * span),
            max_reps=max(self.max_reps, math.ceil(span / 0.09)),
        )
