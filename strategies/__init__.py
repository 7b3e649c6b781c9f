"""The strategy plug-in kind (:mod:`.base`): decides what to try next and who survives, reading
the run through a read-only :class:`~evokernel.strategies.view.RunView`.

Built-ins by name (imported only when asked for, through :mod:`evokernel.plugins`); third-party
strategies register under the entry-point group ``evokernel.strategies`` or are named by path.
"""

from __future__ import annotations

BUILTINS: dict[str, str] = {
    "pike_b": "evokernel.strategies.pike_b:PikeB",
    "pike_o": "evokernel.strategies.pike_o:PikeO",
    "greedy": "evokernel.strategies.greedy:Greedy",
    "random": "evokernel.strategies.random_search:RandomSearch",
}
