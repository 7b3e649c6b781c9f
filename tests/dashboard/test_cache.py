"""Answers are computed once per library state, however many viewers ask at once."""

from __future__ import annotations

import functools
import threading
import time

import pytest

from evokernel.dashboard.cache import AnswerCache
from evokernel.exceptions import LibraryError


def test_concurrent_viewers_share_one_computation() -> None:
    cache = AnswerCache()
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        time.sleep(0.2)  # long enough that the other viewers arrive while it runs
        return len(calls)

    answers: list[int] = []
    viewers = [
        threading.Thread(target=lambda: answers.append(cache.get("k", "s1", compute))) for _ in range(5)
    ]
    for v in viewers:
        v.start()
    for v in viewers:
        v.join()
    assert answers == [1] * 5 and len(calls) == 1
    assert cache.get("other", "s1", compute) == 2  # another page


def test_after_a_change_the_previous_answer_comes_at_once_and_the_new_one_follows() -> None:
    refreshed = threading.Event()
    cache = AnswerCache(on_refreshed=refreshed.set)
    release = threading.Event()
    assert cache.get("k", "s1", lambda: "old") == "old"

    def slow() -> str:
        release.wait(10)
        return "new"

    assert cache.get("k", "s2", slow) == "old"  # not held while the library is read again
    assert cache.get("k", "s2", lambda: "never") == "old"  # one recomputation, not two
    release.set()
    assert refreshed.wait(10)
    assert cache.get("k", "s2", lambda: "never") == "new"


def test_errors_are_not_cached() -> None:
    cache = AnswerCache()

    def fail() -> int:
        raise LibraryError("library unreachable")

    with pytest.raises(LibraryError):
        cache.get("k", "s", fail)
    assert cache.get("k", "s", lambda: 7) == 7


def test_entries_are_bounded() -> None:
    cache = AnswerCache(max_entries=3)
    for i in range(10):
        cache.get(i, "s", functools.partial(int, i))
    assert cache.get(9, "s", lambda: -1) == 9 and cache.get(0, "s", lambda: -1) == -1
