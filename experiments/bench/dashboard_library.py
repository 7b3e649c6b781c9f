"""A generated solution library shaped like a long experiment, for the dashboard benchmark.

``--runs`` runs of 4 tasks; the first run (by id) holds ``--big-share`` of the rows and stays
"running"; every candidate has a proposal, an LLM call (prompt and reply), one evaluation with
stage timings, and one parent (10 % crossovers: two); 45 % are correct, the rest spread over every
failure status with ~40 distinct reasons; 4 islands with migrations every 10 generations. Sources,
prompts and replies are ~0.5-1 KB (real ones are 2-8 KB: 1M evaluations make ~3 GB instead of
~15 GB; the page queries read no source but the candidate page's one).

Filled through the shipped migrations, then bulk ``executemany`` inserts in the schema's own
columns, the denormalised ones of migration 0005 as ``SolutionLibrary`` writes them (no ORM:
~4 minutes for 1M evaluations on a 2-core box).
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from evokernel.db import upgrade
from evokernel.db.reason_key import reason_key

TASKS = ("softmax", "rmsnorm", "matmul_fp16", "layernorm")
ISLANDS = 4
PER_GENERATION = 40  # candidates of a task per generation
STATUSES = (
    ("correct", "timing", 45),
    ("compile_error", "build", 18),
    ("incorrect", "correctness", 15),
    ("runtime_error", "correctness", 10),
    ("timeout", "timing", 4),
    ("rejected", "integrity", 5),
    ("crashed", "correctness", 3),
)
REASONS = {
    "compile_error": [
        f"CompilationError: at {i}:{j}: {m}"
        for i, j, m in [
            (12, 4, "unsupported tensor index"),
            (20, 8, "incompatible shapes"),
            (31, 12, "dot requires 2D"),
            (17, 2, "undefined name 'BLOCK'"),
            (9, 6, "constexpr expected"),
        ]
        for _ in range(2)
    ],
    "incorrect": [
        f"variant {v}: max abs error {e} > atol 1e-4" for v in range(3) for e in ("0.031", "1.2", "inf")
    ],
    "runtime_error": [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "ValueError: too many values to unpack",
        "RuntimeError: shape mismatch in output",
    ],
    "timeout": ["timed out after 180 s"],
    "rejected": [
        "rule output_reuse: the output is returned from a cache",
        "rule stream_escape: work left on a side stream",
        "rule baseline_call: the reference's forward was called",
    ],
    "crashed": ["killed by signal 11 (SIGSEGV)", "killed by signal 9 (out of memory)"],
}
KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def kernel_{cid}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, {k}), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        kernel_{cid}[(triton.cdiv(x.numel(), {block}),)](x, y, x.numel(), BLOCK={block}, num_warps={warps})
        return y
"""


# The generated tables' columns, in the order the rows below are built.
COLUMNS = {
    "proposals": (
        "id",
        "run_id",
        "task_id",
        "seq",
        "island",
        "generation",
        "operator",
        "parents",
        "idea",
        "state",
        "reason",
        "raw_reply",
        "created_at",
        "branch",
        "count",
        "ideas",
    ),
    "candidates": (
        "id",
        "run_id",
        "task_id",
        "proposal_id",
        "island",
        "generation",
        "operator",
        "source",
        "source_hash",
        "status",
        "reason",
        "speedup",
        "created_at",
        "branch",
        "stage",
        "reason_key",
        "first_evaluation_id",
        "first_speedup",
    ),
    "evaluations": (
        "id",
        "candidate_id",
        "status",
        "reason",
        "stage",
        "device",
        "interpreter",
        "max_abs_error",
        "runtime_ms",
        "runtime_iqr_ms",
        "runtime_cv",
        "eager_ms",
        "speedup_eager",
        "compile_ms",
        "speedup_compile",
        "feedback",
        "duration_s",
        "details",
        "created_at",
    ),
    "llm_calls": (
        "run_id",
        "proposal_id",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "latency_s",
        "outcome",
        "error",
        "prompt_hash",
        "prompt",
        "reply",
        "created_at",
        "task_id",
    ),
    "island_events": (
        "run_id",
        "task_id",
        "generation",
        "kind",
        "island",
        "candidate_id",
        "from_island",
        "created_at",
    ),
    "candidate_parents": ("child_id", "parent_id", "rank"),
}


def _insert(conn: sqlite3.Connection, table: str, rows: Sequence[tuple[object, ...]]) -> None:
    columns = COLUMNS[table]
    marks = ",".join("?" * len(columns))
    conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")


