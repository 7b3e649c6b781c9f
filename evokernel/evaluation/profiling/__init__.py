"""Profiling: where a correct kernel's time goes, after timing and never inside it.

``evaluation.profiling`` picks the level: ``none``; ``timeline`` (:mod:`.timeline`: the kernels one
call launched, their device time and share, the host gaps, the launch count, from
``torch.profiler``); ``counters`` (also :mod:`.counters`: Nsight Compute's DRAM and SM throughput,
occupancy, registers, shared memory and warp stalls per kernel that takes >= 5 % of the call, in
a separate process, :mod:`.target`). :mod:`.verdict` turns a profile into a bottleneck class with
its numbers and a speed-of-light share; :mod:`.stage` is what the supervisor runs;
:mod:`.summary` is the short text prompts, ``verify`` and reports show; :mod:`.availability`
says what this machine can do.
"""
