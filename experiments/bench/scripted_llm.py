"""A seeded, scripted OpenAI-compatible server that answers like an LLM does, for benchmarks.

    with ScriptedLLM(seed=0) as llm:          # llm.url is the api_base to give litellm
        ...                                    # llm.log: (kind, prompt chars, reply shape) per call

It answers ``POST /v1/chat/completions`` for the benchmark task ``data/llm_spend_axpy.py``
(y = 3x + b) from what the request is, never from a queue, so concurrency does not change a run's
replies: the reply shape and the kernel's knobs are drawn from ``random.Random`` seeded by the
seed and the SHA-256 of the conversation. Kinds are recognised from the prompt templates: ideas,
seed, mutate, crossover, fix, and repair (a conversation with an assistant turn in it).

Reply mix of a first answer (seed, mutate, crossover), stated in ``FIRST_MIX``: correct kernels in
several dresses (prose plus one block, a ``<think>`` preamble, two blocks with the old code first,
the module block before its kernel block, SEARCH/REPLACE edits of the parent, some with their
indentation lost), and failures (a syntax error, a reply without code, a wrong result, an output
of the wrong shape, a kernel that does not compile, the reference renamed to ``ModelNew``).
Fixes and repairs answer with ``REPAIR_MIX`` (mostly correct). Usage is reported as characters/4
tokens, so the benchmark's prices turn it into dollars. Knobs (block, warps, stages, expression:
540 sources) are drawn at random whatever the prompt says, so duplicates happen, and a repair
asked for "a real change" can repeat an evaluated source again. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FIRST_MIX: dict[str, float] = {
    "prose_block": 0.22,
    "think": 0.10,
    "two_blocks": 0.08,
    "module_then_kernel": 0.06,
    "search_replace": 0.10,
    "search_replace_dedented": 0.04,
    "syntax_error": 0.10,
    "no_code": 0.05,
    "wrong_result": 0.08,
    "wrong_shape": 0.05,
    "no_compile": 0.07,
    "reference_renamed": 0.05,
}
REPAIR_MIX: dict[str, float] = {"prose_block": 0.6, "think": 0.25, "syntax_error": 0.1, "wrong_result": 0.05}
# 9 x 5 x 4 x 3 = 540 distinct kernels: a 40-evaluation run sees a few repeats, as a model that
# keeps proposing the usual block sizes does, without exhausting the space.
BLOCKS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4)
EXPRS = ("3.0 * x + b", "x * 3.0 + b", "b + 3.0 * x")

KERNEL = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _axpy(x_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, {expr}, mask=mask)
"""
MODULE = """

class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
        _axpy[grid](x, b, y, n, BLOCK={block}, num_warps={warps}, num_stages={stages})
        return y{tail}
"""
REFERENCE_RENAMED = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return 3.0 * x + b
"""
IDEAS = [
    "Use a larger BLOCK so each program moves more bytes per launch and the grid shrinks.",
    "Lower num_warps so each warp keeps more loads in flight on this tiny element-wise kernel.",
    "Fold the scale into a single fused multiply-add and keep the loads contiguous and vectorised.",
    "Launch fewer programs with a persistent grid-stride loop to amortise the launch overhead.",
    "Reorder the expression so the compiler can use one FMA per element instead of two ops.",
    "Pick the block size per input size: small inputs get small blocks, large ones large blocks.",
    "Drop the mask on full blocks and mask only the tail block, saving predicate work.",
    "Use 128-bit vector loads by aligning the block to multiples of 4 elements.",
    "Cache-modifier hints (evict_first) on the streaming loads so they do not pollute L2.",
    "Split the launch into a main body and a tail launch to avoid masking in the body.",
    "Tune num_stages for the loads so more memory transactions overlap.",
    "Write the output in place into b when b is not needed afterwards, halving allocations.",
]


def _pick(rng: random.Random, mix: dict[str, float]) -> str:
    return rng.choices(list(mix), weights=list(mix.values()))[0]


def kernel_source(rng: random.Random, expr: str | None = None, tail: str = "") -> tuple[str, str]:
    """(kernel part, module part) with knobs drawn from ``rng``."""
    block, warps, stages = rng.choice(BLOCKS), rng.choice(WARPS), rng.choice(STAGES)
    return (
        KERNEL.format(expr=expr or rng.choice(EXPRS)),
        MODULE.format(block=block, warps=warps, stages=stages, tail=tail),
    )


def _parent(prompt: str) -> str | None:
    found = re.search(r"## Current implementation\n```python\n(.*?)\n```", prompt, re.DOTALL)
    return found.group(1) if found else None


def _edit(parent: str, rng: random.Random, dedent: bool) -> str | None:
    """SEARCH/REPLACE edits of the parent's launch line (None if it has none)."""
    line = next((ln for ln in parent.split("\n") if "_axpy[grid]" in ln), None)
    if line is None:
        return None
    new = re.sub(r"BLOCK=\d+", f"BLOCK={rng.choice(BLOCKS)}", line)
    new = re.sub(r"num_warps=\d+", f"num_warps={rng.choice(WARPS)}", new)
    new = re.sub(r"num_stages=\d+", f"num_stages={rng.choice(STAGES)}", new)
    if dedent:
        line, new = line.strip(), new.strip()
    return f"Only the launch changes:\n\n<<<<<<< SEARCH\n{line}\n=======\n{new}\n>>>>>>> REPLACE\n"


