"""Inspirations from other tasks: the best kernels the library holds for tasks of the same operator
family or bottleneck class (issue 36, item 4; ``llm.exemplars``, off by default).

No system the field anchors to shows other tasks' kernels in the open; the seeds' "external memory"
axis is the reason to try. A task's family is read from its reference source (the first of
``FAMILIES`` whose pattern it contains, else element-wise); its bottleneck class from profiling
when that is on. The section is bounded in characters, and each kernel is labelled as a different
problem, so the model borrows techniques rather than code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evokernel.mutators.templates import clip

FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attention", re.compile(r"scaled_dot_product|attention|MultiheadAttention", re.I)),
    ("convolution", re.compile(r"conv[123]d|conv_transpose|Conv[123]d|ConvTranspose")),
    ("matmul", re.compile(r"matmul|\bbmm\b|\bmm\(|nn\.Linear|F\.linear|einsum|addmm|@")),
    ("normalization", re.compile(r"norm", re.I)),
    ("softmax", re.compile(r"softmax", re.I)),
    ("reduction", re.compile(r"\.(sum|mean|amax|amin|max|min|prod|cumsum|argmax|argmin)\(|reduce")),
)


def family(reference_source: str) -> str:
    """The operator family of a reference program (``elementwise`` when none matches)."""
    body = reference_source.split("def get_inputs", 1)[0]
    return next((name for name, pattern in FAMILIES if pattern.search(body)), "elementwise")


@dataclass(frozen=True)
class Exemplar:
    task: str
    source: str
    speedup: float
    why: str  # "same operator family (matmul)" or "same bottleneck (memory-bound)"


def exemplars_section(exemplars: Sequence[Exemplar], max_chars: int) -> str:
    """The prompt section, at most ``max_chars`` characters of code in all ("" with none)."""
    if not exemplars or max_chars <= 0:
        return ""
    share = max_chars // len(exemplars)
    parts = [
        f"\n### `{e.task}` ({e.why}; {e.speedup:.3g}x its eager)\n"
        f"```python\n{clip(e.source.strip(), share)}\n```\n"
        for e in exemplars
    ]
    return "\n## Fast kernels of related tasks (different problems: borrow techniques, not code)\n" + "".join(
        parts
    )
