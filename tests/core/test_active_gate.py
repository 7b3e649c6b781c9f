"""The evaluator actor's active gate (issue 37): of the evaluations admitted, at most ``limit``
run at once; one waiting on a pooled build steps out and comes back ahead of new ones."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from evokernel.config.schema import EvaluationConfig
from evokernel.pool.active_gate import ActiveGate, builds_ahead


def wait_for(check: Callable[[], bool], limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "the gate never got there"
        time.sleep(0.005)


class Evaluation(threading.Thread):
    """An evaluation on the gate: enters, optionally waits on one build, then holds until told."""

    def __init__(self, gate: ActiveGate, log: list[str], name: str, build: threading.Event | None) -> None:
        super().__init__(name=name, daemon=True)
        self.gate, self.log, self.build = gate, log, build
        self.entered, self.back, self.done = threading.Event(), threading.Event(), threading.Event()

    def run(self) -> None:
        with self.gate.evaluation():
            self.log.append(f"{self.name} in")
            self.entered.set()
            if self.build is not None:
                with self.gate.step_out(time.monotonic() + 30):
                    self.build.wait(10)
                self.log.append(f"{self.name} back")
                self.back.set()
            self.done.wait(10)


def test_a_build_elsewhere_frees_the_place_and_comes_back_before_new_evaluations() -> None:
    gate, log = ActiveGate(1), list[str]()
    build_a = threading.Event()
    a = Evaluation(gate, log, "a", build_a)
    b = Evaluation(gate, log, "b", threading.Event())
    c = Evaluation(gate, log, "c", None)
    a.start()
    assert a.entered.wait(5)
    b.start()
    assert b.entered.wait(5)  # b got a's place while a waits on its build
    wait_for(lambda: gate.stats()["waiting_on_builds"] == 2)  # b is waiting on its build too
    build_a.set()  # a's object is back: a is active again
    assert a.back.wait(5)
    c.start()  # c is admitted but finds the one place taken
    time.sleep(0.2)
    assert not c.entered.is_set()
    b.build.set()  # type: ignore[union-attr]  # b's object is back, but a holds the place
    time.sleep(0.2)
    assert not b.back.is_set() and not c.entered.is_set()
    a.done.set()  # a ends: b, returning, goes before c, which has not started
    assert b.back.wait(5)
    assert not c.entered.is_set()
    b.done.set()
    assert c.entered.wait(5)
    c.done.set()
    for t in (a, b, c):
        t.join(5)
    assert log == ["a in", "b in", "a back", "b back", "c in"]
    stats: dict[str, Any] = gate.stats()
    assert stats["peak_active"] == 1 and stats["peak_waiting_on_builds"] == 2
    assert stats["active"] == 0 and stats["over_limit"] == 0


def test_a_returning_build_enters_over_the_limit_at_its_deadline() -> None:
    gate, log = ActiveGate(1), list[str]()
    with gate.evaluation():
        with gate.step_out(time.monotonic() + 0.2):
            other = Evaluation(gate, log, "other", None)
            other.start()  # takes the place and keeps it
            assert other.entered.wait(5)
        # Back after 0.2 s over the limit rather than losing the build.
        assert gate.stats()["active"] == 2 and gate.stats()["over_limit"] == 1
    other.done.set()
    other.join(5)
    assert gate.stats()["active"] == 0


def test_no_limit_only_counts() -> None:
    gate = ActiveGate(0)
    with gate.evaluation(), gate.evaluation(), gate.evaluation() as waited:
        assert waited < 1.0 and gate.stats()["active"] == 3
    assert gate.stats()["peak_active"] == 3 and gate.stats()["active"] == 0


def test_builds_ahead_by_default_where_builds_are_not_the_active_evaluations_work() -> None:
    local, pool = EvaluationConfig(builds="local"), EvaluationConfig(builds="pool")
    assert builds_ahead(local, "cuda", 16) == 16  # the GPU node's cores build, its GPU checks and times
    assert builds_ahead(pool, "cpu", 4) == 4  # builds on other nodes
    assert builds_ahead(local, "cpu", 4) == 0  # the same cores: admitting more would only crowd them
    assert builds_ahead(EvaluationConfig(builds_ahead=2), "cpu", 4) == 2
    assert builds_ahead(EvaluationConfig(builds_ahead=0), "cuda", 16) == 0
    assert builds_ahead(EvaluationConfig(object_cache=False), "cuda", 16) == 0  # nothing steps out
