"""Sweeps: a grid (and zipped axes) of runs in one library under one sweep id, run concurrently
on one evaluator pool, each cell with its own budget; ``--resume`` finishes the unfinished cells.

``axes`` parses and expands axes, ``plan`` turns them into checked cell configs and stored runs,
``runner`` runs the cells (:func:`evokernel.sweep.runner.run_sweep`), ``command`` is the CLI.
Kept import-light (nothing imported here), so ``evokernel --help`` stays instant."""
