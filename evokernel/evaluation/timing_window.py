"""The timing window's GPU: held exclusively, drained, and given up while someone else's work is
on it (timing_stage.py times in the window this returns).

A window whose GPU stays busy with another context's work past the drain is given up and asked
for again, the node resumed and the GPU lock free in between: in a 16-in-flight H200 run 9 of 41
windows drained for 2 s and then timed beside another process's kernels at 20-87 % of the SMs,
stopped in 7 (clocks.gpu_users), their eager references a median 2.15x slow. The work is a slow
candidate's unlocked warm-up call or a trial whose hold was released early (gpulock.py): it ends,
or its evaluation's timeout ends it. Four windows 1 s apart did not outlast it: in two H200 runs
of session 22, 6 of 45 and 5 of 73 timings gave up all four (a slow candidate's work each time,
~8 s), and 6 of the 11 kernels that moved over 5 % between the runs were among them; so the waits
double, ~15 s in all (:data:`BUSY_BACKOFF_S`). A window the keeper grants over its duty limit
stops nothing (quiet.py), the very noise a quiet window removes (9 of 45 and 15 of 73 timings; in
9 of the 11 kernels that moved), so it is given up as well, and the waits let the duty recover.

**A stranger that outlasts the backoffs.** In session 32's H200 pair, one candidate's correctness
trials ran 37-40 s each (three of them, its hold released after gpulock.SHARED_PATIENCE_S, its
kernels at 50-64 % of the SMs, stopped or not): four timings gave up all five windows, kept the
sixth beside it, and their figures moved 7-117 % from the other run's (three of the pair's four
worst). A window kept with the GPU not drained times a side that the stranger time-slices and a
side it hardly touches, so pairing does not cancel it. So the last window is not kept while the
drain still finds work on the GPU: further windows are asked for at the last wait until the
waits reach :data:`STRANGER_PATIENCE_S` (one such trial; ``evaluation.timing.stranger_patience_s``)
or half the evaluation's GPU wait allowance, whichever is less; only then is a busy window kept,
and its record says so. A window kept over the duty limit but drained is kept at once, as
before: builds beside it move host-bound figures a few per cent (the pair above: over-duty
windows median 0.2 % on the GPU-bound side), not the GPU's share.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from evokernel.config.timing_config import TimingConfig

if TYPE_CHECKING:
    from evokernel.evaluation import cpu_pin
    from evokernel.evaluation.gpulock import GpuLock

BUSY_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
BUSY_WINDOWS = len(BUSY_BACKOFF_S) + 1
# The most the windows wait, in all, for a GPU that will not drain (config/timing_config.py's
# default, which says why).
STRANGER_PATIENCE_S = TimingConfig.stranger_patience_s


def quiet_window(
    gpu: GpuLock,
    device: torch.device,
    pinning: Callable[[], contextlib.AbstractContextManager[cpu_pin.WindowCpu | None]],
    drain: Callable[[torch.device], dict[str, Any]],
    backoff_s: tuple[float, ...] = BUSY_BACKOFF_S,
    stranger_patience_s: float = STRANGER_PATIENCE_S,
) -> tuple[contextlib.ExitStack, cpu_pin.WindowCpu | None, dict[str, Any]]:
    """The timing window, to be entered: the GPU held exclusively (the node stopped, quiet.py),
    the sides' threads on one CPU (``pinning``), and the GPU drained of what others had queued
    (``drain``: clocks.wait_gpu_alone, which also waits out another process running kernels).
    A window that will not drain, or in which the keeper stopped nothing (over its duty limit),
    is given up and asked for again after each wait of ``backoff_s`` in turn, the lock free in
    between. The window after the last wait is kept if it drained (over the duty limit or not);
    one that did not is given up again at the last wait while the waits stay within
    ``stranger_patience_s`` and half of ``gpu.max_wait_s``, and the first drained one, or the
    one past that, is kept. The drain's record counts the windows given up (``busy_windows``),
    of those the ones over the duty limit (``duty_windows``) and the ones past the backoffs
    (``stranger_windows``), and says ``over_duty`` where the kept one was; the waits count as
    the GPU's (gpulock: they extend the deadline)."""
    duty = strangers = 0
    waited = 0.0
    room = min(stranger_patience_s, gpu.max_wait_s / 2)
    last_wait = backoff_s[-1] if backoff_s else 0.0
    busy = 0
    while True:
        past_backoffs = busy >= len(backoff_s)
        backoff = backoff_s[busy] if not past_backoffs else last_wait
        with contextlib.ExitStack() as stack:
            stack.enter_context(gpu.hold("time"))
            over_duty = gpu.quiet.stopped_node is False
            pinned = stack.enter_context(pinning())
            drained = drain(device) if past_backoffs or not over_duty else {}
            quiet = drained.get("quiet", True)
            room_for_a_wait = last_wait > 0 and waited + last_wait <= room
            if (quiet and not over_duty) or (past_backoffs and (quiet or not room_for_a_wait)):
                record = {**drained, "busy_windows": busy, "duty_windows": duty}
                if strangers:
                    record["stranger_windows"] = strangers
                if over_duty:
                    record["over_duty"] = True
                return stack.pop_all(), pinned, record
        duty += over_duty
        strangers += past_backoffs
        gpu.wait(backoff)
        waited += backoff
        busy += 1
