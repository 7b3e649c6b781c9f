"""Turn an LLM's brainstorm reply into a list of distinct optimization ideas.

The ideas prompt asks for a JSON array of strings, but models answer in whatever list form they
like. Tried in order:

1. JSON: a fenced ``json`` block or the outermost ``[...]`` / ``{...}`` of the reply; items may be
   strings or objects (``{"title": ..., "description": ...}``), and an object may wrap the list
   (``{"ideas": [...]}``).
2. A numbered or bulleted Markdown list (``1.``, ``2)``, ``-``, ``*``, ``•``, ``### 1.``): each
   top-level item is one idea; deeper-indented lines and lines that follow an item without a blank
   line continue it, so sub-bullets stay part of their idea.

Ideas are cleaned (Markdown emphasis dropped, whitespace collapsed) and near-duplicates removed
(same words, or >= 90 % similar by :class:`difflib.SequenceMatcher`), since each idea costs a
whole branch of evaluations.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from evokernel.exceptions import MutationError

# An idea is a sentence or three; a longer item is a model that ignored the format, so keep its head.
MAX_IDEA_CHARS = 1200
# Above this SequenceMatcher ratio two ideas are rewordings of each other.
DUPLICATE_RATIO = 0.9

_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL)
_JSON_FENCE = re.compile(r"```+\s*json[^\n]*\n(.*?)(```|\Z)", re.DOTALL | re.IGNORECASE)
_ITEM = re.compile(r"^(?P<indent>\s*)(?:#{1,6}\s*)?(?:\*\*)?(?:\d{1,3}[.):]|[-*+•])\s+(?P<text>\S.*)$")
_EMPHASIS = re.compile(r"(\*\*|__|`)")
_TEXT_KEYS = ("idea", "title", "name", "summary", "description", "details", "rationale", "text")


def parse_ideas(reply: str, count: int | None = None) -> tuple[str, ...]:
    """Distinct ideas in ``reply``, at most ``count``; raises MutationError if it holds none."""
    text = _THINK.sub("", reply).replace("\r\n", "\n").strip()
    if not text:
        raise MutationError("reply is empty (no ideas)")
    items = _from_json(text)
    if items is None:
        items = _from_list(text)
    ideas = _distinct(items)
    if not ideas:
        raise MutationError("reply holds no list of ideas (expected a JSON array or a numbered list)")
    return tuple(ideas[:count] if count is not None else ideas)


def _from_json(text: str) -> list[str] | None:
    candidates = [m.group(1) for m in _JSON_FENCE.finditer(text)]
    for open_, close in (("[", "]"), ("{", "}")):
        start, end = text.find(open_), text.rfind(close)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for chunk in candidates:
        try:
            data = json.loads(chunk)
        except json.JSONDecodeError:
            continue
        items = _json_items(data)
        if items:
            return items
    return None


def _json_items(data: Any) -> list[str]:
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        return _json_items(lists[0]) if len(lists) == 1 else []
    if not isinstance(data, list):
        return []
    items: list[str] = []
    for item in data:
        if isinstance(item, str):
            items.append(item)
        elif isinstance(item, dict):
            parts = [str(item[k]).strip() for k in _TEXT_KEYS if isinstance(item.get(k), str | int | float)]
            items.append(": ".join(p for p in parts if p))
    return items


def _from_list(text: str) -> list[str]:
    lines = text.split("\n")
    matches = [_ITEM.match(line) for line in lines]
    indents = [len(m.group("indent").expandtabs()) for m in matches if m]
    if not indents:
        return []
    top = min(indents)
    items: list[list[str]] = []
    blank_before = False
    for line, match in zip(lines, matches, strict=True):
        indent = len(line) - len(line.lstrip())
        if match and indent == top:
            items.append([match.group("text")])
        elif items and line.strip() and (indent > top or not blank_before):
            # A sub-bullet, an indented paragraph, or a wrapped line of the current item.
            items[-1].append(match.group("text") if match else line.strip())
        blank_before = not line.strip()
    return [" ".join(parts) for parts in items]


def _clean(item: str) -> str:
    text = " ".join(_EMPHASIS.sub("", item).split())
    if len(text) > MAX_IDEA_CHARS:
        text = text[: MAX_IDEA_CHARS - 3].rstrip() + "..."
    return text


def _key(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _distinct(items: list[str]) -> list[str]:
    ideas: list[str] = []
    keys: list[str] = []
    for item in items:
        idea = _clean(item)
        key = _key(idea)
        if not key or any(
            key == k or difflib.SequenceMatcher(None, key, k).ratio() >= DUPLICATE_RATIO for k in keys
        ):
            continue
        ideas.append(idea)
        keys.append(key)
    return ideas
