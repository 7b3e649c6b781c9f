"""TimingConfig (the config schema's, mutable for OmegaConf) and TimingSettings (the sandbox's,
frozen) are one set of settings in two shapes until evaluation/timing.py is split (issue 22,
after issue 18): this keeps them from drifting apart."""

from __future__ import annotations

import dataclasses

from evokernel.config import TimingConfig
from evokernel.evaluation.timing import TimingSettings


def test_timing_config_and_settings_have_the_same_fields_and_defaults() -> None:
    config = {f.name: f.default for f in dataclasses.fields(TimingConfig)}
    settings = {f.name: f.default for f in dataclasses.fields(TimingSettings)}
    assert config == settings
    # What the pool sends (asdict of the config) is what the sandbox rebuilds.
    assert TimingSettings(**dataclasses.asdict(TimingConfig(min_reps=3))).min_reps == 3
