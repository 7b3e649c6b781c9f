"""SEARCH/REPLACE edits (``<<<<<<< SEARCH`` / ``=======`` / ``>>>>>>> REPLACE``) applied to a parent.

Each SEARCH must match the current text exactly once. Lines are compared with their right-hand
whitespace trimmed, so a model that drops trailing spaces still applies; when that finds nothing,
they are compared with all surrounding whitespace trimmed (models often re-indent the SEARCH text,
e.g. a method body quoted at column 0), and the REPLACE lines are shifted by the indentation the
match had in the parent, so the edit lands at the parent's depth.
"""

from __future__ import annotations

import re

from evokernel.exceptions import MutationError

SEARCH = re.compile(r"^\s*<{5,9} ?SEARCH\s*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9} ?REPLACE\s*$")


def has_edits(lines: list[str]) -> bool:
    return any(SEARCH.match(line) for line in lines)


def _parse_edits(lines: list[str]) -> list[tuple[list[str], list[str]]]:
    edits: list[tuple[list[str], list[str]]] = []
    i = 0
    while i < len(lines):
        if not SEARCH.match(lines[i]):
            i += 1
            continue
        n = len(edits) + 1
        j = i + 1
        while j < len(lines) and not _DIVIDER.match(lines[j]):
            j += 1
        k = j + 1
        while k < len(lines) and not _REPLACE.match(lines[k]):
            k += 1
        if j >= len(lines) or k >= len(lines):
            raise MutationError(f"SEARCH/REPLACE block {n} is not terminated (reply truncated?)")
        edits.append((lines[i + 1 : j], lines[j + 1 : k]))
        i = k + 1
    return edits


def _trim_blank_ends(lines: list[str]) -> list[str]:
    lo, hi = 0, len(lines)
    while lo < hi and not lines[lo].strip():
        lo += 1
    while hi > lo and not lines[hi - 1].strip():
        hi -= 1
    return lines[lo:hi]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _find(hay: list[str], needle: list[str]) -> list[int]:
    width = len(needle)
    return [p for p in range(len(hay) - width + 1) if hay[p : p + width] == needle]


def _shift(lines: list[str], by: int) -> list[str]:
    """``lines`` moved right by ``by`` columns (left when negative, never past a line's text)."""
    if by >= 0:
        return [" " * by + line if line.strip() else line for line in lines]
    return [line[min(-by, _indent(line)) :] for line in lines]


def apply_search_replace(parent_source: str, reply_lines: list[str]) -> str:
    """Apply every SEARCH/REPLACE block in ``reply_lines`` to ``parent_source``, in order."""
    edits = _parse_edits(reply_lines)
    current = parent_source.replace("\r\n", "\n").split("\n")
    total = len(edits)
    for n, (search, replace) in enumerate(edits, start=1):
        # Blank lines around the SEARCH text are layout noise, not part of the anchor.
        anchor = _trim_blank_ends(search)
        if not anchor:
            raise MutationError(f"SEARCH/REPLACE block {n} of {total} has an empty SEARCH section")
        hits = _find([s.rstrip() for s in current], [s.rstrip() for s in anchor])
        new = list(replace)
        if not hits:
            hits = _find([s.strip() for s in current], [s.strip() for s in anchor])
            if len(hits) == 1:
                new = _shift(new, _indent(current[hits[0]]) - _indent(anchor[0]))
        if len(hits) != 1:
            found = "is not found in" if not hits else f"matches {len(hits)} places in"
            raise MutationError(f"SEARCH/REPLACE block {n} of {total}: SEARCH text {found} the parent")
        p = hits[0]
        current = current[:p] + new + current[p + len(anchor) :]
    return "\n".join(current)
