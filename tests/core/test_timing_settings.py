"""The config's timing section (TimingConfig, mutable for OmegaConf) and the sandbox's timing
settings are one class (issue 22): what the pool sends (asdict of the config) is what the
sandbox rebuilds, and the baseline window is the config's own."""

from __future__ import annotations

import dataclasses

from evokernel.config import TimingConfig
from evokernel.evaluation.timing import TimingSettings


def test_the_sandbox_times_with_the_configs_own_class() -> None:
    assert TimingSettings is TimingConfig
    # What the pool sends (asdict of the config) is what the sandbox rebuilds.
    sent = dataclasses.asdict(TimingConfig(min_reps=3))
    assert TimingSettings(**sent) == TimingConfig(min_reps=3)
    assert TimingConfig().for_baseline().min_ms == TimingConfig().baseline_min_ms
