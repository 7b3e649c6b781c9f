from __future__ import annotations

import ast

import pytest

from evokernel.exceptions import MutationError
from evokernel.mutators.parsing import extract_model_new

MODEL_NEW = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2
"""

PARENT = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0{TRAILING}

    def forward(self, x):
        return x * self.scale
""".replace("{TRAILING}", "   ")  # trailing spaces that SEARCH texts will not repeat


def _defines(source: str) -> bool:
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.parse(source).body)


@pytest.mark.parametrize(
    ("fence", "close"),
    [("```python", "```"), ("```py", "```"), ("```", "```"), ("~~~", "~~~"), ("~~~python", "~~~"),
     ("````Python", "````")],
)  # fmt: skip
def test_fenced_block(fence: str, close: str) -> None:
    reply = f"Here is the faster version.\n\n{fence}\n{MODEL_NEW}{close}\n\nIt doubles the input."
    assert extract_model_new(reply) == MODEL_NEW


def test_prefers_last_block_defining_model_new() -> None:
    old = MODEL_NEW.replace("x * 2", "x + x")
    usage = "```python\nm = ModelNew()\n```"
    reply = f"Before:\n```python\n{old}```\nAfter:\n```python\n{MODEL_NEW}```\nUsage:\n{usage}"
    assert extract_model_new(reply) == MODEL_NEW


def test_block_with_syntax_error_is_skipped_for_a_valid_earlier_one() -> None:
    broken = "class ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n"
    reply = f"```python\n{MODEL_NEW}```\nor maybe\n```python\n{broken}```"
    assert extract_model_new(reply) == MODEL_NEW


def test_split_across_blocks_prepends_helper_definitions() -> None:
    kernel = (
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef double_kernel(x_ptr):\n    pass\n"
    )
    module = (
        "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        double_kernel[(1,)](x)\n        return x\n"
    )
    reply = f"The kernel:\n```python\n{kernel}```\nThe module:\n```python\n{module}```"
    source = extract_model_new(reply)
    assert source.index("def double_kernel") < source.index("class ModelNew")
    assert _defines(source)


def test_split_does_not_pull_in_unrelated_blocks() -> None:
    other = "def unrelated():\n    return 1\n"
    reply = f"```python\n{other}```\n```python\n{MODEL_NEW}```"
    assert extract_model_new(reply) == MODEL_NEW


def test_unterminated_final_fence_that_still_parses() -> None:
    reply = f"Sure:\n```python\n{MODEL_NEW}"
    assert extract_model_new(reply) == MODEL_NEW


def test_unterminated_truncated_fence_is_reported() -> None:
    reply = (
        "```python\nimport torch\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return (x"
    )
    with pytest.raises(MutationError, match=r"syntax error in unterminated code block.*line"):
        extract_model_new(reply)


def test_whole_file_reply_without_fences() -> None:
    assert extract_model_new(MODEL_NEW) == MODEL_NEW


def test_prose_then_unfenced_code() -> None:
    assert extract_model_new("Here you go:\n\n" + MODEL_NEW) == MODEL_NEW


def test_think_block_is_ignored() -> None:
    draft = MODEL_NEW.replace("x * 2", "x * 3")
    reply = f"<think>maybe\n```python\n{draft}```\n</think>\n```python\n{MODEL_NEW}```"
    assert extract_model_new(reply) == MODEL_NEW


@pytest.mark.parametrize("reply", ["", "   \n", "I cannot help with that.", "The kernel should use tiling."])
def test_prose_without_code(reply: str) -> None:
    with pytest.raises(MutationError, match=r"ModelNew|empty"):
        extract_model_new(reply)


def test_code_without_model_new() -> None:
    reply = "```python\nimport torch\n\ndef f(x):\n    return x\n```"
    with pytest.raises(MutationError, match="no class ModelNew"):
        extract_model_new(reply)


def test_syntax_error_names_the_line() -> None:
    reply = (
        "```python\nimport torch\nclass ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n```"
    )
    with pytest.raises(MutationError, match="syntax error in code block at line 3"):
        extract_model_new(reply)


def test_nested_model_new_does_not_count() -> None:
    reply = "```python\ndef make():\n    class ModelNew:\n        pass\n    return ModelNew\n```"
    with pytest.raises(MutationError, match="no class ModelNew"):
        extract_model_new(reply)


# ------------------------------------------------------------------------- SEARCH/REPLACE


def _edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def test_search_replace_applies_to_parent() -> None:
    reply = (
        "Change the scale:\n```python\n"
        + _edit("        self.scale = 2.0", "        self.scale = 3.0")
        + "```"
    )
    source = extract_model_new(reply, PARENT)
    assert "self.scale = 3.0" in source and "2.0" not in source
    assert source.count("class ModelNew") == 1


