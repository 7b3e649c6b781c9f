"""Island populations.

Islands are rows of the solution library (``islands`` table; every proposal and candidate names
its island). The first strategies run one island per task; the island model with migration
(ring, random, none) and reset policies lands here with the strategies issue.
"""
