"""A live web dashboard over the solution library (``evokernel dashboard``).

Read-only on the library, so any number of people can open it against a running experiment:
runs and sweeps, a run's convergence, fast_p, islands, pool health and failures, a task's
evolution tree, and each candidate with its diffs, evaluations and the LLM call that wrote it.
Needs the ``dashboard`` extra (starlette, uvicorn, jinja2); the charts and graph libraries are
vendored under ``static/vendor`` (VENDORED.md) so the page works offline.
"""

from __future__ import annotations

from evokernel.dashboard.server import DashboardError, DashboardUnavailable, open_library, running, serve

__all__ = ["DashboardError", "DashboardUnavailable", "open_library", "running", "serve"]
