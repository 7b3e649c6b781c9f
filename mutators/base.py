"""The mutator plug-in kind: turns a :class:`~evokernel.types.Proposal` into candidate source.

Lifecycle: the run builds each configured mutator once (:meth:`Mutator.from_config`, see
:func:`evokernel.mutators.build.build_mutators`), then the engine awaits
:meth:`Mutator.mutate` for every proposal whose operator the mutator serves (several calls may be
in flight at once, so implementations keep no per-call state on ``self``), and finally awaits
:meth:`Mutator.aclose`. A mutator never touches the library or the evaluation pool: everything it
needs comes in the :class:`MutationRequest`, and everything it spent (LLM calls) goes back in the
:class:`MutationResult` for the engine to record. State that shapes proposals belongs in the
request (``history``, ``avoid``, ``rng_seed``), not in memory: :meth:`Mutator.observe` is not
replayed when a run resumes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from evokernel.exceptions import ConfigError
from evokernel.mutators.exemplars import Exemplar
from evokernel.plugins import construct
from evokernel.types import Evaluation, LLMCall, Proposal, Scored, Task

if TYPE_CHECKING:
    from evokernel.config.schema import ExperimentConfig


@dataclass(frozen=True)
class MutationRequest:
    proposal: Proposal
    task: Task
    parents: tuple[Scored, ...] = ()
    # Derived from (run seed, task, proposal seq): a resumed run re-derives the same value.
    rng_seed: int = 0
    # Facts about the evaluation hardware for prompts ("NVIDIA H100, sm_90, 132 SMs").
    hardware: str = ""
    language: str = "triton"
    # Source hashes already in the library for this task: cheap operators avoid re-proposing them.
    avoid: frozenset[str] = frozenset()
    # Evaluated candidates of the task from generations before the proposal's, oldest first: what
    # an operator that learns from outcomes (tune's model) learns from. Filled only for mutators
    # with ``wants_history``; read from the library, so a resumed run rebuilds the same request.
    history: tuple[Scored, ...] = ()
    # The task's reference profile (evaluation/profiling/), shown to the ideas call; None: none taken.
    reference_profile: dict[str, Any] | None = None
    # Proposal id -> the idea it carried, for the proposals of ``history``'s candidates (what an
    # attempt tried, and which ideas were tried with what outcome).
    ideas_of: Mapping[int, str] = field(default_factory=dict)
    # The evaluation nodes' software ("torch 2.9.0 / triton 3.5.0 / ..."), for the system prompt.
    software: str = ""
    # The best kernels of related tasks in the library (only for mutators with ``exemplar_count``).
    exemplars: tuple[Exemplar, ...] = ()
    # Runtime (ms) of the nearest correct candidate up the first parent's line (a fix's parent is
    # not correct; its own parent may be): what a proposal's gain is measured against.
    ancestor_ms: float | None = None


@dataclass(frozen=True)
class MutationResult:
    """Either ``source`` (a file defining ``ModelNew``) or an ``error`` saying why there is none."""

    source: str | None
    error: str = ""
    raw_reply: str = ""
    llm_calls: tuple[LLMCall, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.source is not None


@dataclass(frozen=True)
class IdeasResult:
    """Distinct optimization ideas for a task (PIKE-B's brainstorm), or an ``error`` saying why none."""

    ideas: tuple[str, ...]
    error: str = ""
    raw_reply: str = ""
    llm_calls: tuple[LLMCall, ...] = field(default_factory=tuple)


class Mutator(ABC):
    """Base class of all mutators. ``operators`` lists the proposal operators it serves."""

    name: ClassVar[str]
    operators: ClassVar[tuple[str, ...]]
    # Whether requests should carry ``history`` (a library read per generation; off by default).
    wants_history: ClassVar[bool] = False
    # How many generations back ``history`` reaches (None: all of them).
    history_window: ClassVar[int | None] = None
    # The most LLM calls (HTTP attempts, retries included) one mutate or ideas call can make; the
    # run's LLM-call budget reserves this many per job. None: the engine's llm.max_retries + 1.
    llm_calls_per_job: int | None = None
    # How many related tasks' best kernels requests should carry (``exemplars``; 0: none).
    exemplar_count: int = 0
    # Whether its jobs call an LLM: the run's LLM-call and cost budgets reserve for those only.
    uses_llm: bool = True
    # Whether :meth:`ideas` can brainstorm (PIKE-B's ``ideas`` operator); the engine routes
    # ``ideas`` proposals to the first configured mutator that can.
    can_brainstorm: ClassVar[bool] = False

    @classmethod
    def from_config(cls, config: ExperimentConfig, params: Mapping[str, Any]) -> Mutator | None:
        """The mutator a run with ``config`` uses, or None when the config does not enable it.

        Default: ``params`` (a ``mutators.plugins`` entry's) as keyword arguments of the class;
        an unknown one is a :class:`~evokernel.exceptions.ConfigError` naming the valid ones.
        Built-ins override this to read their own section (``mutators.llm``, ``mutators.tune``)."""
        return construct(cls, params, "mutators.plugins params", "mutator")

    @abstractmethod
    async def mutate(self, request: MutationRequest) -> MutationResult:
        """Produce one candidate source for ``request.proposal``; never raise for bad LLM output."""

    def observe(  # noqa: B027 - optional hook
        self, request: MutationRequest, result: MutationResult, evaluation: Evaluation | None
    ) -> None:
        """Told how the candidate of ``request`` did (None: no candidate); e.g. a bandit over models
        learns from it. Called by the engine once per finished proposal; default: ignore."""

    def model_state(self) -> dict[str, dict[str, float]]:
        """What the mutator learned per model (pulls, observed, gain, cost_usd), which the engine
        records in the library after each :meth:`observe`; {} (the default): nothing to record."""
        return {}

    def restore_model_state(self, state: Mapping[str, Mapping[str, float]]) -> None:  # noqa: B027
        """Start from ``state`` as :meth:`model_state` returned it (a resumed run); default: ignore."""

    async def ideas(self, request: MutationRequest, count: int) -> IdeasResult:
        """Up to ``count`` distinct optimization ideas for ``request.task`` (only called when
        :attr:`can_brainstorm`); never raise for bad LLM output."""
        return IdeasResult((), error=f"mutator {type(self).__name__} cannot brainstorm ideas")

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most mutators hold nothing
        """Release clients or sessions at the end of a run."""


def no_params(name: str, params: Mapping[str, Any]) -> None:
    """Built-ins read their config section; params beside it would be silently ignored."""
    if params:
        raise ConfigError(
            f"the built-in mutator {name!r} takes its settings from mutators.{name}.*, not params"
        )
