"""A KernelBench-style correctness check of published kernels, beside evokernel's verdicts (issue 34).

Issue 34 asks, for every kernel a profile refuses, whether the field's own check would pass it:
models built on the CPU after the same seed and moved to the GPU, one instance of each called on
several seeded inputs, outputs compared by ``allclose`` at 1e-2. This is that check, written
here (KernelBench's ``run_and_check_correctness`` is the model: per-trial seeds drawn from seed 42,
the seed set again before each input draw). Each kernel runs in a process of its own with a time
limit, unconfined: run it on a machine whose state does not matter (the GPU machine), and only on
the published corpus, which ``field_verdicts.py`` has already run confined.

    python3 experiments/bench/kb_check.py --tasks CORPUS/tasks --solutions CORPUS/solutions/orig ... \\
        --verdicts verdicts_strict.jsonl [--trials 3] [--jobs 8] [--out kb.jsonl]

Without ``--all`` only the kernels the verdict streams refused are checked; ``--checked`` reads
earlier ``--out`` files and checks only the kernels they lack (a profile re-run that refuses a few
more, e.g. session 30's kernelbench run in training mode); ``--no-run`` checks nothing and prints
the tables of what was checked before, on any machine. Prints a table per
profile (verdict, rule, what the check says, its max error) and, last, one JSON line: per profile,
how many refusals the check agrees with (it fails them too) and which it passes, by rule.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from field_verdicts import RULE, pair_files

TOLERANCE = 1e-2
SEED = 42


def check_one(task_path: Path, solution: Path, trials: int, device: str) -> dict[str, Any]:
    """In this process: the check of one kernel in both modes, as a JSON-able dict. The models
    are called in training mode as KernelBench's harness leaves them (it never calls ``.eval()``)
    and in eval mode as PIKE's evaluator puts them (``model.eval()``); each profile's table reads
    the mode its field uses (evokernel.evaluation.profiles: ``training``)."""

    from evokernel.evaluation.loading import candidate_class, load_module

    task = load_module(task_path, "kb_task")
    module = load_module(solution, "kb_solution")
    entry = candidate_class(module)
    if entry is None:
        return {"kb_correct": False, "error": "no ModelNew (or own Model) class"}
    modes = {}
    for mode in ("eval", "train"):
        try:
            modes[mode] = _trials(task, entry, trials, device, training=mode == "train")
        except Exception as exc:  # noqa: BLE001 - the candidate's failure in this mode is the result
            modes[mode] = {"kb_correct": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"modes": modes}


def _trials(task: Any, entry: Any, trials: int, device: str, training: bool) -> dict[str, Any]:
    import torch

    def moved(values: Any) -> list[Any]:
        return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]

    torch.manual_seed(SEED)
    init = task.get_init_inputs()
    with torch.no_grad():
        torch.manual_seed(SEED)
        reference = task.Model(*init).to(device).train(training)
        torch.manual_seed(SEED)
        candidate = entry(*init).to(device).train(training)
        torch.manual_seed(SEED)
        seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(trials)]
        passed, worst = 0, 0.0
        for seed in seeds:
            torch.manual_seed(seed)
            inputs = moved(task.get_inputs())
            expected, got = reference(*inputs), candidate(*inputs)
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                shape = getattr(got, "shape", type(got).__name__)
                return {"kb_correct": False, "error": f"output {shape} for {tuple(expected.shape)}"}
            diff = (got.float() - expected.float()).abs()
            worst = max(worst, float(diff.max().item()) if diff.numel() else 0.0)
            passed += bool(torch.allclose(got.float(), expected.float(), atol=TOLERANCE, rtol=TOLERANCE))
    return {"kb_correct": passed == trials, "trials_passed": passed, "trials": trials, "max_abs_error": worst}


def trains(profile: str) -> bool:
    """``profile``'s field calls the models in training mode (evokernel.evaluation.profiles)."""
    from evokernel.evaluation.profiles import PROFILES

    return profile in PROFILES and PROFILES[profile].training


def in_mode(result: dict[str, Any], profile: str) -> dict[str, Any]:
    """The check of ``result`` in the mode ``profile``'s field calls models in (a failure before
    any model ran, e.g. an import error, holds for both)."""
    modes = result.get("modes")
    if not modes:
        return result
    return dict(modes["train" if trains(profile) else "eval"])


