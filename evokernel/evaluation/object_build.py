"""The confined build of a cached extension (:mod:`evokernel.evaluation.object_cache`).

``python -m evokernel.evaluation.object_build MODE STAGING [READ ...]``, started by the supervisor
in a new session with ``STAGING`` (torch's ``build.ninja`` and the sources) as its working
directory: confines itself as a worker is confined (:func:`evokernel.evaluation.isolation.confine`,
writes only beneath ``STAGING``), dies with its parent, then becomes ``ninja``. Exits with
:data:`~evokernel.evaluation.confined_build.ISOLATION_UNAVAILABLE` when it cannot be confined: an
unconfined build could be made to write somewhere it should not, so the worker builds instead.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from evokernel.evaluation import guards, isolation
from evokernel.evaluation.confined_build import ISOLATION_UNAVAILABLE, TARGETS


def main(argv: list[str]) -> int:
    mode, staging, extra_read = argv[1], Path(argv[2]), argv[3:]
    guards.die_with_parent()
    ninja = shutil.which("ninja")
    if ninja is None:
        print("ninja is not on PATH", flush=True)
        return 127
    if mode == "off":
        print("isolation is off for this evaluation", flush=True)
        return ISOLATION_UNAVAILABLE
    try:
        # Required even under best-effort: the cache is only sound with the confinement.
        isolation.confine("required", staging, extra_read)
    except isolation.IsolationUnavailable as exc:
        print(exc, flush=True)
        return ISOLATION_UNAVAILABLE
    command = [ninja, "-v"]
    if os.environ.get("MAX_JOBS", "").isdigit():
        command += ["-j", os.environ["MAX_JOBS"]]  # as torch's own build passes it
    # Only these targets (confined_build.TARGETS: the .cu half of a build whose main.o is made
    # apart, evaluation/host_binding.py); none named: the default, the extension.
    command += os.environ.get(TARGETS, "").split()
    sys.stdout.flush()
    os.execv(ninja, command)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
