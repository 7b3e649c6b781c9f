"""Kernels and datasets out of the library, and published kernels in as seeds."""
