"""What issue 36 puts in every prompt: previous attempts, ideas already tried, the speed of light,
the numerics and software, a direction per branch; and the noise it takes out. The last tests
assert on what the scripted OpenAI-compatible server received over HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from evokernel.mutators.base import MutationRequest
from evokernel.mutators.prompting import PromptSettings, format_feedback, render_ideas_prompt, render_prompt
from evokernel.tasks import load_task
from evokernel.types import Candidate, Evaluation, Proposal, Scored, Status
from tests.mutators.test_llm import GOOD_REPLY, PARENT, _config, _mutator
from tests.support.llm_server import LLMServer, Reply

TASK = load_task(Path(__file__).resolve().parents[2] / "experiments" / "tasks" / "level1" / "matmul_fp16.py")
H100 = "NVIDIA H100 80GB HBM3: compute capability 9.0 (sm_90), 132 SMs"


def _scored(cid: int, parents: tuple[int, ...], source: str, ev: Evaluation | None, gen: int = 1) -> Scored:
    return Scored(Candidate(cid, "run", TASK.name, 100 + cid, 0, gen, "mutate", parents, source), ev)


def _correct(speedup: float, runtime_ms: float = 1.0) -> Evaluation:
    return Evaluation(
        Status.CORRECT,
        runtime_ms=runtime_ms,
        runtime_iqr_ms=0.04 * runtime_ms,
        eager_ms=runtime_ms * speedup,
        speedup_eager=speedup,
        max_abs_error=1e-3,
        feedback=f"correct; {runtime_ms} ms (IQR 0.04 ms, CV 2%); eager {runtime_ms * speedup} ms vs "
        f"{runtime_ms} ms = {speedup:.3f}x; max abs error 0.001",
    )


ROOT = "import torch\n\n\nclass ModelNew:\n    BLOCK = 64\n"
HISTORY = (
    _scored(1, (), ROOT, _correct(0.9), gen=0),
    _scored(2, (1,), ROOT.replace("64", "128"), _correct(1.3)),
    _scored(3, (1,), ROOT.replace("64", "32"), Evaluation(Status.INCORRECT, reason="max abs error 2.5")),
    _scored(
        4, (2,), ROOT.replace("64", "256"), Evaluation(Status.COMPILE_ERROR, reason="SyntaxError line 3")
    ),
    _scored(9, (), "import torch\n\n\nclass ModelNew:\n    OTHER = 1\n", _correct(0.5), gen=0),
)


def _request(operator: str = "mutate", branch: int = 0, **kw: object) -> MutationRequest:
    parent = _scored(2, (1,), ROOT.replace("64", "128"), _correct(1.3, runtime_ms=0.5))
    parents = (parent,) if operator != "seed" else ()
    proposal = Proposal(TASK.name, operator, 0, 2, tuple(p.candidate.id for p in parents), branch=branch)
    base: dict[str, object] = {
        "hardware": H100,
        "software": "torch 2.9.0 / triton 3.5.0",
        "history": HISTORY,
        "ideas_of": {102: "Double the block", 103: "Halve the block"},
    }
    base.update(kw)
    return MutationRequest(proposal, TASK, parents, **base)


def test_previous_attempts_put_the_parents_line_first_with_what_changed_and_the_outcome() -> None:
    _system, user = render_prompt(_request())
    section = user[user.index("## Previous attempts") :].split("\n\n")[0]
    lines = [line for line in section.splitlines() if line.startswith("- #")]
    assert [line.split()[1] for line in lines] == ["#1", "#4", "#9", "#3"]  # line, child, then newest
    assert "#4 (mutate of #2" in lines[1] and "`BLOCK = 128` -> `BLOCK = 256`" in lines[1]
    assert "compile_error: SyntaxError line 3" in lines[1]
    assert "idea: Halve the block" in lines[3] and "incorrect: max abs error 2.5" in lines[3]
    assert "correct, 0.9x eager (IQR ±2 %)" in lines[0]


def test_previous_attempts_are_bounded_in_entries_and_characters() -> None:
    _s, user = render_prompt(_request(), PromptSettings(previous_attempts=2))
    assert user.count("\n- #") == 2
    _s, user = render_prompt(_request(), PromptSettings(history_chars=150))
    assert user.count("\n- #") == 1
    _s, user = render_prompt(_request(), PromptSettings(previous_attempts=0))
    assert "Previous attempts" not in user


@pytest.mark.parametrize("operator", ["seed", "mutate", "fix", "crossover"])
def test_every_kind_carries_the_speed_of_light_and_the_system_prompt_the_numerics(operator: str) -> None:
    system, user = render_prompt(_request(operator))
    assert "## Speed of light" in user and "137 GFLOP" in user and "compute-bound" in user
    if operator in ("mutate", "crossover"):  # the parent's share of it (0.5 ms against a 139 µs floor)
        assert "takes 500 µs: 28 % of it" in user
    assert "float16 atol 0.01 / rtol 0.01" in system and "Input dtypes: float16" in system
    assert "torch 2.9.0 / triton 3.5.0" in system
    assert "3350 GB/s memory bandwidth; dense float16 989 TFLOP/s" in system


def test_the_ideas_prompt_lists_ideas_tried_with_their_best_outcome() -> None:
    _s, user = render_ideas_prompt(_request(), 4)
    assert "## Ideas already tried" in user and "## Speed of light" in user
    tried = user[user.index("## Ideas already tried") :]
    assert tried.index("Double the block => best: correct, 1.3x") < tried.index(
        "Halve the block => best: incorrect"
    )


def test_the_reference_is_shown_without_its_evokernel_metadata() -> None:
    assert "EVOKERNEL" in TASK.source
    _s, user = render_prompt(_request())
    assert "EVOKERNEL" not in user and "class Model(nn.Module)" in user


def test_how_it_did_states_each_figure_once_and_never_as_0_000x() -> None:
    text = format_feedback(_scored(5, (), ROOT, _correct(0.0004)))
    assert "0.0004x vs eager" in text and "0.000x" not in text
    assert text.count("max abs error") + text.count("Max abs error") == 1
    assert "Details" not in text  # the feedback only restated the figures


def test_siblings_without_ideas_get_different_directions() -> None:
    prompts = {render_prompt(_request(branch=b))[1] for b in range(8)}
    assert len(prompts) == 8 and all("## Direction for this attempt" in p for p in prompts)
    _s, off = render_prompt(_request(), PromptSettings(diversify=False))
    assert "Direction" not in off


def test_the_server_receives_the_memory_and_limits(llm_server: LLMServer) -> None:
    llm_server.push(Reply(GOOD_REPLY))
    parent = _scored(2, (1,), PARENT, _correct(1.3, runtime_ms=0.5))
    request = MutationRequest(
        Proposal(TASK.name, "mutate", 0, 2, (2,)), TASK, (parent,), hardware=H100, history=HISTORY
    )
    result = asyncio.run(_mutator(_config(llm_server)).mutate(request))
    assert result.source is not None
    body = llm_server.completions[0].body
    assert body is not None
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "## Previous attempts" in user and "## Speed of light" in user and "Numerics:" in system


def test_a_reference_that_cannot_run_on_meta_gets_no_estimate_and_still_a_prompt() -> None:
    from evokernel.mutators.limits import estimate

    source = TASK.source.replace("return torch.matmul(a, b)", "assert a.sum().item() > 0\n        return a")
    assert source != TASK.source
    task = dataclasses.replace(TASK, source=source)
    assert estimate(task, small=False) is None
    _system, user = render_prompt(dataclasses.replace(_request(), task=task))
    assert "## Speed of light" not in user and "Make the current implementation" in user


def test_operator_families_and_a_bounded_exemplars_section() -> None:
    from evokernel.mutators.exemplars import Exemplar, family

    assert family(TASK.source) == "matmul"
    assert (
        family("class Model:\n    def forward(self, x):\n        return torch.softmax(x, -1)\n") == "softmax"
    )
    assert family("class Model:\n    def forward(self, x):\n        return x * 2\n") == "elementwise"
    big = Exemplar("matmul_bf16", "import torch\n" + "# tile\n" * 2000, 1.8, "same operator family (matmul)")
    request = dataclasses.replace(_request(), exemplars=(big,))
    _s, user = render_prompt(request, PromptSettings(exemplar_chars=1000))
    section = user[user.index("## Fast kernels of related tasks") :]
    assert "`matmul_bf16` (same operator family (matmul); 1.8x its eager)" in section
    assert "characters cut" in section and len(section) < 2000
    _s, none = render_prompt(_request())
    assert "related tasks" not in none
