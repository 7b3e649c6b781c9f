"""The experiment config schema: one dataclass per section, read by omegaconf as a structured config.

Every key a YAML file or a ``key=value`` override may set is a field here, so an unknown key is
an error that names it (see :mod:`evokernel.config.loading`). Defaults are the values a first run on a
laptop should use; the docstring of each section says what its numbers mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evokernel.config.timing_config import TimingConfig

# The verdict profiles' names (defined in evaluation/profiles.py, which checks it matches): named
# here so the config is checked without the config stage importing the evaluation stage.
PROFILE_NAMES = ("strict", "kernelbench", "kernelbench-v0")


@dataclass
class ModelConfig:
    """One model of an ensemble (``llm.models``). ``api_base`` and ``api_key_env`` left unset are
    taken from the ``llm`` section; prices left at 0 come from litellm's local cost map."""

    model: str = ""
    api_base: str | None = None
    api_key_env: str | None = None
    # Relative share of proposals under ``selection: weighted``; a prior multiplier under bandit.
    weight: float = 1.0
    # USD per million tokens; None: litellm's local cost map (0 is a price: a free local server).
    input_cost_per_mtok: float | None = None
    output_cost_per_mtok: float | None = None
    # Requests to this model in flight at once; 0: only the engine's concurrency.llm limits them.
    max_concurrent: int = 0


@dataclass
class LLMConfig:
    """The ``llm`` mutator. ``model`` is any litellm model string; None (and no ``models``)
    disables LLM operators. ``models`` lists an ensemble instead of the one ``model``; ``selection``
    picks among them per proposal: ``weighted`` (random by weight) or ``bandit`` (most improvement
    per dollar so far, with exploration)."""

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
    # USD per million tokens, for models litellm's local cost map does not know (local servers);
    # None: the cost map's price. A model priced by neither is an error at start, since the USD
    # budget could never stop it, unless ``allow_unpriced`` (its calls then cost 0).
    input_cost_per_mtok: float | None = None
    output_cost_per_mtok: float | None = None
    allow_unpriced: bool = False
    language: str = "triton"
    models: list[ModelConfig] = field(default_factory=list)
    selection: str = "weighted"
    # Ask for server-sent events; a long reply then keeps the connection busy instead of idle.
    stream: bool = False
    # A reply without usable code (no ModelNew, a syntax error, a SEARCH that does not apply, a
    # duplicate of an evaluated source) is sent back to the same model with the error, in the same
    # conversation, up to this many times; each repair is an LLM call of the same proposal. 3: on
    # experiments/bench/llm_spend.py, 2 rounds left PIKE-B 0-6 % of its spend on proposals whose
    # every round was refused (a model repeating evaluated sources); 3 left none (docs/benchmarks.md).
    repair_rounds: int = 3
    # "Previous attempts" in mutate/crossover prompts: at most this many evaluated candidates of
    # the task (the parent's line first), in at most ``history_chars`` characters (~4 per token).
    previous_attempts: int = 6
    history_chars: int = 2400
    # A mutate/seed proposal without an idea gets a direction of its own from
    # prompts/directions.md (by branch), so siblings never receive byte-identical prompts.
    diversify: bool = True
    # Prompts of seed/mutate/crossover/ideas show the best kernels of up to this many other tasks
    # in the library that share the task's operator family or bottleneck class (0: off), in at
    # most ``exemplar_chars`` characters of code.
    exemplars: int = 0
    exemplar_chars: int = 3000

    def enabled(self) -> bool:
        """Whether any model is configured (the runner builds the LLM mutator only then)."""
        return bool(self.model or self.models)


@dataclass
class TuneConfig:
    """The ``tune`` mutator (no LLM): proposes Triton knob settings of the parent's kernel.
    ``search``: ``model`` learns from the evaluated settings of the same kernel structure and
    proposes the most promising untried one; ``random`` changes 1..max_changes knobs of the parent.
    ``space`` replaces the derived choices of the knobs it names, e.g. ``{BLOCK_K: [32, 64]}``."""

    search: str = "model"
    max_changes: int = 2
    space: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class PluginConfig:
    """A third-party mutator: ``name`` is an entry point of the group ``evokernel.mutators`` or
    ``package.module:Class`` / ``path/to/file.py:Class``; ``params`` go to its ``from_config``."""

    name: str = ""
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class MutatorsConfig:
    """Which mutators a run builds. ``plugins`` first, then the built-ins named in ``builtins``,
    in order: the first mutator serving an operator serves it. ``llm`` is built only when a model
    is set. The list form ``mutators: [{name: llm, params: {...}}, {name: my.mod:Mine}]`` is
    accepted too (:func:`evokernel.config.loading.load_config` turns it into this form)."""

    builtins: list[str] = field(default_factory=lambda: ["llm", "tune"])
    llm: LLMConfig = field(default_factory=LLMConfig)
    tune: TuneConfig = field(default_factory=TuneConfig)
    plugins: list[PluginConfig] = field(default_factory=list)