def test_search_replace_ignores_trailing_whitespace_and_blank_edges() -> None:
    # The parent line has trailing spaces; the SEARCH text does not and is padded with blank lines.
    reply = _edit("\n        self.scale = 2.0\n", "        self.scale = 4.0")
    assert "self.scale = 4.0" in extract_model_new(reply, PARENT)


def test_multiple_edits_apply_in_order() -> None:
    reply = _edit("        self.scale = 2.0", "        self.scale = 5.0") + _edit(
        "        return x * self.scale", "        return x.mul(self.scale)"
    )
    source = extract_model_new(reply, PARENT)
    assert "5.0" in source and "x.mul(self.scale)" in source


def test_search_not_found_names_the_block() -> None:
    reply = _edit("        self.scale = 2.0", "        self.scale = 3.0") + _edit("nope = 1", "yes = 2")
    with pytest.raises(MutationError, match="block 2 of 2: SEARCH text is not found"):
        extract_model_new(reply, PARENT)


def test_ambiguous_search_is_rejected() -> None:
    parent = PARENT + "\n\nx = 1\nx = 1\n"
    with pytest.raises(MutationError, match="block 1 of 1: SEARCH text matches 2 places"):
        extract_model_new(_edit("x = 1", "x = 2"), parent)


def test_search_replace_without_parent() -> None:
    with pytest.raises(MutationError, match="no parent source"):
        extract_model_new(_edit("a", "b"))


def test_unterminated_search_replace() -> None:
    with pytest.raises(MutationError, match="not terminated"):
        extract_model_new("<<<<<<< SEARCH\n        self.scale = 2.0\n=======\n", PARENT)


def test_edit_that_breaks_syntax_is_reported() -> None:
    reply = _edit("        return x * self.scale", "        return (x * self.scale")
    with pytest.raises(MutationError, match="syntax error in edited parent at line"):
        extract_model_new(reply, PARENT)


# ---- shapes issue 36 found in real replies ------------------------------------------------------


def test_search_text_whose_indentation_was_lost_applies_at_the_parents_depth() -> None:
    # The model quoted the method body at column 0; the edit must land inside forward().
    reply = _edit("return x * self.scale", "y = x * self.scale\nreturn y + 0.0")
    source = extract_model_new(reply, PARENT)
    assert "        y = x * self.scale\n        return y + 0.0" in source
    assert "return x * self.scale" not in source


def test_search_text_dedented_as_a_block_keeps_its_relative_indentation() -> None:
    reply = _edit(
        "def forward(self, x):\n    return x * self.scale",
        "def forward(self, x):\n    x = x.contiguous()\n    return x * self.scale",
    )
    source = extract_model_new(reply, PARENT)
    assert "    def forward(self, x):\n        x = x.contiguous()\n        return x * self.scale" in source


def test_a_failing_search_replace_beside_a_complete_file_uses_the_file() -> None:
    reply = (
        _edit("        self.scale = 9.0", "        self.scale = 3.0")
        + "\nOr, the whole file:\n```python\n"
        + MODEL_NEW
        + "```\n"
    )
    assert extract_model_new(reply, PARENT) == MODEL_NEW


def test_a_failing_search_replace_without_a_file_still_says_why() -> None:
    reply = _edit("        self.scale = 9.0", "        self.scale = 3.0")
    with pytest.raises(MutationError, match="SEARCH text is not found"):
        extract_model_new(reply, PARENT)


def test_a_fence_indented_inside_a_list_item() -> None:
    body = "\n".join("    " + line if line else "" for line in MODEL_NEW.splitlines())
    reply = f"Steps:\n\n1. Replace the module:\n\n    ```python\n{body}\n    ```\n2. Run it.\n"
    source = extract_model_new(reply)
    assert source == MODEL_NEW


def test_model_new_as_an_alias_of_another_class() -> None:
    code = MODEL_NEW.replace("class ModelNew", "class FastDouble") + "\n\nModelNew = FastDouble\n"
    source = extract_model_new(f"```python\n{code}```")
    assert "ModelNew = FastDouble" in source


def test_module_block_followed_by_its_kernel_block_keeps_the_kernel() -> None:
    module = (
        "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return double(x)\n"
    )
    kernel = "def double(x):\n    return x * 2\n"
    reply = f"The module:\n```python\n{module}```\nand the kernel it calls:\n```python\n{kernel}```\n"
    source = extract_model_new(reply)
    assert "def double" in source and source.index("def double") < source.index("class ModelNew")
    namespace: dict[str, object] = {}
    exec(compile(source, "candidate", "exec"), namespace)  # the combined file runs as one module
    assert "double" in namespace
