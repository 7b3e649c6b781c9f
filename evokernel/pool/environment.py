"""What the evaluation side's processes hold in their environment: no secrets (issue 33).

Ray's processes of a local cluster (GCS, raylet, and every actor the raylet starts) copy the
environment of the process that called ``ray.init``: the driver's, API keys included. An actor's
``/proc/<pid>/environ`` is the easiest thing on a node for a candidate to try to read, so the
cluster is started with every secret-looking variable removed (:func:`without_secrets`); the
driver keeps them for the LLM operators, which run only there. Ray's own ``RAY_*`` variables stay
(a token given as ``RAY_AUTH_TOKEN`` is how the cluster authenticates its own processes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

# Names that hold credentials by convention (OPENAI_API_KEY, HF_TOKEN, AWS_SECRET_ACCESS_KEY,
# PGPASSWORD, AZURE_CLIENT_SECRET, GOOGLE_APPLICATION_CREDENTIALS, ...).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
KEPT_PREFIXES = ("RAY_",)


def secret_names(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    return sorted(name for name in environ if SECRET_NAME.search(name) and not name.startswith(KEPT_PREFIXES))


@contextmanager
def without_secrets() -> Iterator[list[str]]:
    """``os.environ`` without secrets while the block runs (the processes it starts inherit that);
    restored afterwards. Yields the names it removed."""
    removed = {name: os.environ.pop(name) for name in secret_names(os.environ)}
    try:
        yield sorted(removed)
    finally:
        os.environ.update(removed)
