"""Run progress as people see it: a live display under a real pseudo-terminal, plain lines in a
pipe, ``--quiet`` and ``--json-events``."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DRIVER = [sys.executable, "-m", "tests.report.progress_driver"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_pty(args: list[str], timeout_s: float = 120) -> str:
    """Run under a pseudo-terminal of 120 columns and return everything it drew."""
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(master)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def test_live_display_on_a_terminal(tmp_path: Path) -> None:
    drawn = _on_pty([*DRIVER, str(tmp_path / "l.db")])
    assert "\x1b[?25l" in drawn  # rich hid the cursor to redraw in place ...
    assert "\x1b[?25h" in drawn  # ... and gave it back at the end
    text = ANSI.sub("", drawn)
    assert "━" in text  # progress bars
    assert re.search(r"alpha\s+━*\s*\d+/12", text) and "beta" in text
    assert "ETA" in text and "LLM $" in text and "evaluated" in text
    frames = re.findall(r"(\d+)/12", text)
    assert len(set(frames)) > 3  # redrawn as the run went, not printed once
    # Per-evaluation lines are the plain printer's; on a terminal the display replaces them.
    assert "vs eager   best" not in text
    assert "speedup vs eager" in text and "finished in" in text  # the closing table stays


def test_plain_lines_in_a_pipe(tmp_path: Path) -> None:
    done = subprocess.run(
        [*DRIVER, str(tmp_path / "l.db")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout
    assert len(re.findall(r"^\[\s*[\d.]+s\] (alpha|beta)\s+\d+/12", done.stdout, flags=re.M)) == 24


def test_quiet_and_json_events(tmp_path: Path) -> None:
    quiet = subprocess.run(
        [*DRIVER, str(tmp_path / "q.db"), "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert quiet.returncode == 0, quiet.stderr
    lines = quiet.stdout.strip().splitlines()
    assert lines[0].startswith("task") and "speedup vs eager" in lines[0] and "finished in" in lines[-1]

    events = subprocess.run(
        [*DRIVER, str(tmp_path / "j.db"), "--json-events"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert events.returncode == 0, events.stderr
    records = [json.loads(line) for line in events.stdout.splitlines()]
    kinds = [r["event"] for r in records]
    assert kinds[0] in ("message", "start") and kinds[-1] == "finish" and "start" in kinds
    evaluated = [r for r in records if r["event"] == "evaluated"]
    assert len(evaluated) == 24 and {r["task"] for r in evaluated} == {"alpha", "beta"}
    assert all(
        r["run"] == records[-1]["run"] and isinstance(r["scored"]["candidate"], int) for r in evaluated
    )
    assert [r["done"] for r in evaluated if r["task"] == "alpha"] == list(range(1, 13))
    assert sorted(r["task"] for r in records if r["event"] == "task_done") == ["alpha", "beta"]


def test_a_sweeps_cells_share_one_live_display(tmp_path: Path) -> None:
    text = ANSI.sub("", _on_pty([*DRIVER, str(tmp_path / "s.db"), "--sweep"]))
    assert re.search(r"cell\s+task", text)  # one board, a row per cell
    assert re.search(r"^0\s+axpy\s+━+\s*6/6", text, flags=re.M) and re.search(r"^1\s+axpy", text, flags=re.M)
    assert "[cell 0] run " in text and "[cell 1] run " in text  # headers above the board, per cell


def test_an_interrupted_cells_closing_lines_name_the_cell_and_leave_resuming_to_the_sweep() -> None:
    import io

    from evokernel.report.progress import Progress
    from evokernel.run.summary import RunSummary

    interrupted = RunSummary("r1", "sqlite:///lib.db", {}, {}, {}, interrupted=True)
    for mode in ("quiet", "plain"):
        alone, cell = io.StringIO(), io.StringIO()
        Progress(mode, alone).reporter().finish(interrupted, [])
        Progress(mode, cell).reporter("3").finish(interrupted, [])
        assert "evokernel run CONFIG --resume r1" in alone.getvalue(), mode
        assert "--resume" not in cell.getvalue(), (mode, cell.getvalue())
        lines = [line for line in cell.getvalue().splitlines() if line]
        assert lines and all(line.startswith("[cell 3] ") for line in lines), (mode, lines)


def test_the_live_pool_line_follows_the_pool(tmp_path: Path) -> None:
    # The pool line was read from the engine's pool_health event, every 30 s: it stood at
    # "1 done, 1/min" for a whole run while the board counted on.
    text = ANSI.sub("", _on_pty([*DRIVER, str(tmp_path / "h.db"), "--health"]))
    line = r"pool: 2 worker\(s\) on cpu x 1, [0-2]/2 busy, 0 queued, (\d+) done"
    done = [int(n) for n in re.findall(line, text)]
    assert len(set(done)) >= 3, sorted(set(done))  # it changed while the display was drawn
    assert max(done) == 24  # and its last frame counts every evaluation


def test_a_piped_sweep_prints_the_pool_line_once_not_per_cell(tmp_path: Path) -> None:
    done = subprocess.run(
        [*DRIVER, str(tmp_path / "s.db"), "--sweep", "--health"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    pool_lines = [line for line in done.stdout.splitlines() if re.search(r"pool: \d+ worker", line)]
    # Both cells' engines report the shared pool at their first evaluation: one line, no cell.
    assert len(pool_lines) == 1 and not pool_lines[0].startswith("[cell"), pool_lines