def code_reply(shape: str, rng: random.Random, prompt: str) -> str:
    """A reply of ``shape`` to a code request whose last user message is ``prompt``."""
    kernel, module = kernel_source(rng)
    full = kernel + module
    if shape in ("search_replace", "search_replace_dedented"):
        parent = _parent(prompt)
        edit = _edit(parent, rng, shape.endswith("dedented")) if parent else None
        if edit is not None:
            return edit
        shape = "prose_block"
    if shape == "prose_block":
        return f"A bigger block moves more bytes per program.\n\n```python\n{full}```\n"
    if shape == "think":
        return f"<think>\nThe kernel is memory bound; try other knobs.\n</think>\n```python\n{full}```"
    if shape == "two_blocks":
        old, _ = kernel_source(rng)
        return f"Before:\n```python\n{old}```\nAfter:\n```python\n{full}```\n"
    if shape == "module_then_kernel":
        return f"The module:\n```python\n{module.strip()}\n```\nIts kernel:\n```python\n{kernel}```\n"
    if shape == "syntax_error":
        broken = full.replace(
            "def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:",
            "def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor",
        )
        return f"Here it is.\n```python\n{broken}```\n"
    if shape == "no_code":
        return "You could raise the block size and lower the warp count; I would try BLOCK=1024."
    if shape == "wrong_result":
        kernel, module = kernel_source(rng, expr="2.0 * x + b")
        return f"```python\n{kernel + module}```"
    if shape == "wrong_shape":
        kernel, module = kernel_source(rng, tail="[:-1]")
        return f"```python\n{kernel + module}```"
    if shape == "no_compile":
        kernel, module = kernel_source(rng, expr="tl.fancy_axpy(x, b, 3.0)")
        return f"```python\n{kernel + module}```"
    if shape == "reference_renamed":
        return f"Plain PyTorch is already optimal here:\n```python\n{REFERENCE_RENAMED}```"
    raise ValueError(f"unknown reply shape {shape!r}")


def classify(messages: list[dict[str, Any]]) -> str:
    """The request's kind, from the prompt templates' opening words."""
    if any(m.get("role") == "assistant" for m in messages):
        return "repair"
    text = str(messages[-1].get("content", ""))
    for kind, opening in (
        ("ideas", "Brainstorm"),
        ("fix", "failed evaluation"),
        ("crossover", "Combine the strengths"),
        ("mutate", "Make the current implementation"),
        ("seed", "Write a first"),
    ):
        if opening in text[:400]:
            return kind
    return "other"


@dataclass
class _State:
    seed: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    log: list[tuple[str, int, str]] = field(default_factory=list)


def answer(state: _State, body: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, shape, reply text) for one completion request."""
    messages = body.get("messages") or []
    conversation = json.dumps(messages, sort_keys=True).encode()
    digest = hashlib.sha256(str(state.seed).encode() + conversation).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    kind = classify(messages)
    prompt = str(messages[-1].get("content", "")) if messages else ""
    if kind == "ideas":
        found = re.search(r"Brainstorm (\d+)", prompt)
        count = int(found.group(1)) if found else 4
        ideas = rng.sample(IDEAS, min(count, len(IDEAS)))
        return kind, "ideas", "```json\n" + json.dumps(ideas, indent=1) + "\n```"
    shape = _pick(rng, REPAIR_MIX if kind in ("fix", "repair") else FIRST_MIX)
    return kind, shape, code_reply(shape, rng, prompt)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the benchmark reads ``log``."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        state = self.server.state
        kind, shape, text = answer(state, body)
        chars = sum(len(str(m.get("content", ""))) for m in body.get("messages") or [])
        with state.lock:
            state.log.append((kind, chars, shape))
        pt, ct = chars // 4, len(text) // 4
        payload = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "bench-model"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class ScriptedLLM:
    def __init__(self, seed: int = 0) -> None:
        self.state = _State(seed)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def log(self) -> list[tuple[str, int, str]]:
        with self.state.lock:
            return list(self.state.log)

    def __enter__(self) -> ScriptedLLM:
        self._server = _Server(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
