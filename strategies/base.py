"""The strategy plug-in kind: decides what to try next and who survives.

Lifecycle (one strategy object per task of a run, built again on resume):

1. The engine constructs the class with the ``strategy.params`` of the config as keyword
   arguments; an unknown parameter is a :class:`~evokernel.exceptions.ConfigError`.
2. Whenever it has room for more work, the engine calls :meth:`Strategy.propose` with a
   :class:`~evokernel.view.RunView` and a ``capacity``. The strategy returns at most ``capacity``
   proposals. Returning none while work is in flight means "wait for results"; returning none
   when nothing is in flight ends the task early (the strategy has nothing left to try).
3. After each evaluation the engine calls :meth:`Strategy.observe` (optional hook).

A strategy reads only the view (never the pool or the mutators) and keeps no state that is not
derivable from the library: that is what makes ``--resume`` exact. Randomness comes from
``view.rng(...)``, which depends only on the run seed, the task and the salt given.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from evokernel.exceptions import ConfigError
from evokernel.types import Proposal, Scored
from evokernel.view import RunView


class Strategy(ABC):
    name: ClassVar[str]

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Strategy:
        sig = inspect.signature(cls.__init__)
        valid = [p for p in sig.parameters if p != "self"]
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise ConfigError(
                f"unknown strategy.params key(s) {', '.join(unknown)} for strategy {cls.name!r}; "
                f"valid keys: {', '.join(valid) or '(none)'}"
            )
        return cls(**params)

    @abstractmethod
    def propose(self, view: RunView, capacity: int) -> list[Proposal]:
        """Up to ``capacity`` proposals for ``view.task``; see the module docstring."""

    def observe(self, view: RunView, scored: Scored) -> None:  # noqa: B027 - optional hook
        """Called once per finished evaluation."""
