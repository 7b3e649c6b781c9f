"""Answers computed once per library state and shared by every viewer.

A page's JSON is a pure function of the library, so an answer stays valid until the library
changes: for a run that is not running, until its status changes (a finished run's rows never
change; resuming it sets it running); otherwise until the watcher's change token moves.

- First request for a key: computed in that request; concurrent requests for it wait for that one
  computation (single flight), so ten viewers cost one query, not ten.
- Later requests after the library changed: answered at once with the previous answer while one
  background thread recomputes it; ``on_refreshed`` then tells the pages (an SSE event), which
  fetch the new answer. On a run of 600k evaluations a run page takes 0.6-0.9 s to compute
  (docs/benchmarks.md; ~26 s before migration 0005's indexes): without this, every write would
  hold each viewer's request -- and a server thread -- that long, on a running experiment that
  writes several times a second.

Entries are bounded (LRU). What this does not do: make the first computation cheaper.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from evokernel.exceptions import EvoKernelError

log = logging.getLogger(__name__)
MAX_ENTRIES = 256


class AnswerCache:
    def __init__(
        self, on_refreshed: Callable[[], None] | None = None, max_entries: int = MAX_ENTRIES
    ) -> None:
        self._entries: OrderedDict[Hashable, tuple[str, Any]] = OrderedDict()
        self._locks: dict[Hashable, threading.Lock] = {}
        self._refreshing: set[Hashable] = set()
        self._guard = threading.Lock()
        self.on_refreshed = on_refreshed
        self.max_entries = max_entries
        self.computed = 0

    def get(self, key: Hashable, stamp: str, compute: Callable[[], Any]) -> Any:
        """The answer for ``key`` at library state ``stamp`` (or, while it is being recomputed in
        the background, the answer for an earlier state)."""
        with self._guard:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                if entry[0] != stamp and key not in self._refreshing:
                    self._refreshing.add(key)
                    worker = threading.Thread(target=self._refresh, args=(key, stamp, compute), daemon=True)
                    worker.start()
                return entry[1]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                entry = self._entries.get(key)
            if entry is not None:  # computed by the request this one waited for
                return entry[1]
            value = compute()  # errors propagate to the request and are not cached
            self._store(key, stamp, value)
            return value

    def _refresh(self, key: Hashable, stamp: str, compute: Callable[[], Any]) -> None:
        try:
            value = compute()
        except EvoKernelError as exc:  # keep the previous answer; the next request tries again
            log.warning("dashboard: recomputing %s failed: %s", key, exc)
            return
        finally:
            with self._guard:
                self._refreshing.discard(key)
        self._store(key, stamp, value)
        if self.on_refreshed is not None:
            self.on_refreshed()

    def _store(self, key: Hashable, stamp: str, value: Any) -> None:
        with self._guard:
            self.computed += 1
            self._entries[key] = (stamp, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                old, _ = self._entries.popitem(last=False)
                self._locks.pop(old, None)
