"""Verdict profiles: which correctness contract a verdict was reached under.

evokernel's own contract (``strict``, the default) checks every declared size variant plus one the
candidate was never shown, at fp32 1e-4. The field checks less, and its published figures are only
comparable with verdicts reached the same way, so two named profiles reproduce it:

* ``kernelbench``: KernelBench's current contract: the task's default sizes only, at least
  5 input seeds (its ``num_correct_trials``), ``allclose`` at fp32 1e-4 and fp16/bf16 1e-2, and
  the models called in **training mode**, as constructed: KernelBench's ``eval_kernel_against_ref``
  never calls ``.eval()``, so BatchNorm normalizes by the batch's statistics there.
* ``kernelbench-v0``: the default sizes at atol = rtol = 1e-2 for every dtype, as KernelBench
  v0/v0.1 and PIKE judge, with the models in eval mode as PIKE's evaluator puts them
  (``scripts/eval.py``: ``model.eval()``; PIKE's published figures are under this profile, and
  some of its kernels fold BatchNorm's running statistics, or refuse to run in training mode).

``strict`` calls the models in eval mode too: evokernel's kernels are for inference, where a
BatchNorm is its running statistics, and folding them into a kernel is a legitimate optimization.

Only shape-dependent checks change. Every anti-hack check that does not depend on shapes (the
static rules, input mutation, the poisoned allocator, the bitwise repeat, own-kernel,
pytorch-recompute, output type, streams left running, fallbacks taken) runs under every profile,
and so does building reference and candidate after the same seed. A task's own ``EVOKERNEL``
tolerance wins over a profile's for the dtypes it names. The profile travels in the request and
comes back on the :class:`~evokernel.types.Evaluation` (and so into the library and reports).
"""

from __future__ import annotations

from dataclasses import dataclass

from evokernel.config.schema import PROFILE_NAMES
from evokernel.exceptions import ConfigError
from evokernel.types import DEFAULT_TOLERANCE


@dataclass(frozen=True)
class Profile:
    name: str
    # Declared size variants beyond the default, and the unseen one, are checked.
    all_sizes: bool
    min_seeds: int
    # dtype -> (atol, rtol); None keeps evokernel's defaults.
    tolerance: dict[str, tuple[float, float]] | None
    description: str
    # The models are called in training mode (``nn.Module`` as constructed) instead of eval mode.
    training: bool = False


_KB_V0 = {dtype: (1e-2, 1e-2) for dtype in DEFAULT_TOLERANCE}
PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("strict", True, 0, None, "every size variant plus an unseen one, fp32 1e-4, eval mode"),
        Profile(
            "kernelbench",
            False,
            5,
            {**DEFAULT_TOLERANCE, "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)},
            "default sizes, >= 5 seeds, fp32 1e-4, fp16/bf16 1e-2, training mode (KernelBench today)",
            training=True,
        ),
        Profile(
            "kernelbench-v0",
            False,
            5,
            _KB_V0,
            "default sizes, >= 5 seeds, atol = rtol = 1e-2 for every dtype, eval mode (KernelBench v0, PIKE)",
        ),
    )
}
DEFAULT_PROFILE = "strict"
assert tuple(PROFILES) == PROFILE_NAMES, "config.schema.PROFILE_NAMES must name these profiles"


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"evaluation.profile={name!r} is not one of {', '.join(PROFILES)}") from None


def profile_tolerance(
    profile: Profile, task_tolerance: dict[str, tuple[float, float]], task_sets: frozenset[str]
) -> dict[str, tuple[float, float]]:
    """The tolerance a trial uses: the profile's, except for the dtypes the task itself sets."""
    if profile.tolerance is None:
        return dict(task_tolerance)
    return {**task_tolerance, **{k: v for k, v in profile.tolerance.items() if k not in task_sets}}
