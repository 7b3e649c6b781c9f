"""The ``tune`` operator: change a Triton candidate's knobs without an LLM.

Knobs are integer literals the kernel's performance depends on and its correctness should not:
constexpr block sizes passed at a launch site (``kernel[grid](..., BLOCK_M=64)``) or in a
``triton.Config({...})``, and ``num_warps`` / ``num_stages``. They are found in the AST and
rewritten in place, so the rest of the source (and its formatting) is untouched. Values stay in
sets that compile on current GPUs; a value the kernel's masks cannot handle fails verification
like any other wrong candidate, and selection moves on.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

from evokernel.mutators.base import MutationRequest, MutationResult, Mutator
from evokernel.types import source_hash

POW2 = tuple(2**i for i in range(11))  # 1 .. 1024
# Block sizes below 16 break tl.dot on every current GPU; above 1024 a tile no longer fits the
# register file / shared memory of an H100 for any dtype evokernel targets.
CHOICES: dict[str, tuple[int, ...]] = {
    "BLOCK": tuple(v for v in POW2 if 16 <= v <= 1024),
    "GROUP": (1, 2, 4, 8, 16),
    "num_warps": (1, 2, 4, 8, 16),
    "num_stages": (1, 2, 3, 4, 5),
}
# How many random draws to spend looking for a knob setting not evaluated before.
MAX_DRAWS = 64


@dataclass(frozen=True)
class Knob:
    name: str
    value: int
    choices: tuple[int, ...]
    line: int
    col: int
    end_col: int


def _choices(name: str, value: int) -> tuple[int, ...] | None:
    if name in ("num_warps", "num_stages"):
        return CHOICES[name]
    upper = name.upper() == name
    if upper and "BLOCK" in name:
        return CHOICES["BLOCK"]
    if upper and name.startswith("GROUP"):
        return CHOICES["GROUP"]
    return None


def _is_launch(call: ast.Call) -> bool:
    """``kernel[grid](...)`` or ``triton.Config(...)``."""
    func = call.func
    if isinstance(func, ast.Subscript):
        return True
    return (isinstance(func, ast.Attribute) and func.attr == "Config") or (
        isinstance(func, ast.Name) and func.id == "Config"
    )


def find_knobs(source: str) -> list[Knob]:
    """Tunable integer literals, in source order."""
    knobs: list[Knob] = []

    def add(name: str, node: ast.expr) -> None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            choices = _choices(name, node.value)
            if choices is not None and node.end_col_offset is not None:
                knobs.append(
                    Knob(name, node.value, choices, node.lineno, node.col_offset, node.end_col_offset)
                )

    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not _is_launch(node):
            continue
        for kw in node.keywords:
            if kw.arg is not None:
                add(kw.arg, kw.value)
        for arg in node.args:  # triton.Config({"BLOCK_M": 64, ...}, ...)
            if isinstance(arg, ast.Dict):
                for key, value in zip(arg.keys, arg.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        add(key.value, value)
    return sorted(knobs, key=lambda k: (k.line, k.col))


def apply_values(source: str, knobs: list[Knob], values: list[int]) -> str:
    """Rewrite each knob's literal; offsets are UTF-8 byte columns, as the AST gives them."""
    lines = source.splitlines(keepends=True)
    for knob, value in sorted(
        zip(knobs, values, strict=True), key=lambda kv: (kv[0].line, kv[0].col), reverse=True
    ):
        raw = lines[knob.line - 1].encode()
        lines[knob.line - 1] = (raw[: knob.col] + str(value).encode() + raw[knob.end_col :]).decode()
    return "".join(lines)


def _step(knob: Knob, current: int, rng: random.Random) -> int:
    """Mostly a neighbour in the ordered choice set (local search), sometimes a jump."""
    others = [c for c in knob.choices if c != current]
    if current in knob.choices and rng.random() < 0.75:
        i = knob.choices.index(current)
        neighbours = [knob.choices[j] for j in (i - 1, i + 1) if 0 <= j < len(knob.choices)]
        return rng.choice(neighbours)
    return rng.choice(others)


def _structure(source: str, knobs: list[Knob]) -> str:
    return apply_values(source, knobs, [0] * len(knobs))


class TuneMutator(Mutator):
    name = "tune"
    operators = ("tune",)

    def __init__(self, max_changes: int = 2) -> None:
        self.max_changes = max(1, max_changes)

    async def mutate(self, request: MutationRequest) -> MutationResult:
        if not request.parents:
            return MutationResult(None, error="tune needs a parent candidate")
        parent = request.parents[0].candidate.source
        try:
            knobs = find_knobs(parent)
        except SyntaxError as exc:
            return MutationResult(None, error=f"parent does not parse: {exc}")
        if not knobs:
            return MutationResult(
                None,
                error="the parent has no Triton knobs to tune (no literal BLOCK_*, "
                "num_warps or num_stages at a launch site)",
            )
        rng = random.Random(request.rng_seed)
        base = [k.value for k in knobs]
        if len(request.parents) > 1:  # knob crossover, only between parents of the same structure
            other = request.parents[1].candidate.source
            other_knobs = find_knobs(other)
            if [k.name for k in other_knobs] == [k.name for k in knobs] and _structure(
                other, other_knobs
            ) == _structure(parent, knobs):
                base = [rng.choice((a, b.value)) for a, b in zip(base, other_knobs, strict=True)]
        avoid = request.avoid | {source_hash(parent)}
        for _ in range(MAX_DRAWS):
            values = list(base)
            for i in rng.sample(range(len(knobs)), k=rng.randint(1, min(self.max_changes, len(knobs)))):
                values[i] = _step(knobs[i], values[i], rng)
            child = apply_values(parent, knobs, values)
            if source_hash(child) not in avoid:
                return MutationResult(child)
        return MutationResult(None, error=f"no untried knob setting found in {MAX_DRAWS} draws")
