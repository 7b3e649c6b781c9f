"""Turn an LLM reply into one Python file that defines ``class ModelNew``.

Replies come in three shapes, tried in this order:

1. SEARCH/REPLACE blocks edited into the parent source (:mod:`evokernel.mutators.edits`). When the
   edits do not apply but the reply also holds a complete file, the file is used.
2. Fenced code blocks (backticks or tildes, any info string, indented any depth, e.g. inside a
   list item). The last block that parses and defines ``ModelNew`` (a class, or an alias such as
   ``ModelNew = FastModel``) wins: models often show the old code first and the answer last. When
   that block uses names that only another block defines (kernel in one block, module in the next,
   in either order), those blocks are put before it. An unterminated final fence (reply cut at
   ``max_tokens``) counts as a block running to the end of the reply.
3. No fences: the whole reply, or the reply from its first ``import``/``from`` line, if it parses.

Anything else raises :class:`~evokernel.exceptions.MutationError` with a reason that goes into the
library and, for ``fix`` proposals, back into the next prompt.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass

from evokernel.exceptions import MutationError
from evokernel.mutators.edits import apply_search_replace, has_edits

TARGET_CLASS = "ModelNew"

_THINK = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL)
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)[^`]*$")
_CODE_START = re.compile(r"^(import |from \S+ import )")


@dataclass(frozen=True)
class _Block:
    code: str
    info: str
    terminated: bool


def extract_model_new(reply: str, parent_source: str | None = None) -> str:
    """Return the candidate source in ``reply`` (ending in one newline) or raise MutationError."""
    # Reasoning models (DeepSeek-R1, Qwen3) wrap drafts in <think>; an unclosed one means the
    # reply was cut while still thinking, so nothing after it is an answer.
    text = _THINK.sub("", reply).replace("\r\n", "\n")
    if not text.strip():
        raise MutationError("reply is empty (no code)")
    lines = text.split("\n")
    blocks = _fenced_blocks(lines)
    if has_edits(lines):
        try:
            if parent_source is None:
                raise MutationError("reply has SEARCH/REPLACE blocks but there is no parent source to edit")
            return _validate(apply_search_replace(parent_source, lines), "edited parent")
        except MutationError:
            # A complete file beside edits that do not apply is still an answer.
            whole = [b for b in blocks if not has_edits(b.code.split("\n"))]
            if not any(t is not None and _defines_target(t) for t in map(_parse, (b.code for b in whole))):
                raise
            return _from_blocks(whole)
    if blocks:
        return _from_blocks(blocks)
    return _from_unfenced(text)


def _validate(source: str, where: str) -> str:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise MutationError(f"syntax error in {where} at line {e.lineno}: {e.msg}") from e
    if not _defines_target(tree):
        raise MutationError(f"reply has no class {TARGET_CLASS} ({where} defines none at top level)")
    return source.strip("\n") + "\n"


def _defines_target(tree: ast.Module) -> bool:
    """A top-level ``class ModelNew`` or an alias assigned to the name (``ModelNew = Fast``)."""
    for n in tree.body:
        if isinstance(n, ast.ClassDef) and n.name == TARGET_CLASS:
            return True
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, ast.AnnAssign):
            targets = [n.target]
        if any(isinstance(t, ast.Name) and t.id == TARGET_CLASS for t in targets):
            return True
    return False


def _mentions_target(code: str) -> bool:
    return re.search(rf"\b(class\s+{TARGET_CLASS}\b|{TARGET_CLASS}\s*=)", code) is not None


# ---------------------------------------------------------------------------- fenced blocks


def _fenced_blocks(lines: list[str]) -> list[_Block]:
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent").expandtabs())
        # A closing fence uses the same character, at least as many, and nothing after it.
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            j += 1
        # A fence indented inside a list item indents its code as deep: take that much off.
        body = [_dedent(line, indent) for line in lines[i + 1 : j]]
        blocks.append(_Block("\n".join(body), m.group("info").lower(), j < len(lines)))
        i = j + 1
    return blocks


def _dedent(line: str, width: int) -> str:
    expanded = line.expandtabs()
    return expanded[min(width, len(expanded) - len(expanded.lstrip())) :]


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def _from_blocks(blocks: list[_Block]) -> str:
    trees = [_parse(b.code) for b in blocks]
    for k in range(len(blocks) - 1, -1, -1):
        tree = trees[k]
        if tree is not None and _defines_target(tree):
            return _with_helpers(blocks, trees, k)
    # No usable block: report the most useful failure, the last block that tried to define it.
    for b in reversed(blocks):
        if _mentions_target(b.code):
            where = "code block" if b.terminated else "unterminated code block (reply truncated?)"
            return _validate(b.code, where)
    last = blocks[-1]
    if not last.terminated and _parse(last.code) is None:
        raise MutationError(
            f"reply has no class {TARGET_CLASS} (last code block is unterminated: truncated?)"
        )
    raise MutationError(f"reply has no class {TARGET_CLASS} in any of its {len(blocks)} code block(s)")


def _with_helpers(blocks: list[_Block], trees: list[ast.Module | None], k: int) -> str:
    """Prepend other blocks (earlier ones first, then later ones) that define top-level names block
    ``k`` uses but does not define: a module block may come before or after its kernel block."""
    tree = trees[k]
    assert tree is not None
    missing = _free_names(tree)
    parts: list[str] = []
    others = [i for i in range(len(blocks)) if i != k]
    for b, t in ((blocks[i], trees[i]) for i in others):
        if t is None or not missing:
            continue
        provided = _top_level_names(t) & missing
        if provided and not _defines_target(t):
            parts.append(b.code)
            missing -= provided
    if not parts:
        return _validate(blocks[k].code, "code block")
    # Imports of the helper blocks are needed too; duplicates of imports are harmless.
    return _validate("\n\n".join([*parts, blocks[k].code]), "combined code blocks")


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _free_names(tree: ast.Module) -> set[str]:
    """Names read anywhere but bound nowhere in the module: a deliberate over-approximation of
    scoping (a name bound in any function counts as bound), which only errs toward not merging."""
    loaded: set[str] = set()
    bound: set[str] = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return loaded - bound


def _from_unfenced(text: str) -> str:
    candidates = [text]
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start:
        candidates.append("\n".join(lines[start:]))
    for code in candidates:
        tree = _parse(code)
        if tree is not None and _defines_target(tree):
            return _validate(code, "reply")
    if _mentions_target(text):
        return _validate(candidates[-1], "reply (no code fence)")
    raise MutationError(f"reply has no class {TARGET_CLASS} (no code block found)")
