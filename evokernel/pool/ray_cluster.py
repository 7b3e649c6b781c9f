"""The Ray cluster the pool runs on: :func:`init_ray` starts a local one or joins one by address,
and :func:`default_concurrency` says how many candidates an actor runs at once when the config
leaves it to the pool."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import ray

from evokernel.config.schema import RayConfig
from evokernel.pool.environment import without_secrets


def init_ray(config: RayConfig) -> None:
    """Start a local cluster (default) or join ``config.address``; a no-op when Ray is up."""
    if ray.is_initialized():
        return
    # Ray's own uv/runtime-env hooks would try the network on some setups; the driver needs none.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": True,
    }
    if config.address:
        ray.init(address=config.address, **kwargs)
        return
    # The local cluster's processes start with the driver's environment less its secrets
    # (environment.py): a candidate that reads an actor's /proc/<pid>/environ finds no key there.
    with without_secrets():
        # Ray >= 2.59 turns token authentication on for a local cluster and logs a warning about
        # it on every start. We keep it on (without a token any local process, a candidate
        # included, could submit work to the cluster's loopback endpoints) and drop only that
        # notice; a user's own RAY_AUTH_MODE (e.g. `disabled`) still wins. Setting the variable
        # here instead would not do: Ray caches its config when it is imported.
        notice = logging.getLogger("ray._private.authentication.authentication_token_setup")
        level = notice.level
        notice.setLevel(logging.ERROR)
        try:
            ray.init(num_cpus=config.num_cpus, **kwargs)
        finally:
            notice.setLevel(level)
    _keep_token_private(Path.home() / ".ray" / "auth_token")


def _keep_token_private(token: Path) -> None:
    """Ray writes the cluster's token with the process umask (0644 under the usual 022), and home
    directories on shared cluster nodes are often world-readable: anyone on the node could then
    read the token and submit work as this user. Make it owner-only (Ray reads it as the owner)."""
    try:
        info = token.stat()
    except FileNotFoundError:  # RAY_AUTH_MODE=disabled, or a token given another way
        return
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        token.chmod(0o600)


def default_concurrency(device: str, cpus_per_actor: int) -> int:
    """Candidates in flight per actor when the config says 0. GPU: one per two of the actor's CPUs
    (each candidate is a supervisor and a worker process, CPU-bound while Triton compiles), at most
    8; on the 16-core H100 node 4, 8 and 12 in flight gave 46, 58-61 and 59 Triton candidates/min
    (docs/benchmarks.md). CPU: the interpreter is CPU-bound, so more than one per actor only adds
    contention."""
    if device != "cuda":
        return 1
    return max(1, min(8, cpus_per_actor // 2))
