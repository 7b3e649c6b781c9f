"""Island populations: membership (:mod:`.model`), migration policies (:mod:`.migration`) and
reset policies (:mod:`.reset`).

Islands are rows of the solution library (``islands``); every proposal and candidate names its
island, and a child always lands on the island its proposal came from. Changes of membership
(migrants, resets, reseeds) are ``island_events`` rows, so a population is a pure function of the
library and a resumed run sees exactly the islands the killed one saw.
"""
