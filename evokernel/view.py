"""``RunView``: the read-only window a strategy has on the library for one (run, task).

Strategies decide from what is recorded, never from private memory, so a strategy rebuilt after a
crash sees exactly what the killed one saw and proposes the same next step.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from evokernel.db import SolutionLibrary
from evokernel.types import Scored, Task


@dataclass(frozen=True)
class RunView:
    library: SolutionLibrary
    run_id: str
    task: Task
    seed: int
    # Operators some configured mutator serves, e.g. {"seed_file", "tune"} or {..., "mutate", "fix"}.
    operators: frozenset[str]
    # Proposals of this task whose candidate is not yet evaluated (kept by the engine).
    in_flight: int = 0

    def candidates(self, island: int | None = None, generation: int | None = None) -> list[Scored]:
        return self.library.candidates(self.run_id, self.task.name, island=island, generation=generation)

    def top(self, k: int, island: int | None = None) -> list[Scored]:
        return self.library.top(self.run_id, self.task.name, k, island=island)

    def proposals_made(self, generation: int | None = None) -> int:
        """Proposals recorded for the task (all states), optionally of one generation."""
        return self.library.count_proposals(self.run_id, self.task.name, generation=generation)

    def last_generation(self) -> int:
        """Highest generation any proposal was made for, -1 before the first."""
        return self.library.last_generation(self.run_id, self.task.name)

    def rng(self, *salt: object) -> random.Random:
        """A generator that depends only on the run seed, the task and ``salt``: resume-stable."""
        key = "|".join(map(str, (self.seed, self.task.name, *salt)))
        return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
