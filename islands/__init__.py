"""Island populations: membership (:mod:`.model`), migration policies (:mod:`.migration`) and
reset policies (:mod:`.reset`).

Islands are rows of the solution library (``islands``); every proposal and candidate names its
island, and a child always lands on the island its proposal came from. Changes of membership
(migrants, resets, reseeds) are ``island_events`` rows, so a population is a pure function of the
library and a resumed run sees exactly the islands the killed one saw.
"""

from __future__ import annotations

# Built-in policies by name (imported only when asked for, through :mod:`evokernel.plugins`).
MIGRATIONS: dict[str, str] = {
    "ring": "evokernel.islands.migration:RingMigration",
    "random": "evokernel.islands.migration:RandomMigration",
    "none": "evokernel.islands.migration:NoMigration",
}
RESETS: dict[str, str] = {
    "funsearch": "evokernel.islands.reset:FunSearchReset",
    "none": "evokernel.islands.reset:NoReset",
}
