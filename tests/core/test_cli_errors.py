"""Mistakes a new user makes, as typed (subprocesses, real files): each stops at the start with one
line on stderr and exit 2, creates nothing, and names what to fix (issue 38)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "experiments/quickstart.yaml")


def evokernel(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evokernel", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evokernel: error: "), out.stderr
    return lines[0]


def test_a_missing_llm_key_stops_before_the_library_or_ray(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    out = evokernel(
        "run", QUICKSTART, "mutators.llm.model=openai/gpt-4o", f"library={tmp_path / 'x.db'}", env=env
    )
    line = one_line_error(out)
    assert "OPENAI_API_KEY" in line and "openai/gpt-4o" in line
    assert out.stdout == ""  # not even "starting Ray"
    assert not (tmp_path / "x.db").exists()


def test_a_missing_api_key_env_is_named_too(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "EVOKERNEL_TEST_NO_SUCH_KEY"}
    out = evokernel(
        "sweep",
        QUICKSTART,
        "seed=0,1",
        "mutators.llm.model=openai/gpt-4o",
        "mutators.llm.api_key_env=EVOKERNEL_TEST_NO_SUCH_KEY",
        f"library={tmp_path / 'x.db'}",
        env=env,
    )
    assert "EVOKERNEL_TEST_NO_SUCH_KEY" in one_line_error(out)
    assert not (tmp_path / "x.db").exists()


@pytest.mark.slow
def test_a_run_whose_every_llm_call_failed_does_not_exit_0_and_ray_is_announced(tmp_path: Path) -> None:
    # A local server that is not there: nothing to authenticate, every call refused.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nobody listens there
    out = evokernel(
        "run",
        QUICKSTART,
        "mutators.llm.model=openai/served",
        f"mutators.llm.api_base=http://127.0.0.1:{port}/v1",
        "mutators.llm.input_cost_per_mtok=0",
        "mutators.llm.max_retries=0",
        "budget.evaluations=2",
        "tasks=[tasks/level1/softmax.py]",
        f"library={tmp_path / 'x.db'}",
        timeout=300,
    )
    assert out.returncode == 1, out.stderr[-2000:]
    # The wait for Ray is announced before it happens (it was ~8 s of silence on 2 cores).
    lines = out.stdout.splitlines()
    ray_line = next(i for i, line in enumerate(lines) if line.startswith("starting Ray"))
    assert ray_line < next(i for i, line in enumerate(lines) if line.startswith("run "))
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("evokernel: error: all ") and "LLM calls" in last and "failed" in last


@pytest.mark.slow
def test_a_sweep_whose_cells_llm_calls_all_failed_does_not_exit_0(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = evokernel(
        "sweep",
        QUICKSTART,
        "seed=0,1",
        "mutators.llm.model=openai/served",
        f"mutators.llm.api_base=http://127.0.0.1:{port}/v1",
        "mutators.llm.input_cost_per_mtok=0",
        "mutators.llm.max_retries=0",
        "budget.evaluations=2",
        "tasks=[tasks/level1/softmax.py]",
        f"library={tmp_path / 'x.db'}",
        timeout=300,
    )
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert out.stderr.strip().splitlines()[-1] == "evokernel: error: every LLM call of cell(s) 0, 1 failed"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgres://user:hunter2@host:notaport/db", "'notaport' is not a number"),
        ("sqlit:///x.db", "unknown database kind 'sqlit'"),
        ("postgres://user@host/db", "postgresql+psycopg://"),
    ],
)
def test_a_bad_library_url_is_one_line_naming_it(tmp_path: Path, url: str, named: str) -> None:
    out = evokernel("run", QUICKSTART, f"library={url}", cwd=tmp_path)
    line = one_line_error(out)
    assert named in line and "library URL" in line
    assert "hunter2" not in out.stderr
    assert list(tmp_path.iterdir()) == []
    # the read-only commands say the same
    assert named in one_line_error(evokernel("runs", "--library", url, cwd=tmp_path))


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "exp.yaml"
    bad.write_text("name: x\nbudget: {evaluations: 3\nseed: 1\n")
    line = one_line_error(evokernel("run", str(bad)))
    assert "exp.yaml" in line and "line 3" in line and "YAML" in line


@pytest.mark.parametrize("command", ["runs", "report", "export", "dashboard"])
def test_read_only_commands_refuse_a_library_that_does_not_exist(tmp_path: Path, command: str) -> None:
    extra = ["--out", str(tmp_path / "best")] if command == "export" else []
    for library in (tmp_path / "swep.db", tmp_path / "no" / "dir" / "x.db"):
        line = one_line_error(evokernel(command, "--library", str(library), *extra, cwd=tmp_path))
        assert f"no library at {library}" in line and f"evokernel {command}" in line
    assert list(tmp_path.iterdir()) == []  # neither swep.db nor no/dir/ was created


def test_a_read_only_command_that_cannot_reach_its_server_says_so(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = one_line_error(evokernel("report", "--library", f"postgresql+psycopg://u@127.0.0.1:{port}/lib"))
    assert "cannot reach the library" in line and "migrate" not in line


def test_a_missing_task_path_names_both_places_tried(tmp_path: Path) -> None:
    config = tmp_path / "configs" / "exp.yaml"
    config.parent.mkdir()
    config.write_text("tasks: [tasks/nope.py]\n")
    work = tmp_path / "work"
    work.mkdir()
    line = one_line_error(evokernel("run", str(config), f"library={tmp_path / 'x.db'}", cwd=work))
    assert str(tmp_path / "configs" / "tasks" / "nope.py") in line
    assert str(work / "tasks" / "nope.py") in line
    assert not (tmp_path / "x.db").exists()