@dataclass
class StrategyConfig:
    """``name`` is a built-in (``pike_b``, ``pike_o``, ``greedy``, ``random``), an entry point of
    the group ``evokernel.strategies``, or ``package.module:Class`` / ``path/to/file.py:Class``;
    ``params`` go to that class's constructor (e.g. ``strategy.params.branches=8``)."""

    name: str = "pike_b"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvaluationConfig:
    """``device``: auto (cuda when the cluster has GPUs, else cpu with Triton's interpreter).
    ``scale``: auto (small sizes on cpu, the task's sizes on cuda), small or full."""

    device: str = "auto"
    scale: str = "auto"
    timeout_s: float = 180.0
    # Input seeds per variant (declared variants plus one the candidate was never shown).
    seeds: int = 3
    # Verdict profile (evaluation/profiles.py): strict, kernelbench or kernelbench-v0.
    profile: str = "strict"
    # Accept candidates that launch no Triton/CUDA kernel of their own (plain-PyTorch rewrites).
    allow_torch: bool = False
    # torch.compile baseline: auto (on for cuda only: on a CPU it costs tens of seconds), on, off.
    compile_baseline: str = "auto"
    # Host memory (RLIMIT_DATA) of the candidate process in MiB: 0 = 8 GiB on cpu, none on cuda; -1 none.
    host_memory_mb: int = 0
    # Evaluator actors; 0: one per GPU of each node (min(2, CPUs) per CPU-only node), following
    # nodes that join or leave; N: N actors (GPUs) spread over the nodes.
    workers: int = 0
    # Candidates in flight per actor (0: on a GPU one per 2 CPUs of the actor, at most 8; 1 on a
    # CPU). Builds and correctness checks
    # overlap; timings never overlap other GPU work (a per-GPU lock held by the supervisors).
    concurrency_per_worker: int = 0
    # Requests waiting in the pool beyond those in flight (0: 4x workers x concurrency_per_worker);
    # past it, evaluate() waits to enter. Waiting requests are served round robin per run.
    max_queue: int = 0
    # Evaluate identical (task, source, settings) once; later requests get the same result.
    dedup: bool = True
    # Fork each candidate's processes from a per-actor server that imported torch and triton once
    # (no CUDA); false: a new interpreter per candidate (seconds more each).
    warm: bool = True
    # On a GPU, build a precompiled torch/extension.h once per node (~50 s of two cores, in the
    # background) and let candidates' load_inline builds use it: main.cpp 22.5 s -> 10 s.
    precompiled_header: bool = True
    # A load_inline .cu that names only tensors of torch is built with a tensor header instead of
    # torch's (evaluation/tensor_header.py: 29 -> 14 core-s of nvcc on real files), else one that
    # includes torch/extension.h but uses only what torch/types.h declares with torch/types.h
    # (57-65 s -> 23-27 s); each built the next way, last as written, if it fails.
    light_cuda_headers: bool = True
    # Compiled load_inline extensions shared by the node's candidates, actors and runs, built on
    # the trusted side under the candidates' confinement (evaluation/object_cache.py): a child that
    # keeps its parent's CUDA code imports the parent's object instead of 30-50 s of compiling.
    object_cache: bool = True
    # Candidate processes under Landlock + seccomp (evaluation/isolation.py): required refuses to
    # evaluate where the kernel cannot; best-effort applies what it has and records it per verdict.
    isolation: str = "required"
    # A candidate whose first figure would make it its task's best is evaluated again, timed in
    # one window with the current best, and the re-measurement is what the run records and
    # ranks by (run/confirm.py: the largest of many noisy figures is biased upward by its noise).
    # auto: on a GPU only (a CPU's Triton-interpreter timings say nothing to confirm), on, off.
    confirm_best: str = "auto"
    # After timing, correct candidates (and each task's reference, once) are profiled: none,
    # timeline (torch.profiler: kernels, launches, host gaps, bottleneck, speed of light) or
    # counters (also Nsight Compute per main kernel). Off by default: CUPTI's start costs 4-6 s
    # per candidate process on an H200, Nsight Compute 6-9 s more (docs/benchmarks.md, issue 26).
    profiling: str = "none"
    # Where the object cache's misses are compiled: local (by the evaluator's supervisor, on its own
    # node) or pool (Ray tasks on the cluster's CPU-only nodes first, then on the GPU nodes' spare
    # cores; pool/build_pool.py): a CUDA build is ~47 core-seconds, which caps a 16-core node at ~19
    # distinct CUDA candidates/min whatever its GPU does. pool needs object_cache.
    builds: str = "local"
    # Under builds=pool: the cores a GPU node keeps for its own host work (supervisors, workers,
    # timing) and never gives to builds; -1: 4 per GPU of the node.
    gpu_node_cores_kept: int = -1
    # Evaluations an actor admits beyond concurrency_per_worker; only that many are active on its
    # node at once, and one whose extension is being built (on the pool or by its supervisor) is
    # not (pool/active_gate.py): 16 in flight, each holding its place through a 63 s build on
    # another node, capped a split cluster at ~12/min; through a ~45 s build on its own H100 node,
    # at 12.75/min with the node's cores 55 % busy (docs/benchmarks.md, issue 37). -1: as many as
    # concurrency_per_worker under builds=pool or on a GPU, none for local builds on a CPU device.
    builds_ahead: int = -1
    timing: TimingConfig = field(default_factory=TimingConfig)


