"""Quiet windows (evaluation/quiet.py): the node's other evaluations and builds, stopped while a
candidate is timed, are continued when the window ends, however it ends: the timing supervisor
killed mid-window, the actor that started the keeper killed, or a window held past its bound.
Real processes throughout: a "build" is ``sleep`` copied under a compiler's name, started by a
stand-in actor that runs a real keeper; an "evaluation" is a process that registered its session."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Windows are timed against the keeper's duty (5 of 10 s): a loaded machine stretches them.
pytestmark = pytest.mark.serial

ACTOR = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from evokernel.evaluation.quiet import start_keeper
    root, registry, compiler, hold = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    keeper, sock = start_keeper(root, registry, hold)
    build = subprocess.Popen([compiler, "600"])
    print(sock, build.pid, keeper.pid, flush=True)
    time.sleep(600)
    """
)
TIMING = textwrap.dedent(
    """
    import sys, time
    from evokernel.evaluation.quiet_link import QuietLink
    link = QuietLink(sys.argv[1])
    with link.window():
        print(link.record, flush=True)
        time.sleep(600)
    """
)
# A pooled build on this node (pool/build_task.py): registers itself, then runs a compiler.
BUILDER = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from evokernel.evaluation.quiet import register_builder
    register_builder(Path(sys.argv[1]))
    build = subprocess.Popen([sys.argv[2], "600"])
    print(build.pid, flush=True)
    time.sleep(600)
    """
)
# Another evaluation of the node: registered, then busy (its child is a plain process, no compiler).
EVALUATION = textwrap.dedent(
    """
    import subprocess, sys, time
    from evokernel.evaluation.quiet_link import QuietLink
    link = QuietLink(sys.argv[1])
    child = subprocess.Popen(["sleep", "600"])
    print(child.pid, link.record, flush=True)
    time.sleep(600)
    """
)


def state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat[stat.rindex(")") + 2]


def wait_for(pid: int, wanted: set[str], limit_s: float = 5.0) -> str:
    """The state that ended the wait: a second read could differ (a SIGSTOP landing late turned a
    build seen sleeping into a stopped one between the two, failing 2 of 25 runs)."""
    deadline = time.monotonic() + limit_s
    while (seen := state(pid)) not in wanted and time.monotonic() < deadline:
        time.sleep(0.02)
    return seen


class Node:
    def __init__(self, tmp: Path, hold_s: float) -> None:
        self.compiler = tmp / "cc1plus"  # a compiler's name: the keeper stops only compilers
        shutil.copy(shutil.which("sleep") or "/bin/sleep", self.compiler)
        root = tmp / "actor"
        root.mkdir()
        self.procs: list[subprocess.Popen[str]] = []
        self.extra: list[int] = []  # builds and keepers of other actors (another_actor)
        self.registry = tmp / "registry"
        self.actor = self.start(ACTOR, str(root), str(self.registry), str(self.compiler), str(hold_s))
        assert self.actor.stdout is not None
        sock, build, keeper = self.actor.stdout.readline().split()
        self.sock, self.build, self.keeper = sock, int(build), int(keeper)

    def start(self, code: str, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def timing(self) -> tuple[subprocess.Popen[str], str]:
        """A timing supervisor in a session of its own, holding a quiet window until killed."""
        proc = self.start(TIMING, self.sock)
        assert proc.stdout is not None
        return proc, proc.stdout.readline()

    def close(self) -> None:
        for pid in (self.build, self.keeper, *self.extra):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for proc in self.procs:
            proc.kill()
            proc.wait()


@pytest.fixture
def node(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Node]:
    hold_s = getattr(request, "param", 30.0)
    made = Node(tmp_path, hold_s)
    yield made
    made.close()


def test_a_build_paused_for_a_timing_resumes_when_the_timing_is_killed(node: Node) -> None:
    timing, record = node.timing()
    assert "'paused': 1" in record
    assert wait_for(node.build, {"T"}) == "T"  # stopped for the window
    timing.send_signal(signal.SIGKILL)  # the supervisor dies mid-window (a timeout, a crash)
    assert wait_for(node.build, {"S", "R"}) in {"S", "R"}


def test_a_build_paused_for_a_timing_resumes_when_the_actor_dies(node: Node) -> None:
    timing, record = node.timing()
    # SIGSTOP lands when the target next runs: "paused" can come back before its state says so.
    assert "'paused': 1" in record and wait_for(node.build, {"T"}) == "T"
    node.actor.send_signal(signal.SIGKILL)  # the keeper's lifeline closes; the timing lives on
    assert wait_for(node.build, {"S", "R"}) in {"S", "R"}
    assert wait_for(node.keeper, {"gone", "Z"}) in {"gone", "Z"}
    assert timing.poll() is None


def another_actor(node: Node, tmp: Path) -> tuple[int, int]:
    """A second evaluator actor of the node, with its own keeper and build: (build, keeper) pids."""
    root = tmp / "actor2"
    root.mkdir()
    actor = node.start(ACTOR, str(root), str(node.registry), str(node.compiler), "30")
    assert actor.stdout is not None
    _, build, keeper = actor.stdout.readline().split()
    node.extra.extend([int(build), int(keeper)])
    return int(build), int(keeper)


def test_what_a_killed_keeper_stopped_is_continued_by_another_keeper(node: Node, tmp_path: Path) -> None:
    """Ray kills an actor's children with it, its keeper among them: another actor's keeper
    continues what that keeper had stopped (quiet_stops.py)."""
    another_actor(node, tmp_path)
    timing, record = node.timing()
    assert "'paused': 2" in record  # the first actor's build and the second's
    assert wait_for(node.build, {"T"}) == "T"
    os.kill(node.keeper, signal.SIGKILL)  # no lifeline, no resume: killed as Ray kills it
    started = time.monotonic()
    assert wait_for(node.build, {"S", "R"}) in {"S", "R"}
    assert time.monotonic() - started < 3.0 and timing.poll() is None


def test_a_keeper_that_starts_after_one_was_killed_continues_what_it_had_stopped(
    node: Node, tmp_path: Path
) -> None:
    _, record = node.timing()
    assert "'paused': 1" in record and wait_for(node.build, {"T"}) == "T"
    os.kill(node.keeper, signal.SIGKILL)
    time.sleep(0.5)
    assert state(node.build) == "T"  # nobody else on the node knows
    another_actor(node, tmp_path)  # the pool's replacement actor: its keeper starts
    assert wait_for(node.build, {"S", "R"}) in {"S", "R"}


@pytest.mark.parametrize("node", [0.5], indirect=True)
def test_a_window_held_too_long_resumes_the_builds_anyway(node: Node) -> None:
    timing, record = node.timing()
    assert "'paused': 1" in record
    started = time.monotonic()
    # Stopped first (SIGSTOP lands when the target next runs), then continued by the keeper alone.
    assert wait_for(node.build, {"T"}) == "T"
    assert wait_for(node.build, {"S", "R"}) in {"S", "R"}
    assert time.monotonic() - started < 3.0 and timing.poll() is None


def test_only_the_actors_compilers_are_stopped(node: Node) -> None:
    stranger = subprocess.Popen([str(node.compiler), "600"])  # a compiler outside every actor
    try:
        _, record = node.timing()
        assert "'paused': 1" in record and wait_for(node.build, {"T"}) == "T"
        assert state(stranger.pid) in {"S", "R"}
    finally:
        stranger.kill()
        stranger.wait()


def test_a_window_stops_the_other_evaluations_and_nothing_else(node: Node) -> None:
    other = node.start(EVALUATION, node.sock)
    assert other.stdout is not None
    child, record = other.stdout.readline().split(maxsplit=1)
    assert record.strip() == "{}"  # registered, nothing unavailable
    bystander = subprocess.Popen(["sleep", "600"])  # no evaluation, no compiler
    try:
        timing, answer = node.timing()
        assert "'paused': 3" in answer  # the build, and the other evaluation with its child
        assert wait_for(int(child), {"T"}) == "T" and wait_for(other.pid, {"T"}) == "T"
        assert state(bystander.pid) in {"S", "R"}
        timing.kill()
        assert wait_for(int(child), {"S", "R"}) in {"S", "R"}
        assert wait_for(other.pid, {"S", "R"}) in {"S", "R"}
    finally:
        bystander.kill()
        bystander.wait()
        os.kill(int(child), signal.SIGKILL)


def test_a_pooled_builds_compiler_on_the_node_is_stopped_too(node: Node) -> None:
    builder = node.start(BUILDER, str(node.registry), str(node.compiler))
    assert builder.stdout is not None
    build = int(builder.stdout.readline())
    try:
        timing, record = node.timing()
        assert "'paused': 2" in record  # the actor's build and the pooled one
        assert wait_for(build, {"T"}) == "T" and wait_for(node.build, {"T"}) == "T"
        timing.kill()
        assert wait_for(build, {"S", "R"}) in {"S", "R"}
    finally:
        os.kill(build, signal.SIGKILL)


def test_windows_stop_the_node_at_most_half_the_time_and_a_quiet_node_spends_none(node: Node) -> None:
    """MAX_DUTY of DUTY_WINDOW_S (5 of 10 s): after that long stopped, the next window stops nothing
    and says so; with nothing to stop (the build ended), a window is no use of the duty and does
    not say it was over it."""
    first, record = node.timing()
    assert "'paused': 1" in record and "over_duty" not in record
    assert wait_for(node.build, {"T"}) == "T"
    time.sleep(5.2)
    first.kill()
    assert wait_for(node.build, {"S", "R"}) in {"S", "R"}
    second, record = node.timing()
    assert "'paused': 0" in record and "'over_duty': 1" in record
    assert state(node.build) in {"S", "R"}  # timed beside it: the duty was spent
    second.kill()
    os.kill(node.build, signal.SIGKILL)  # the actor never reaps it: a zombie, nothing to stop
    assert wait_for(node.build, {"Z", "gone"}) in {"Z", "gone"}
    _, record = node.timing()  # the duty is still spent, but there is nothing to stop
    assert "'paused': 0" in record and "over_duty" not in record


def test_a_supervisor_finds_the_registry_of_the_process_that_started_it(tmp_path: Path) -> None:
    """A supervisor's TMPDIR is its own directory (launcher.sandbox_env), where no other window
    would see its CPU claim: it is handed the starting process's registry."""
    from evokernel.evaluation.launcher import sandbox_env
    from evokernel.evaluation.quiet import node_registry

    own = tmp_path / "supervisor"
    own.mkdir()
    env = sandbox_env("cpu", own)
    code = "import tempfile\nfrom evokernel.evaluation import quiet\n"
    code += "print(quiet.node_registry(), tempfile.gettempdir())"
    seen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    registry, tmp = seen.stdout.split()
    assert tmp == str(own)  # the supervisor's TMPDIR did move ...
    assert registry == str(node_registry()) and not registry.startswith(str(own))  # ... its registry did not
