"""Run one evaluation in a fresh process group that a timeout kills, and classify what came back.

The candidate process gets its own temporary working directory, an environment built from an
allow-list (no API keys, tokens or proxy settings), its output captured with a size cap, and a
new session so that killing the group also kills anything it spawned. The verdict is read from
the result file the harness writes; a process that dies without one is ``crashed`` with the
signal or exit code and the tail of its stderr.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evokernel.evaluation.feedback import tail
from evokernel.types import Evaluation, Status

# Variables a candidate process may inherit. Everything else (OPENAI_API_KEY, AWS_*, HTTP_PROXY,
# ...) is dropped. PYTHONPATH stays because evaluation nodes may install packages with --target.
ENV_ALLOW = (
    "PATH",
    "LANG",
    "LC_ALL",
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TRITON_CACHE_DIR",
    "TRITON_PTXAS_PATH",
    "TORCH_CUDA_ARCH_LIST",
    "CC",
    "CXX",
)
OUTPUT_CAP_BYTES = 64 * 1024


def sandbox_env(device: str, workdir: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
    env.update(
        HOME=str(workdir),
        TMPDIR=str(workdir),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        TORCH_EXTENSIONS_DIR=str(workdir / "torch_extensions"),
        OMP_NUM_THREADS="1",
    )
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_sandboxed(request: dict[str, Any], timeout_s: float) -> Evaluation:
    """Evaluate ``request`` (see harness.py) in a subprocess; never raises for candidate faults."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evk-cand-") as tmp:
        workdir = Path(tmp)
        request_path, result_path = workdir / "request.json", workdir / "result.json"
        request_path.write_text(json.dumps(request))
        stdout_path = workdir / "output.log"
        with stdout_path.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "evokernel.evaluation.harness", str(request_path), str(result_path)],
                cwd=workdir,
                env=sandbox_env(request["device"], workdir),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return Evaluation(
                    status=Status.TIMEOUT,
                    stage="timeout",
                    reason=f"killed after {timeout_s:.0f} s timeout",
                    feedback=f"the evaluation did not finish within {timeout_s:.0f} s",
                    duration_s=time.perf_counter() - start,
                )
            finally:
                # Anything the candidate left running in its group dies with it.
                _kill_group(proc)
        output = _read_capped(stdout_path)
        if code == 0 and result_path.exists():
            try:
                data = json.loads(result_path.read_text())
                evaluation = Evaluation.from_dict(data)
            except (ValueError, KeyError, TypeError) as exc:
                return _crashed(f"unreadable result file: {exc}", output, start)
            details = dict(evaluation.details)
            if output.strip():
                details["output_tail"] = tail(output, 2000)
            return Evaluation.from_dict(
                {**evaluation.to_dict(), "details": details, "duration_s": time.perf_counter() - start}
            )
        if code < 0:
            return _crashed(f"killed by signal {signal.Signals(-code).name}", output, start)
        return _crashed(f"exited with code {code} without a result", output, start)


def _crashed(reason: str, output: str, start: float) -> Evaluation:
    return Evaluation(
        status=Status.CRASHED,
        stage="sandbox",
        reason=reason,
        feedback=f"{reason}\n{tail(output, 1200)}".strip(),
        duration_s=time.perf_counter() - start,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    proc.wait()


def _read_capped(path: Path) -> str:
    size = path.stat().st_size
    with path.open("rb") as f:
        if size > OUTPUT_CAP_BYTES:
            f.seek(size - OUTPUT_CAP_BYTES)
        return f.read().decode(errors="replace")
