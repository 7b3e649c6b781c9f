"""Answers computed once per library state and shared by every viewer.

A page's JSON is a pure function of the library, so an answer stays valid until the library
changes: for a run that is not running, until its status changes (a finished run's rows never
change; resuming it sets it running); otherwise until the watcher's change token moves. Requests
for the same key while it is being computed wait for that one computation (single flight), so
ten viewers of a 1M-evaluation run cost one query, not ten. Entries are bounded (LRU).

What this does not do: make the first computation of a large running run's figures cheaper
(docs/benchmarks.md gives both figures, cold and cached).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

MAX_ENTRIES = 256


class AnswerCache:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[Hashable, tuple[str, Any]] = OrderedDict()
        self._locks: dict[Hashable, threading.Lock] = {}
        self._guard = threading.Lock()
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, stamp: str, compute: Callable[[], Any]) -> Any:
        """The answer for ``key`` at library state ``stamp``, computing it at most once per stamp."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                entry = self._entries.get(key)
                if entry is not None and entry[0] == stamp:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return entry[1]
            value = compute()  # errors propagate and are not cached
            with self._guard:
                self.misses += 1
                self._entries[key] = (stamp, value)
                self._entries.move_to_end(key)
                while len(self._entries) > self.max_entries:
                    old, _ = self._entries.popitem(last=False)
                    self._locks.pop(old, None)
            return value
