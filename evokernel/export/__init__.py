"""Kernels and datasets out of the library, and published kernels in as seeds (``seed import``;
the matching a run applies is :mod:`evokernel.run.seed_kernels`)."""
