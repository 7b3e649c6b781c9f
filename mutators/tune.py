"""The ``tune`` operator: change a Triton candidate's knobs without an LLM.

What the knobs are and which values each may take is :mod:`evokernel.mutators.tune_space`. Which
setting to try next is chosen one of two ways (``mutators.tune.search``):

* ``model`` (default): learn from every evaluated candidate of the parent's kernel structure
  (same source up to knob literals) that the request's ``history`` carries, fit the surrogate of
  :mod:`evokernel.mutators.tune_model` on their log runtimes and propose the untried setting of
  highest expected improvement -- every other proposal within a *trust region*, the settings at
  most ``TRUST_RADIUS`` knob changes from the incumbent (the fastest setting measured so far),
  the rest over the whole space (see :func:`_in_trust_region` for why). Siblings proposed in the
  same generation (in ``avoid`` but not yet in the history) count as pending, so the branches of
  one generation spread out and alternate between the two scopes. The space is enumerated when
  it has <= ``MAX_CANDIDATES`` valid settings; a larger one is searched over the parent's one-
  and two-knob neighbours plus a seeded random sample. Everything the proposal depends on is in
  the request (history and avoid come from the library, randomness from ``rng_seed``), so a
  resumed run proposes exactly what the killed one would have.
* ``random``: change 1..``max_changes`` knobs of the parent, mostly to a neighbouring value --
  the plain local-search move, no learning.

With two parents of the same structure (a knob crossover) both modes only mix the parents' values,
as long as a mix is untried.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from evokernel.exceptions import ConfigError
from evokernel.mutators.base import MutationRequest, MutationResult, Mutator, no_params
from evokernel.mutators.tune_model import Observation, Setting, encode, rank
from evokernel.mutators.tune_space import (
    CHOICES,
    Knob,
    apply_values,
    find_knobs,
    launch_groups,
    nearest,
    structure,
    valid_setting,
)
from evokernel.types import Candidate, Operator, Scored, Status, source_hash

if TYPE_CHECKING:
    from evokernel.config.schema import ExperimentConfig

__all__ = ["CHOICES", "SEARCHES", "TuneMutator", "apply_values", "find_knobs", "valid_setting"]

SEARCHES = ("model", "random")
# How many random draws to spend looking for a valid knob setting not evaluated before.
MAX_DRAWS = 64
# Settings scored per proposal: the whole space of a typical kernel (matmul's 5 knobs x 5 values =
# 3125) fits; hashing and scoring that many takes ~0.1 s.
MAX_CANDIDATES = 4096
# Knobs a trust-region proposal may change at once; see _in_trust_region().
TRUST_RADIUS = 2
Parsed = tuple[str, tuple[str, ...], Setting] | None


def _parsed(source: str, space: Mapping[str, Sequence[int]]) -> Parsed:
    """(hash of the structure, knob names, knob values) of a source; None if it does not parse."""
    try:
        knobs = find_knobs(source, space)
    except SyntaxError:
        return None
    shape = hashlib.sha256(structure(source, knobs).encode()).hexdigest()
    return shape, tuple(k.name for k in knobs), tuple(k.value for k in knobs)


def _step(knob: Knob, current: int, rng: random.Random) -> int:
    """Mostly a neighbour in the ordered choice set (local search), sometimes a jump."""
    others = [c for c in knob.choices if c != current] or [current]
    if current in knob.choices and rng.random() < 0.75:
        i = knob.choices.index(current)
        neighbours = [knob.choices[j] for j in (i - 1, i + 1) if 0 <= j < len(knob.choices)]
        return rng.choice(neighbours or others)
    return rng.choice(others)


def _features(knobs: list[Knob]) -> Callable[[Sequence[Setting]], np.ndarray]:
    """Model inputs: log2 of every knob, plus per launch log2(tile elements per warp) -- how much
    work each warp gets, which decides register pressure and occupancy whatever the tile's shape,
    so the model can learn "more warps for bigger tiles" from a few settings."""
    groups = launch_groups(knobs)

    def features(settings: Sequence[Setting]) -> np.ndarray:
        x = encode(settings)
        extra = [x[:, blocks].sum(axis=1) - x[:, warp] for blocks, warp in groups]
        return np.column_stack([x, *extra]) if extra else x

    return features


def _in_trust_region(pending: Sequence[Setting]) -> bool:
    """Whether this proposal searches near the incumbent (else: the whole space): the first
    proposal of a generation does, its next sibling does not, and so on alternately (counted by
    the siblings already pending), so every generation of a batched strategy gets both kinds and a
    one-at-a-time strategy stays local until the region is used up (then :func:`_trust_region`
    widens to the whole space).

    Why a trust region (as in TuRBO, Eriksson et al. 2019): knob landscapes are rugged -- on the
    H100 table of experiments/bench, 128x256x32 matmul tiles run 8.5x slower with 4 warps than
    with 8 -- so the surrogate, fit on ~5-20 settings, picks short length scales and far from
    its data reverts to the prior mean; expected improvement then ranks distant settings by their
    uncertainty alone and the whole-space proposals go to corners (256x256 tiles with 4 warps: 30x
    slower than the best). Near the incumbent the model is most accurate and the best settings lie
    next to other good ones. Radius 2, not 1: knobs act in pairs -- tile size with num_warps (the
    work per warp), tile size with num_stages (shared memory) -- so the way up from a local
    optimum often moves two at once (64x256 with 4 warps -> 128x256 with 8). The whole-space
    half keeps the way out of a wrong basin open. Measured figures: docs/benchmarks.md (tune)."""
    return len(pending) % 2 == 0


def _trust_region(
    untried: list[tuple[Setting, str]], observed: Sequence[Observation], base: Setting
) -> list[tuple[Setting, str]]:
    """The untried settings within TRUST_RADIUS knob changes of the fastest measured setting (of the
    parent, ``base``, when none ran correctly); all of them once that region is exhausted."""
    ok = [o for o in observed if o.runtime_ms is not None]
    anchor = min(ok, key=lambda o: (o.runtime_ms or 0.0, o.setting)).setting if ok else base
    near = [(s, c) for s, c in untried if _changes(s, anchor) <= TRUST_RADIUS]
    return near or untried


def _changes(a: Setting, b: Setting) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


def _distance(a: Setting, b: Setting) -> float:
    return sum(abs(math.log2(max(x, 1)) - math.log2(max(y, 1))) for x, y in zip(a, b, strict=True))


def _candidates(knobs: list[Knob], base: Setting, rng: random.Random) -> list[Setting]:
    """Valid settings to score, nearest to ``base`` first."""
    if math.prod(len(k.choices) for k in knobs) <= MAX_CANDIDATES:
        pool = set(itertools.product(*(k.choices for k in knobs)))
    else:
        pool = set()
        for i, j in itertools.combinations_with_replacement(range(len(knobs)), 2):
            for a, b in itertools.product(knobs[i].choices, knobs[j].choices):
                s = list(base)
                s[i], s[j] = (a, b) if i != j else (a, a)
                pool.add(tuple(s))
        while len(pool) < MAX_CANDIDATES:
            pool.add(tuple(rng.choice(k.choices) for k in knobs))
    valid = [s for s in pool if valid_setting(knobs, s)]
    return sorted(valid, key=lambda s: (_distance(s, base), s))


class TuneMutator(Mutator):
    name = "tune"
    operators = (Operator.TUNE,)
    wants_history = True
    uses_llm = False

    def __init__(
        self, max_changes: int = 2, space: Mapping[str, Sequence[int]] | None = None, search: str = "model"
    ) -> None:
        if search not in SEARCHES:
            raise ConfigError(f"mutators.tune.search must be one of {', '.join(SEARCHES)}, not {search!r}")
        self.max_changes = max(1, max_changes)
        self.space = {k: tuple(v) for k, v in (space or {}).items()}
        self.search = search
        # Parsed sources by source hash, for the mutator's life: every proposal walks the whole
        # history (a parse is ~2 ms for the matmul seed), and a size-bounded cache walked in order
        # would evict each entry before it is needed again once the history outgrows it.
        self._parses: dict[str, Parsed] = {}

    @classmethod
    def from_config(cls, config: ExperimentConfig, params: Mapping[str, Any]) -> TuneMutator:
        """From ``mutators.tune``."""
        no_params("tune", params)
        tune = config.mutators.tune
        return cls(max_changes=tune.max_changes, space=tune.space or None, search=tune.search)

    async def mutate(self, request: MutationRequest) -> MutationResult:
        if not request.parents:
            return MutationResult(None, error="tune needs a parent candidate")
        parent = request.parents[0].candidate.source
        try:
            knobs = find_knobs(parent, self.space)
        except SyntaxError as exc:
            return MutationResult(None, error=f"parent does not parse: {exc}")
        if not knobs:
            return MutationResult(
                None,
                error="the parent has no Triton knobs to tune (no literal BLOCK_*, "
                "num_warps or num_stages at a launch site)",
            )
        rng = random.Random(request.rng_seed)
        # A parent value outside its knob's valid set (a hand-written seed, a narrowed space) moves
        # to the nearest valid one, so every child lies inside the space.
        base = tuple(k.value if k.value in k.choices else nearest(k.choices, k.value) for k in knobs)
        mix = self._crossover_choices(request, base)
        avoid = request.avoid | {p.candidate.source_hash for p in request.parents}
        if self.search == "model":
            return self._model_step(request, parent, knobs, base, mix, avoid, rng)
        if mix is not None:
            base = tuple(rng.choice(values) for values in mix)
        for _ in range(MAX_DRAWS):
            values = list(base)
            for i in rng.sample(range(len(knobs)), k=rng.randint(1, min(self.max_changes, len(knobs)))):
                values[i] = _step(knobs[i], values[i], rng)
            child = apply_values(parent, knobs, values)
            if valid_setting(knobs, values) and source_hash(child) not in avoid:
                return MutationResult(child)
        return MutationResult(None, error=f"no untried valid knob setting found in {MAX_DRAWS} draws")

    def _parse(self, candidate: Candidate) -> Parsed:
        digest = candidate.source_hash
        if digest not in self._parses:
            self._parses[digest] = _parsed(candidate.source, self.space)
        return self._parses[digest]

    def _same_structure(self, candidate: Candidate, parent: Candidate) -> Setting | None:
        """The knob values of ``candidate`` if it is ``parent`` up to knob literals."""
        mine, theirs = self._parse(candidate), self._parse(parent)
        if mine is None or theirs is None:
            return None
        return mine[2] if mine[:2] == theirs[:2] else None

    def _crossover_choices(self, request: MutationRequest, base: Setting) -> list[tuple[int, ...]] | None:
        """Per knob, the values the two parents have (None: no second parent of this structure)."""
        if len(request.parents) < 2:
            return None
        other = self._same_structure(request.parents[1].candidate, request.parents[0].candidate)
        if other is None:
            return None
        return [tuple(sorted({a, b})) for a, b in zip(base, other, strict=True)]

    def _observations(self, request: MutationRequest) -> list[Observation]:
        seen: dict[Setting, Observation] = {}
        for sc in (*request.history, *request.parents):
            if sc.evaluation is None:
                continue
            setting = self._same_structure(sc.candidate, request.parents[0].candidate)
            if setting is not None and setting not in seen:
                seen[setting] = Observation(setting, _runtime(sc))
        return list(seen.values())

    def _model_step(
        self,
        request: MutationRequest,
        parent: str,
        knobs: list[Knob],
        base: Setting,
        mix: list[tuple[int, ...]] | None,
        avoid: frozenset[str],
        rng: random.Random,
    ) -> MutationResult:
        observed = self._observations(request)
        known = {o.setting for o in observed}
        pending: list[Setting] = []
        untried: list[tuple[Setting, str]] = []
        for setting in _candidates(knobs, base, rng):
            if setting in known:
                continue
            child = apply_values(parent, knobs, list(setting))
            if source_hash(child) in avoid:
                pending.append(setting)
            else:
                untried.append((setting, child))
        if not untried:
            return MutationResult(None, error="no untried valid knob setting left in the tune space")
        if mix is not None:
            mixed = [(s, c) for s, c in untried if all(v in m for v, m in zip(s, mix, strict=True))]
            untried = mixed or untried
        elif _in_trust_region(pending):
            untried = _trust_region(untried, observed, base)
        order = rank(observed, pending, [s for s, _c in untried], features=_features(knobs))
        return MutationResult(untried[order[0]][1])


def _runtime(scored: Scored) -> float | None:
    ev = scored.evaluation
    if ev is None or ev.status is not Status.CORRECT or ev.runtime_ms is None or ev.runtime_ms <= 0:
        return None
    return ev.runtime_ms
