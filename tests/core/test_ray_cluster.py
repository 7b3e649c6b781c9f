"""The local Ray cluster the pool starts: its token stays private to the user."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

START_AND_STOP = """
import ray
from evokernel.config.schema import RayConfig
from evokernel.pool.ray_cluster import init_ray
init_ray(RayConfig(num_cpus=1))
ray.shutdown()
"""


def test_the_local_clusters_token_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    env["HOME"] = str(tmp_path)  # Ray keeps its token in ~/.ray/auth_token
    done = subprocess.run(
        [sys.executable, "-c", START_AND_STOP],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        umask=0o022,  # the usual umask, under which Ray writes the token world-readable
    )
    assert done.returncode == 0, done.stderr
    token = tmp_path / ".ray" / "auth_token"
    assert token.read_text().strip()
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
