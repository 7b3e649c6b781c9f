"""Mutators as configured plug-ins: the old keys, the list form, third-party ones by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from evokernel.config import load_config
from evokernel.exceptions import ConfigError
from evokernel.mutators.base import MutationRequest, MutationResult, Mutator
from evokernel.mutators.build import build_mutators
from evokernel.mutators.llm import LLMMutator
from evokernel.mutators.tune import TuneMutator

TASK = "tests/fixtures/tasks/axpy.py"


class Echo(Mutator):
    """A third-party mutator serving an operator of its own."""

    name = "echo"
    operators = ("echo",)
    uses_llm = False

    def __init__(self, suffix: str = "") -> None:
        self.suffix = suffix

    async def mutate(self, request: MutationRequest) -> MutationResult:
        return MutationResult(request.parents[0].candidate.source + self.suffix)


def _yaml(tmp_path: Path, mutators: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: t\ntasks: [{Path(TASK).resolve()}]\n{mutators}")
    return path


def test_defaults_and_the_old_keys() -> None:
    assert [type(m) for m in build_mutators(load_config(None, [f"tasks=[{TASK}]"]))] == [TuneMutator]
    config = load_config(
        None,
        [
            f"tasks=[{TASK}]",
            "mutators.llm.model=openai/x",
            "mutators.llm.api_base=http://127.0.0.1:9/v1",
            "mutators.llm.allow_unpriced=true",
        ],
    )
    built = build_mutators(config)
    assert [type(m) for m in built] == [LLMMutator, TuneMutator]
    config = load_config(None, [f"tasks=[{TASK}]", "mutators.tune.search=random", "mutators.builtins=[tune]"])
    (tune,) = build_mutators(config)
    assert isinstance(tune, TuneMutator) and tune.search == "random"


def test_list_form_with_a_third_party_mutator_first(tmp_path: Path) -> None:
    text = (
        "mutators:\n"
        "  - {name: 'tests.mutators.test_build:Echo', params: {suffix: '# hi'}}\n"
        "  - {name: tune, params: {search: random, max_changes: 3}}\n"
    )
    config = load_config(_yaml(tmp_path, text))
    assert config.mutators.builtins == ["tune"]  # the list says which built-ins run
    echo, tune = build_mutators(config)
    assert isinstance(echo, Echo) and echo.suffix == "# hi"
    assert isinstance(tune, TuneMutator) and (tune.search, tune.max_changes) == ("random", 3)


def test_bad_mutator_entries_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"mutators\[0\].*name"):
        load_config(_yaml(tmp_path, "mutators:\n  - {kind: tune}\n"))
    config = load_config(
        _yaml(tmp_path, "mutators:\n  - {name: 'tests.mutators.test_build:Echo', params: {x: 1}}\n")
    )
    with pytest.raises(ConfigError, match=r"unknown mutators.plugins params key\(s\) x .*valid keys: suffix"):
        build_mutators(config)
    with pytest.raises(ConfigError, match=r"mutators\.tune\.nope.*valid keys under mutators\.tune"):
        load_config(_yaml(tmp_path, "mutators:\n  - {name: tune, params: {nope: 1}}\n"))
