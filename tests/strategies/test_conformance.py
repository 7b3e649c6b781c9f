"""Every built-in strategy, the example custom strategy and an entry-point strategy pass the
conformance suite a strategy author runs (evokernel.conformance)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from evokernel.conformance import check_strategy
from evokernel.db import SolutionLibrary
from evokernel.exceptions import PluginError
from evokernel.plugins import available, resolve
from evokernel.strategies.base import Strategy
from tests.support.library_rows import count

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "experiments" / "custom_strategy" / "tournament.py"

BUILTIN_PARAMS: dict[str, dict[str, Any]] = {
    "pike_b": {"branches": 4, "top_k": 2, "fix_rounds": 2},
    "pike_o": {"batch": 2, "migration_interval": 2, "reset": "funsearch", "reset_interval": 3},
    "greedy": {"batch": 3},
    "random": {"batch": 3, "from_seed": False},
}


@pytest.mark.parametrize("name", sorted(BUILTIN_PARAMS))
def test_builtin_strategy_conforms(name: str, tmp_path: Path) -> None:
    check_strategy(name, BUILTIN_PARAMS[name], workdir=tmp_path, budget=20)


def test_every_builtin_is_covered() -> None:
    assert set(available("strategies")) >= set(BUILTIN_PARAMS)
    assert {
        n for n in available("strategies") if resolve("strategies", n).__module__.startswith("evokernel")
    } == set(BUILTIN_PARAMS)


def test_example_custom_strategy_conforms_by_file_path(tmp_path: Path) -> None:
    check_strategy(f"{EXAMPLE}:Tournament", {"size": 2}, workdir=tmp_path, budget=16)


class HiddenState(Strategy):
    """Breaks the rules on purpose: draws parents from its own generator, not ``view.rng``."""

    name = "hidden_state"

    def __init__(self) -> None:
        self.rng = random.Random()  # seeded from the OS: differs per instance, so per run

    def propose(self, view: Any, capacity: int) -> list[Any]:
        from evokernel.types import Proposal

        gen = view.last_generation()
        if gen < 0:
            return [Proposal(view.task.name, "seed_file")]
        ranked = view.top(4, before=gen + 1)
        if view.in_flight or not ranked or gen > 5:
            return []
        parent = self.rng.choice(ranked).candidate.id
        return [Proposal(view.task.name, "mutate", generation=gen + 1, parents=(parent,))]


def test_the_suite_catches_a_strategy_with_hidden_state(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"HiddenState: .*(half the budget|another order|differently)"):
        check_strategy(HiddenState, workdir=tmp_path, budget=12)


def test_entry_point_strategy_is_found_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real installed-distribution layout on sys.path: importlib.metadata reads its entry points.
    dist = tmp_path / "tournament_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tournament-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[evokernel.strategies]\ntournament = tournament_plugin:Tournament\n"
    )
    (tmp_path / "tournament_plugin.py").write_text(EXAMPLE.read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "tournament" in available("strategies")
    cls = resolve("strategies", "tournament")
    assert cls.__name__ == "Tournament" and issubclass(cls, Strategy)
    check_strategy("tournament", {"batch": 2}, workdir=tmp_path / "run", budget=10, tasks=1)


def test_unknown_strategy_names_the_choices() -> None:
    with pytest.raises(PluginError, match=r"unknown strategy 'nope'.*greedy.*pike_b.*pike_o.*random"):
        resolve("strategies", "nope")
    with pytest.raises(PluginError, match="no file"):
        resolve("strategies", "does/not/exist.py:Thing")


def test_example_yaml_runs_its_custom_strategy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evokernel.config.loading import load_config
    from evokernel.conformance import InstantEvaluator, InstantMutator, QuietReporter
    from evokernel.run.runner import run_experiment

    monkeypatch.chdir(ROOT)  # the yaml names the strategy file relative to the repository root
    yaml = ROOT / "experiments" / "custom_strategy" / "tournament.yaml"
    config = load_config(yaml, [f"library={tmp_path / 'lib.db'}"])
    summary = run_experiment(
        config,
        reporter=QuietReporter(),
        pool=InstantEvaluator(),
        mutators=[InstantMutator(incorrect_rate=0.0)],
    )
    lib = SolutionLibrary(tmp_path / "lib.db")
    cands = lib.candidates(summary.run_id, "softmax")
    assert len(cands) == config.budget.evaluations == 7
    assert [sc.candidate.generation for sc in cands] == [0, 1, 1, 2, 2, 3, 3]  # batch 2 per generation


def test_a_wrong_strategy_fails_before_the_run_is_recorded_or_the_pool_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evokernel.cli import main

    db = tmp_path / "lib.db"
    config = tmp_path / "exp.yaml"
    task = ROOT / "tests" / "fixtures" / "tasks" / "axpy.py"
    config.write_text(
        f"name: bad\ntasks: [{task}]\nlibrary: {db}\nstrategy: {{name: 'does/not/exist.py:Thing'}}\n"
    )
    assert main(["run", str(config)]) == 2
    assert "no file" in capsys.readouterr().err
    assert count(db, "select count(*) from runs") == 0  # the pool starts only after a run is recorded
