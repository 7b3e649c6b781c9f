"""The tune operator's search space: a Triton candidate's knobs, their valid values, and rewriting.

Knobs are integer literals the kernel's performance depends on and its correctness should not:
constexpr block sizes passed at a launch site (``kernel[grid](..., BLOCK_M=64)``) or in a
``triton.Config({...})``, and ``num_warps`` / ``num_stages``. They are found in the AST and
rewritten in place, so the rest of the source (and its formatting) is untouched.

Each knob's choices come from how the launched ``@triton.jit`` kernel uses it:

* block sizes are powers of two (``tl.arange`` requires it), at least 16 (``tl.dot`` needs >= 16
  per dimension, and a smaller 1-D block leaves most of a 32-thread warp idle), at most 256 in a
  kernel that calls ``tl.dot`` (a 256x256 fp32 accumulator already fills an SM's register file)
  and at most 8192 otherwise (a whole 4096-8192 row in one block is the classic fast softmax);
* in a kernel with an unmasked ``tl.load``/``tl.store`` a block size only shrinks: the problem
  size is a multiple of the current power of two, so of every smaller one, not of a larger one;
* ``num_warps`` stays within what the launch's tile can use: 32 * num_warps <= tile elements.

A setting that still fails (e.g. too much shared memory on a small GPU) fails verification like
any other wrong candidate, and selection moves on. ``space`` (``mutators.tune.space``) replaces
the derived choices of the knobs it names, e.g. to keep a sweep small.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

POW2 = tuple(2**i for i in range(14))  # 1 .. 8192
MIN_BLOCK = 16
MAX_DOT_BLOCK = 256
MAX_BLOCK = 8192
WARP_SIZE = 32
CHOICES: dict[str, tuple[int, ...]] = {
    "BLOCK": tuple(v for v in POW2 if MIN_BLOCK <= v <= MAX_BLOCK),
    "GROUP": (1, 2, 4, 8, 16),
    "num_warps": (1, 2, 4, 8, 16),
    "num_stages": (1, 2, 3, 4, 5),
}


@dataclass(frozen=True)
class Knob:
    name: str
    value: int
    choices: tuple[int, ...]
    line: int
    col: int
    end_col: int
    # Index of the launch call or triton.Config the knob belongs to (knobs of one launch interact).
    launch: int = 0


@dataclass(frozen=True)
class _KernelUse:
    dot: bool = False
    unmasked: bool = False


def _kernel_uses(tree: ast.Module) -> dict[str, _KernelUse]:
    """Per ``@triton.jit``/``@triton.autotune`` function: does it call tl.dot, load/store unmasked?"""
    uses: dict[str, _KernelUse] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or not any(
            "jit" in ast.unparse(d) or "autotune" in ast.unparse(d) for d in node.decorator_list
        ):
            continue
        dot = unmasked = False
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                dot |= call.func.attr == "dot"
                if call.func.attr in ("load", "store"):
                    masked = any(kw.arg in ("mask", "boundary_check") for kw in call.keywords)
                    unmasked |= not masked and len(call.args) < (2 if call.func.attr == "load" else 3)
        uses[node.name] = _KernelUse(dot, unmasked)
    return uses


def _launched_kernel(call: ast.Call, configs_of: Mapping[int, str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Subscript):
        target = func.value
        return target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
    return configs_of.get(id(call))


def _configs_of(tree: ast.Module) -> dict[int, str]:
    """``triton.Config`` calls written inside a kernel's ``@triton.autotune(...)`` decorator."""
    out: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                for call in ast.walk(deco):
                    if isinstance(call, ast.Call):
                        out[id(call)] = node.name
    return out


def _choices(name: str, value: int, use: _KernelUse | None) -> tuple[int, ...] | None:
    if name in ("num_warps", "num_stages"):
        return CHOICES[name]
    upper = name.upper() == name
    if upper and name.startswith("GROUP"):
        return CHOICES["GROUP"]
    if not is_block(name):
        return None
    hi = MAX_DOT_BLOCK if use is not None and use.dot else MAX_BLOCK
    if use is not None and use.unmasked and value in POW2:
        hi = min(hi, max(value, MIN_BLOCK))
    return tuple(v for v in CHOICES["BLOCK"] if v <= hi)