def run_one(args: argparse.Namespace, task_path: Path, solution: Path, builds: Path) -> dict[str, Any]:
    """The check in a fresh process (a crash, a hang or a CUDA fault stays with its kernel, its
    extensions built in a directory of its own: two kernels may name theirs alike)."""
    command = [sys.executable, __file__, "--one", str(task_path), str(solution)]
    command += ["--trials", str(args.trials), "--device", args.device]
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(builds)}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"kb_correct": False, "error": f"timed out after {args.timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        result: dict[str, Any] = json.loads(lines[-1])
        return result
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"kb_correct": False, "error": f"exit {done.returncode}: {tail[:300]}"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--one", nargs=2, type=Path, metavar=("TASK", "SOLUTION"), help=argparse.SUPPRESS)
    parser.add_argument("--tasks", type=Path)
    parser.add_argument("--solutions", type=Path, nargs="+")
    parser.add_argument(
        "--verdicts",
        type=Path,
        nargs="*",
        default=[],
        help="field_verdicts --stream files (a later one wins)",
    )
    parser.add_argument("--all", action="store_true", help="check accepted kernels too")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=600.0, help="per kernel, its build included")
    parser.add_argument("--out", type=Path, help="append each kernel's check here (JSON lines)")
    parser.add_argument("--no-run", action="store_true", help="check nothing: tables from --checked alone")
    parser.add_argument(
        "--checked", type=Path, nargs="*", default=[], help="earlier --out files: not run again"
    )
    args = parser.parse_args()
    if args.one:  # an exception fails the process: run_one reports its last line
        print(json.dumps(check_one(args.one[0], args.one[1], args.trials, args.device)))
        return
    if args.tasks is None or not args.solutions:
        parser.error("--tasks and --solutions are required")
    by_name = {f"{s.parent.name}/{s.name}": (t, s) for t, s in pair_files(args.tasks, args.solutions)}
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for path in args.verdicts:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            latest[row["profile"], row["solution"]] = row  # a later line or file wins (a re-run)
    rows = [r for r in latest.values() if args.all or r["status"] != "correct"]
    if not args.verdicts:
        rows = [{"profile": "-", "solution": n, "status": "-", "stage": "-", "reason": ""} for n in by_name]
    earlier: dict[str, dict[str, Any]] = {}
    for path in args.checked:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            earlier[row["solution"]] = row  # a later line wins
    wanted = sorted({r["solution"] for r in rows if r["solution"] in by_name} - earlier.keys())
    if args.no_run:
        print(f"not checked ({len(wanted)}): {' '.join(wanted)}")
        wanted = []
    print(f"{len(wanted)} kernels to check ({len(rows)} verdicts, {len(earlier)} checked before)", flush=True)
    os.environ.setdefault("MAX_JOBS", "2")  # --jobs builds at once share the node's cores

    builds = Path(tempfile.mkdtemp(prefix="kb_check_"))

    def check(name: str) -> tuple[str, dict[str, Any]]:
        folder = builds / name.replace("/", "_").removesuffix(".py")
        result = {"solution": name, **run_one(args, *by_name[name], folder)}
        print(f"{name}: {json.dumps(result)}", flush=True)
        if args.out is not None:
            with args.out.open("a") as f:
                f.write(json.dumps(result) + "\n")
        return name, result

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        checks = {**earlier, **dict(pool.map(check, wanted))}
    summary: dict[str, Any] = {"trials": args.trials, "tolerance": TOLERANCE, "profiles": {}}
    for profile in sorted({r["profile"] for r in rows}):
        mine = [r for r in rows if r["profile"] == profile and r["solution"] in checks]
        print(f"profile {profile}")
        mode = "training" if trains(profile) else "eval"
        print(f"| kernel | verdict | rule | KernelBench-style check ({mode} mode) | max error |")
        print("|---|---|---|---|---|")
        agrees: Counter[str] = Counter()
        passes: Counter[str] = Counter()
        for r in sorted(mine, key=lambda r: r["solution"]):
            kb = in_mode(checks[r["solution"]], profile)
            rule = RULE.search(r.get("reason") or "")
            label = rule.group(1) if rule else f"{r['status']}/{r['stage']}"
            (passes if kb["kb_correct"] else agrees)[label] += 1
            said = "passes" if kb["kb_correct"] else f"fails ({kb.get('error') or 'out of tolerance'})"
            error = kb.get("max_abs_error", "-")
            print(f"| {r['solution']} | {r['status']} | {label} | {said} | {error} |")
        summary["profiles"][profile] = {
            "checked": len(mine),
            "mode": mode,
            "check_fails_too": sum(agrees.values()),
            "check_passes": dict(passes),
            "check_fails_by_rule": dict(agrees),
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