def fill(path: Path, evaluations: int, runs: int, big_share: float, seed: int = 0) -> None:
    """Write the library (the first run, by id, is the big one)."""
    upgrade(str(path))
    rng = random.Random(seed)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    weights = [w for _s, _st, w in STATUSES]
    t0 = datetime(2026, 11, 1)
    sizes = [int(evaluations * big_share)] + [int(evaluations * (1 - big_share) / max(runs - 1, 1))] * (
        runs - 1
    )
    cid = pid = eid = 0
    for r, size in enumerate(sizes):
        run_id = f"run{r:04d}bench"[:12]
        status = "running" if r == 0 else "finished"
        config = {"strategy": "pike_b", "budget": {"evaluations": size // len(TASKS) + 100}}
        start = t0 + timedelta(days=r)
        conn.execute(
            "INSERT INTO runs (id, name, seed, config, status, created_at, finished_at) VALUES (?,?,?,?,?,?,?)",  # noqa: E501 (one statement per table)
            (
                run_id,
                f"bench-{r}",
                r,
                json.dumps(config),
                status,
                _ts(start),
                None if r == 0 else _ts(start + timedelta(hours=20)),
            ),
        )
        conn.execute(
            "INSERT INTO run_events (run_id, kind, message, data, created_at) VALUES (?,?,?,?,?)",
            (run_id, "started", "", "{}", _ts(start)),
        )
        for pos, name in enumerate(TASKS):
            task_id = conn.execute(
                "INSERT INTO tasks (name, source_hash, source, path, level, meta, created_at) VALUES (?,?,?,?,?,?,?)",  # noqa: E501 (one statement per table)
                (f"{name}", f"{r:04d}{pos:012d}", f"# {name}\n", f"/tasks/{name}.py", 1, "{}", _ts(start)),
            ).lastrowid
            conn.execute(
                "INSERT INTO run_tasks (run_id, task_id, name, position) VALUES (?,?,?,?)",
                (run_id, task_id, name, pos),
            )
            conn.executemany(
                'INSERT INTO islands (run_id, task_id, "index", created_at) VALUES (?,?,?,?)',
                [(run_id, task_id, i, _ts(start)) for i in range(ISLANDS)],
            )
            n = size // len(TASKS)
            props, cands, parents, evals, calls, events = [], [], [], [], [], []
            first = cid + 1
            for k in range(n):
                cid += 1
                pid += 1
                eid += 1
                gen = k // PER_GENERATION
                island = k % ISLANDS
                at = start + timedelta(seconds=2 * k + pos)
                status, stage, *_ = rng.choices(STATUSES, weights)[0]
                par: list[int] = []
                if k:
                    par = [rng.randrange(max(first, cid - 400), cid)]
                    if rng.random() < 0.1:
                        par.append(rng.randrange(max(first, cid - 400), cid))
                        par = sorted(set(par))
                op = "seed" if not k else ("crossover" if len(par) > 1 else "mutate")
                props.append(
                    (
                        pid,
                        run_id,
                        task_id,
                        k,
                        island,
                        gen,
                        op,
                        json.dumps(par),
                        "tile the reduction",
                        "done",
                        "",
                        "",
                        _ts(at),
                        0,
                        1,
                        "[]",
                    )
                )
                speedup = (
                    round(rng.lognormvariate(0.0, 0.35) * (1 + gen / 2000), 4)
                    if status == "correct"
                    else None
                )
                reason = rng.choice(REASONS[status]) if status != "correct" else ""
                source = KERNEL.format(
                    cid=cid, k=k % 7, block=rng.choice((128, 256, 512, 1024)), warps=rng.choice((2, 4, 8))
                )
                cands.append(
                    (
                        cid,
                        run_id,
                        task_id,
                        pid,
                        island,
                        gen,
                        op,
                        source,
                        f"{cid:016x}",
                        status,
                        reason,
                        speedup,
                        _ts(at),
                        0,
                        stage,  # what SolutionLibrary.record_evaluation stores with the verdict
                        reason_key(reason),
                        eid,
                        speedup,
                    )
                )
                parents += [(cid, p, i) for i, p in enumerate(par)]
                stages = [
                    {
                        "stage": "queue",
                        "status": "passed",
                        "reason": "",
                        "seconds": round(rng.random() * 0.2, 4),
                    },
                    {
                        "stage": "build",
                        "status": "passed" if status != "compile_error" else "failed",
                        "reason": "",
                        "seconds": round(rng.random() * 3, 3),
                    },
                ]
                details = {
                    "stages": stages,
                    "profile": "strict",
                    "gpu_lock": {"wait_s": 0.05, "exclusive_s": 0.4, "shared_s": 0.3},
                }
                rt = 1.0 / speedup if speedup else None
                evals.append(
                    (
                        eid,
                        cid,
                        status,
                        reason,
                        stage,
                        "NVIDIA H100 80GB HBM3",
                        0,
                        1e-6 if speedup else None,
                        rt,
                        0.001 if rt else None,
                        0.01 if rt else None,
                        1.0 if rt else None,
                        speedup,
                        0.8 if rt else None,
                        (0.8 / rt) if rt else None,
                        reason,
                        4.2,
                        json.dumps(details),
                        _ts(at + timedelta(seconds=1)),
                    )
                )
                if op != "seed":
                    prompt = (
                        f"You write Triton kernels. Improve candidate {par[0]} of {name}:\n" + source[:400]
                    )
                    calls.append(
                        (
                            run_id,
                            pid,
                            "openai/gpt-5-mini",
                            2400,
                            900,
                            0.0021,
                            8.5,
                            "ok",
                            "",
                            f"{pid:016x}",
                            prompt,
                            "```python\n" + source + "```",
                            _ts(at),
                            task_id,
                        )
                    )
                if k and k % (PER_GENERATION * 10) == 0:
                    events += [
                        (run_id, task_id, gen, "migrate", (i + 1) % ISLANDS, cid - 1, i, _ts(at))
                        for i in range(ISLANDS)
                    ]
            _insert(conn, "proposals", props)
            _insert(conn, "candidates", cands)
            _insert(conn, "candidate_parents", parents)
            _insert(conn, "evaluations", evals)
            _insert(conn, "llm_calls", calls)
            _insert(conn, "island_events", events)
            conn.commit()
    conn.execute("ANALYZE")
    conn.commit()
    conn.close()
