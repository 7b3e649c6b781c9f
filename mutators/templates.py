"""Prompt template files under ``mutators/prompts/`` and the text clipping every prompt part uses."""

from __future__ import annotations

import functools
from importlib import resources
from string import Template


@functools.cache
def load_template(name: str) -> Template:
    """``mutators/prompts/<name>.md`` as a :class:`string.Template` (``$var``, ``$$`` for ``$``)."""
    path = resources.files("evokernel.mutators") / "prompts" / f"{name}.md"
    return Template(path.read_text(encoding="utf-8"))


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters by dropping its middle, with a marker saying how much."""
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters cut ...]\n"
    half = (limit - len(marker)) // 2
    return text[:half] + marker + text[-half:]
