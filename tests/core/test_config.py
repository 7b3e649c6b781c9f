"""Config loading: schema defaults, YAML, overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from evokernel.config.loading import load_config
from evokernel.exceptions import ConfigError

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"


def test_quickstart_loads_with_task_paths_resolved_beside_the_config() -> None:
    config = load_config(QUICKSTART)
    assert config.name == "quickstart"
    assert all(Path(t).is_absolute() and Path(t).exists() for t in config.tasks)
    assert config.strategy.name == "pike_b"


def test_overrides_apply_with_types() -> None:
    config = load_config(
        QUICKSTART,
        [
            "budget.evaluations=3",
            "mutators.llm.model=openai/x",
            "strategy.params.branches=7",
            "evaluation.timing.max_ms=12.5",
        ],
    )
    assert config.budget.evaluations == 3
    assert config.mutators.llm.model == "openai/x"
    assert config.strategy.params["branches"] == 7
    assert config.evaluation.timing.max_ms == 12.5


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("budget.evaluationz=3", ["budget.evaluationz", "evaluations", "max_failed_mutations"]),
        ("mutators.llm.modle=x", ["mutators.llm.modle", "api_base", "model"]),
        ("nonsense=1", ["nonsense", "tasks", "strategy"]),
    ],
)
def test_unknown_override_key_names_it_and_the_valid_keys(override: str, names: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(QUICKSTART, [override])
    for name in names:
        assert name in str(info.value)


def test_unknown_key_in_yaml_names_the_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntasks: [a.py]\nevaluation:\n  timeout: 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert "evaluation.timeout" in str(info.value) and "timeout_s" in str(info.value)
    assert "bad.yaml" in str(info.value)


def test_wrong_type_and_bad_values_are_errors() -> None:
    with pytest.raises(ConfigError, match=r"budget\.evaluations"):
        load_config(QUICKSTART, ["budget.evaluations=many"])
    with pytest.raises(ConfigError, match=r"evaluation\.device"):
        load_config(QUICKSTART, ["evaluation.device=tpu"])
    with pytest.raises(ConfigError, match=r"evaluation\.profile='kb'.*strict, kernelbench, kernelbench-v0"):
        load_config(QUICKSTART, ["evaluation.profile=kb"])
    v0 = load_config(QUICKSTART, ["evaluation.profile=kernelbench-v0"])
    assert v0.evaluation.profile == "kernelbench-v0"
    with pytest.raises(ConfigError, match=r"evaluation\.confirm_best='maybe' is not one of auto, on, off"):
        load_config(QUICKSTART, ["evaluation.confirm_best=maybe"])
    # YAML's booleans (on, off, true, no, ...) mean what they say.
    assert load_config(QUICKSTART, ["evaluation.confirm_best=on"]).evaluation.confirm_best == "on"
    assert load_config(QUICKSTART, ["evaluation.confirm_best=false"]).evaluation.confirm_best == "off"
    with pytest.raises(ConfigError, match=r"timing\.call_start='cold' is not one of queued, idle"):
        load_config(QUICKSTART, ["evaluation.timing.call_start=cold"])
    idle = load_config(QUICKSTART, ["evaluation.timing.call_start=idle"])
    assert idle.evaluation.timing.call_start == "idle"
    # The host gate's limit: 0 (off) or above 1.
    with pytest.raises(ConfigError, match=r"timing\.host_slowdown_limit=0\.9 must be 0 \(off\) or above 1"):
        load_config(QUICKSTART, ["evaluation.timing.host_slowdown_limit=0.9"])
    timing = load_config(QUICKSTART, ["evaluation.timing.host_slowdown_limit=1.2"]).evaluation.timing
    assert timing.host_slowdown_limit == 1.2
    # The spread between windows added to an interval: a relative one, 0 adding nothing.
    for key in ("window_spread", "window_spread_host_bound"):
        with pytest.raises(ConfigError, match=rf"timing\.{key}=-0\.1 must be at least 0 and under 1"):
            load_config(QUICKSTART, [f"evaluation.timing.{key}=-0.1"])
        assert getattr(load_config(QUICKSTART, [f"evaluation.timing.{key}=0"]).evaluation.timing, key) == 0
    # How long timing windows wait for another process's kernels: 0 (the backoffs alone) or more.
    with pytest.raises(ConfigError, match=r"timing\.stranger_patience_s=-1\.0 must be 0"):
        load_config(QUICKSTART, ["evaluation.timing.stranger_patience_s=-1"])
    none = load_config(QUICKSTART, ["evaluation.timing.stranger_patience_s=0"]).evaluation.timing
    assert none.stranger_patience_s == 0
    assert load_config(QUICKSTART, []).evaluation.timing.stranger_patience_s == 60.0
    with pytest.raises(ConfigError, match="key=value"):
        load_config(QUICKSTART, ["budget.evaluations"])


def test_unknown_strategy_param_is_named() -> None:
    from evokernel.strategies.pike_b import PikeB

    with pytest.raises(ConfigError) as info:
        PikeB.from_params({"brnaches": 3})
    assert "brnaches" in str(info.value) and "branches" in str(info.value)