@dataclass
class BudgetConfig:
    """Limits, any combination; each is checked before work starts, so a run never overspends.

    ``evaluations`` is per task: every task of the run gets that many evaluated candidates (a
    proposal whose mutation fails frees its slot). The others are per run, shared by all its
    tasks, and None means no limit. ``llm_calls`` counts HTTP attempts (retries included): an LLM
    mutation starts only if ``llm.max_retries + 1`` more calls fit. ``usd`` is the LLM cost: a
    mutation starts only if the cost of the most expensive mutation so far fits for it and every
    mutation in flight (the first LLM mutation runs alone to measure it), so a run overspends
    only if one mutation costs more than every earlier one did. ``wall_time_s`` adds up over
    sessions (a SIGKILLed session's time is not recorded): after it no work starts and work in
    flight finishes. A resumed run keeps counting from what the library recorded.
    """

    evaluations: int = 16
    # A run stops a task after this many proposals in a row that produced no candidate.
    max_failed_mutations: int = 20
    llm_calls: int | None = None
    usd: float | None = None
    wall_time_s: float | None = None


@dataclass
class ConcurrencyConfig:
    """Work in flight at once, over all tasks of the run: ``llm`` LLM requests (mutations and
    ideas) and ``evaluations`` candidates on the pool (0: twice what the pool runs at once). Separate
    limits, so slow LLM replies never idle the evaluators and a queue of evaluations never holds
    back LLM calls."""

    evaluations: int = 0
    llm: int = 4


@dataclass
class RayConfig:
    """``address`` None starts a local cluster; ``auto`` or ``ray://host:port`` joins one."""

    address: str | None = None
    num_cpus: int | None = None


@dataclass
class SweepConfig:
    """``grid``: key -> values, every combination is a cell (``seed: [0, 1, 2]`` is an axis like any
    other). ``zip``: key -> values of one common length, stepped together (``model`` with its
    ``api_base``), crossed with the grid. ``name`` names the sweep (default: the config's name).
    ``id``, ``cell`` and ``point`` are written by ``evokernel sweep`` into each cell's stored config
    (which sweep, which cell, its axis values); leave them unset."""

    grid: dict[str, list[Any]] = field(default_factory=dict)
    zip: dict[str, list[Any]] = field(default_factory=dict)
    name: str | None = None
    id: str | None = None
    cell: int | None = None
    point: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExperimentConfig:
    name: str = "experiment"
    seed: int = 0
    # Task files, folders of task files, or a KernelBench level folder; relative to the config.
    tasks: list[str] = field(default_factory=list)
    # Folders of published solution files (KernelBench/PIKE task_<N>.py or <task>.py) whose kernels
    # replace the tasks' seed kernels (evokernel.export.seeds); relative to the config, like tasks.
    seed_kernels: list[str] = field(default_factory=list)
    # SQLAlchemy URL or a file path (a SQLite file is created there).
    library: str = "evokernel.db"
    strategy: StrategyConfig = field(default_factory=StrategyConfig)
    mutators: MutatorsConfig = field(default_factory=MutatorsConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    concurrency: ConcurrencyConfig = field(default_factory=ConcurrencyConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
