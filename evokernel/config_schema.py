"""The experiment config schema: one dataclass per section, read by omegaconf as a structured config.

Every key a YAML file or a ``key=value`` override may set is a field here, so an unknown key is
an error that names it (see :mod:`evokernel.config`). Defaults are the values a first run on a
laptop should use; the docstring of each section says what its numbers mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LLMConfig:
    """The ``llm`` mutator. ``model`` is any litellm model string; None disables LLM operators."""

    model: str | None = None
    # An OpenAI-compatible server (vLLM, SGLang, Ollama): e.g. http://127.0.0.1:8000/v1
    api_base: str | None = None
    # Name of the environment variable holding the key; the key itself is never stored.
    api_key_env: str | None = None
    temperature: float = 0.7
    max_tokens: int = 8192
    timeout_s: float = 300.0
    # Bounded retries with exponential backoff on 429, 5xx and timeouts.
    max_retries: int = 3
    # USD per million tokens, for models litellm's local cost map does not know (local servers).
    input_cost_per_mtok: float = 0.0
    output_cost_per_mtok: float = 0.0
    language: str = "triton"


@dataclass
class TuneConfig:
    """The ``tune`` mutator: changes 1..max_changes Triton knobs of the parent per proposal."""

    max_changes: int = 2


@dataclass
class MutatorsConfig:
    llm: LLMConfig = field(default_factory=LLMConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)


@dataclass
class StrategyConfig:
    """``name`` is a built-in (``pike_b``) or ``module:Class``; ``params`` go to that class."""

    name: str = "pike_b"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class TimingConfig:
    """Timing is by time, not count: warm up for ``warmup_ms``, then repeat until the median's
    relative standard error falls under ``target_rse`` or ``max_ms``/``max_reps`` is reached."""

    warmup_ms: float = 25.0
    min_reps: int = 10
    max_reps: int = 1000
    max_ms: float = 1000.0
    target_rse: float = 0.005


@dataclass
class EvaluationConfig:
    """``device``: auto (cuda when the cluster has GPUs, else cpu with Triton's interpreter).
    ``scale``: auto (small sizes on cpu, the task's sizes on cuda), small or full."""

    device: str = "auto"
    scale: str = "auto"
    timeout_s: float = 180.0
    seeds: int = 2
    # Evaluator actors; 0 means one per GPU, or on CPU-only clusters min(2, CPUs).
    workers: int = 0
    timing: TimingConfig = field(default_factory=TimingConfig)


@dataclass
class BudgetConfig:
    """``evaluations`` is per task: every task of the run gets that many evaluated candidates."""

    evaluations: int = 16
    # A run stops a task after this many proposals in a row that produced no candidate.
    max_failed_mutations: int = 20


@dataclass
class ConcurrencyConfig:
    """Work in flight at once. ``evaluations`` 0 means twice the evaluator count."""

    evaluations: int = 0
    llm: int = 4


@dataclass
class RayConfig:
    """``address`` None starts a local cluster; ``auto`` or ``ray://host:port`` joins one."""

    address: str | None = None
    num_cpus: int | None = None


@dataclass
class ExperimentConfig:
    name: str = "experiment"
    seed: int = 0
    # Task files, folders of task files, or a KernelBench level folder; relative to the config.
    tasks: list[str] = field(default_factory=list)
    # SQLAlchemy URL or a file path (a SQLite file is created there).
    library: str = "evokernel.db"
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    mutators: MutatorsConfig = field(default_factory=MutatorsConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    concurrency: ConcurrencyConfig = field(default_factory=ConcurrencyConfig)
    ray: RayConfig = field(default_factory=RayConfig)
