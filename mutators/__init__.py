"""The mutator plug-in kind (:mod:`.base`): turns a proposal into candidate source.

Built-ins by name (imported only when asked for, through :mod:`evokernel.plugins`, so a run using
``tune`` never imports litellm); third-party mutators register under the entry-point group
``evokernel.mutators`` or are named by ``module:Class`` in ``mutators.plugins``
(:func:`evokernel.mutators.build.build_mutators`).
"""

from __future__ import annotations

BUILTINS: dict[str, str] = {
    "llm": "evokernel.mutators.llm:LLMMutator",
    "tune": "evokernel.mutators.tune:TuneMutator",
}
