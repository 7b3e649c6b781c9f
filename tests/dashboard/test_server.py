"""``evokernel dashboard`` as a user starts and stops it (a subprocess on a real port): the URL it
prints answers, a port in use is one line naming ``--port``, and Ctrl-C stops it quietly."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from evokernel.db import upgrade


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dashboard(library: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evokernel", "dashboard", "--library", str(library), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_port_in_use_is_one_line_suggesting_another_port(tmp_path: Path) -> None:
    upgrade(tmp_path / "lib.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _dashboard(tmp_path / "lib.db", port)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (out, err)
    assert out == ""  # no URL printed for a server that never listened
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "already in use" in lines[0] and "--port" in lines[0], err


def test_the_printed_url_answers_and_ctrl_c_stops_without_a_resume_line(tmp_path: Path) -> None:
    upgrade(tmp_path / "lib.db")
    port = _free_port()
    proc = _dashboard(tmp_path / "lib.db", port)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/" in first, first
        # Printed after the bind: a connection made right now is accepted (answered once uvicorn
        # starts serving the bound socket).
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60) as page:
            assert page.status == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (out, err)
    assert "--resume" not in err and "--resume" not in out
    assert "stopped" in out
