"""``evokernel prompts RUN_ID``: every recorded prompt with its kind and length, then a table."""

from __future__ import annotations

from pathlib import Path

import pytest

from evokernel.cli import main
from evokernel.db import SolutionLibrary
from evokernel.types import LLMCall, Proposal
from tests.db.helpers import make_task


def _library(path: Path) -> str:
    lib = SolutionLibrary(path)
    run = lib.create_run("prompts", {})
    lib.register_task(run, make_task())
    seed = lib.add_proposal(run, Proposal(task="relu", operator="seed", branch=1))
    mutate = lib.add_proposal(run, Proposal(task="relu", operator="mutate", generation=1))
    lib.record_llm_call(
        run, seed.id, LLMCall("openai/m", 120, prompt="[system]\nS\n\n[user]\nSEED_PROMPT", prompt_hash="a")
    )
    lib.record_llm_call(
        run,
        mutate.id,
        LLMCall("openai/m", 300, prompt="[system]\nS\n\n[user]\nMUTATE_PROMPT_LONGER", prompt_hash="b"),
    )
    lib.record_llm_call(
        run,
        mutate.id,
        LLMCall(
            "openai/m", 400, prompt="[repair of the previous call's reply]\n\n[user]\nFIX IT", prompt_hash="c"
        ),
    )
    lib.record_llm_call(
        run,
        mutate.id,
        LLMCall("openai/m", 300, prompt="[system]\nS\n\n[user]\nMUTATE_PROMPT_LONGER", prompt_hash="b"),
    )
    lib.close()
    return run


def test_prompts_prints_each_prompt_with_its_kind_and_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _library(tmp_path / "lib.db")
    assert main(["prompts", run, "--library", str(tmp_path / "lib.db")]) == 0
    out = capsys.readouterr().out
    assert out.index("SEED_PROMPT") < out.index("MUTATE_PROMPT_LONGER") < out.index("FIX IT")
    head = "call 1: seed (proposal 1, relu, generation 0, island 0, branch 1) openai/m, 30 chars, 120 prompt"
    assert head in out
    table = out[out.index("kind") :].splitlines()
    assert table[2].split() == ["mutate", "2", "39", "39", "2"]  # the two identical prompts are flagged
    assert table[3].split()[:2] == ["repair", "1"] and table[4].split() == ["seed", "1", "30", "30", "0"]
    assert main(["prompts", run, "--library", str(tmp_path / "lib.db"), "--lengths", "--kind", "seed"]) == 0
    assert "SEED_PROMPT" not in (only := capsys.readouterr().out) and only.count("\n") == 3


def test_prompts_of_an_unknown_run_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _library(tmp_path / "lib.db")
    assert main(["prompts", "nope", "--library", str(tmp_path / "lib.db")]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