def _is_launch(call: ast.Call) -> bool:
    """``kernel[grid](...)`` or ``triton.Config(...)``."""
    func = call.func
    if isinstance(func, ast.Subscript):
        return True
    return (isinstance(func, ast.Attribute) and func.attr == "Config") or (
        isinstance(func, ast.Name) and func.id == "Config"
    )


def find_knobs(source: str, space: Mapping[str, Sequence[int]] | None = None) -> list[Knob]:
    """Tunable integer literals, in source order; ``space`` overrides the choices of named knobs."""
    tree = ast.parse(source)
    uses, configs_of = _kernel_uses(tree), _configs_of(tree)
    knobs: list[Knob] = []
    launches = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_launch(n)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for launch, call in enumerate(launches):
        kernel = _launched_kernel(call, configs_of)
        use = uses.get(kernel) if kernel else None

        def add(name: str, node: ast.expr, launch: int = launch, use: _KernelUse | None = use) -> None:
            if isinstance(node, ast.Constant) and type(node.value) is int and node.end_col_offset is not None:
                choices = _choices(name, node.value, use)
                if space is not None and name in space:
                    choices = tuple(sorted(set(space[name])))
                if choices:
                    knobs.append(
                        Knob(
                            name,
                            node.value,
                            choices,
                            node.lineno,
                            node.col_offset,
                            node.end_col_offset,
                            launch,
                        )
                    )

        for kw in call.keywords:
            if kw.arg is not None:
                add(kw.arg, kw.value)
        for arg in call.args:  # triton.Config({"BLOCK_M": 64, ...}, ...)
            if isinstance(arg, ast.Dict):
                for key, value in zip(arg.keys, arg.values, strict=True):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        add(key.value, value)
    return sorted(knobs, key=lambda k: (k.line, k.col))


def is_block(name: str) -> bool:
    """A tile-size knob: an upper-case constexpr with BLOCK in its name."""
    return name.upper() == name and "BLOCK" in name


def launch_groups(knobs: Sequence[Knob]) -> list[tuple[list[int], int]]:
    """Per launch that has both (in launch order): the indices of its block knobs and of its
    ``num_warps`` -- the pairs the warp limit and the tune model's work-per-warp feature use."""
    groups = []
    for launch in sorted({k.launch for k in knobs}):
        blocks = [i for i, k in enumerate(knobs) if k.launch == launch and is_block(k.name)]
        warps = [i for i, k in enumerate(knobs) if k.launch == launch and k.name == "num_warps"]
        if blocks and warps:
            groups.append((blocks, warps[0]))
    return groups


def valid_setting(knobs: Sequence[Knob], values: Sequence[int]) -> bool:
    """Whether ``values`` respect the joint limit: per launch, 32 * num_warps <= tile elements."""
    return all(
        WARP_SIZE * values[warp] <= math.prod(values[i] for i in blocks)
        for blocks, warp in launch_groups(knobs)
    )


def apply_values(source: str, knobs: list[Knob], values: list[int]) -> str:
    """Rewrite each knob's literal; offsets are UTF-8 byte columns, as the AST gives them."""
    lines = source.splitlines(keepends=True)
    for knob, value in sorted(
        zip(knobs, values, strict=True), key=lambda kv: (kv[0].line, kv[0].col), reverse=True
    ):
        raw = lines[knob.line - 1].encode()
        lines[knob.line - 1] = (raw[: knob.col] + str(value).encode() + raw[knob.end_col :]).decode()
    return "".join(lines)


def nearest(choices: tuple[int, ...], value: int) -> int:
    """The choice closest to ``value`` on a log scale (knob values are mostly powers of two)."""
    return min(choices, key=lambda c: abs(math.log2(max(c, 1)) - math.log2(max(value, 1))))


def structure(source: str, knobs: list[Knob]) -> str:
    """The source with every knob literal zeroed: candidates that differ only in knobs share it."""
    return apply_values(source, knobs, [0] * len(knobs))
