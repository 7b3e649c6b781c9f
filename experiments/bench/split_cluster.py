"""A Ray cluster of several nodes on one machine, for the benchmarks that need one (issue 37).

``split_cluster`` starts a GPU head node and CPU-only build nodes, each ``ray start --block`` in a
session of its own and, with ``pin``, on cores of its own (``taskset``): one GPU machine split
the way a cluster of one GPU node and cheap CPU-only nodes is. ``cpu_lines`` and ``busy_share``
say how busy a set of cores was between two readings of ``/proc/stat`` (the GPU node's, pinned).
Used by ``build_throughput.py --split`` and ``field_verdicts.py --split``, whose options
``add_split_arguments`` adds and ``cluster_from`` reads.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def cpu_lines() -> dict[str, list[int]]:
    """Per-CPU jiffies from /proc/stat: {"cpu3": [user, nice, system, idle, iowait, ...]}."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name != "cpu":
            out[name] = [int(x) for x in fields]
    return out


def busy_share(before: dict[str, list[int]], after: dict[str, list[int]], cpus: list[int]) -> float | None:
    busy = total = 0
    for cpu in cpus:
        a, b = before.get(f"cpu{cpu}"), after.get(f"cpu{cpu}")
        if a is None or b is None:
            return None
        delta = [y - x for x, y in zip(a, b, strict=False)]
        idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
        busy, total = busy + sum(delta) - idle, total + sum(delta)
    return round(busy / total, 3) if total else None


def add_split_arguments(parser: argparse.ArgumentParser) -> None:
    """``--split``, ``--node-cpus``, ``--gpu-node-cpus``, ``--build-nodes`` and ``--pin``."""
    parser.add_argument("--split", action="store_true", help="a GPU node and CPU-only build nodes")
    parser.add_argument("--node-cpus", type=int, default=4)
    parser.add_argument(
        "--gpu-node-cpus", type=int, default=0, help="with --split: the GPU node's cores (0: --node-cpus)"
    )
    parser.add_argument("--build-nodes", type=int, default=3)
    parser.add_argument("--pin", action="store_true", help="with --split: each node on cores of its own")


def cluster_from(args: argparse.Namespace) -> contextlib.AbstractContextManager[Any]:
    """The split cluster ``args`` ask for (a null context without ``--split``). With ``--split``
    and ``--kept`` automatic (< 0), the GPU node keeps all its cores, whatever its size: every
    build on the CPU nodes (a GPU node of 8 would otherwise give 3 cores to builds)."""
    if not args.split:
        return contextlib.nullcontext()
    if args.kept < 0:
        args.kept = args.gpu_node_cpus or args.node_cpus
    return split_cluster(args.node_cpus, args.build_nodes, args.pin, args.gpu_node_cpus)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def split_cluster(
    node_cpus: int, build_nodes: int, pin: bool, gpu_cpus: int = 0
) -> Iterator[tuple[str, list[int]]]:
    """A GPU head node (``gpu_cpus`` cores, 0: ``node_cpus``) and CPU-only build nodes of
    ``node_cpus`` each, each a ``ray start --block`` of its own in its own session; yields
    (address, the GPU node's cores when pinned) and stops exactly those sessions (never
    ``ray stop``, which would stop every Ray of this user on the machine)."""
    gpu_cpus = gpu_cpus or node_cpus
    temp = Path(tempfile.mkdtemp(prefix="evk-split-", dir="/tmp"))  # short: Ray's socket paths
    # Token authentication on every node and for this driver: a joining `ray start` does not turn
    # it on by itself and is then refused, and no `ray start` makes a missing token (a fresh
    # machine has no ~/.ray/auth_token), so this cluster's own token is in a file of its own.
    # Ray reads the mode once, when it is imported: a driver that imported it before this has
    # authentication off and is refused by the head (ray.exceptions.AuthenticationError).
    if "ray" in sys.modules and os.environ.get("RAY_AUTH_MODE") != "token":
        raise RuntimeError("split_cluster must start before ray is imported (it turns on token auth)")
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    if not os.environ.get("RAY_AUTH_TOKEN") and not (Path.home() / ".ray" / "auth_token").exists():
        token = temp / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        os.environ.setdefault("RAY_AUTH_TOKEN_PATH", str(token))
    env = {**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    cores = os.cpu_count() or 1
    pin = pin and shutil.which("taskset") is not None and cores >= gpu_cpus + node_cpus * build_nodes
    nodes: list[subprocess.Popen[bytes]] = []

    def start(index: int, args: list[str], extra_env: dict[str, str]) -> None:
        # The GPU node on cores 0..gpu_cpus-1, build node i on the node_cpus after those before it.
        first = 0 if index == 0 else gpu_cpus + (index - 1) * node_cpus
        count = gpu_cpus if index == 0 else node_cpus
        prefix = ["taskset", "-c", f"{first}-{first + count - 1}"] if pin else []
        command = [
            *prefix,
            # This interpreter's Ray, not a `ray` on PATH: a --target install (the GPU machine's
            # wheels) puts no console script there, and taskset then fails into the log unseen.
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--block",
            f"--num-cpus={gpu_cpus if index == 0 else node_cpus}",
            "--disable-usage-stats",
            *args,
        ]
        log = (temp / f"node{index}.log").open("wb")
        nodes.append(
            subprocess.Popen(
                command,
                env={**env, **extra_env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    port = free_port()
    address = f"127.0.0.1:{port}"
    try:
        start(0, ["--head", f"--port={port}", f"--temp-dir={temp}", "--include-dashboard=false"], {})
        wait_for_port(port, 120, nodes[0], temp / "node0.log")
        for i in range(build_nodes):
            # No GPU for Ray to find: a CPU-only node, as a cluster's cheap build machines are.
            start(i + 1, [f"--address={address}", "--num-gpus=0"], {"CUDA_VISIBLE_DEVICES": ""})
        import ray

        ray.init(address=address, include_dashboard=False)
        deadline = time.monotonic() + 120
        while sum(1 for n in ray.nodes() if n.get("Alive")) < 1 + build_nodes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the build nodes did not join; see {temp}/node*.log")
            time.sleep(0.5)
        yield address, list(range(gpu_cpus)) if pin else []
    finally:
        import ray

        ray.shutdown()
        for proc in reversed(nodes):  # `ray start --block` stops its node's processes on SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in nodes:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def wait_for_port(port: int, limit_s: float, head: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if head.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the head node exited with {head.returncode}:\n{tail}")
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"the head node did not listen on {port} within {limit_s:.0f} s:\n{tail}")
