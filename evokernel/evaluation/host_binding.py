"""The host binding (``main.cpp``) compiled once per distinct signature set and shared (issue 37).

Why: ``load_inline`` writes a ``main.cpp`` of ``#include <torch/extension.h>``, the call's
``cpp_sources`` (for a CUDA candidate: its function declarations) and a pybind11 module of its
``functions``; compiling it is 7-11 s of one core with the precompiled header and ~22 s without
(docs/benchmarks.md). A search's child nearly always keeps its parent's declarations, functions
and extension name and changes the ``.cu``: the same ``main.o``, compiled again.

How, and why a candidate cannot poison a shared ``main.o``:

* The key (:func:`host_key`) is the SHA-256 of ``main.cpp`` and of the ninja file that compiles it
  alone (compiler, ``cflags``, ``post_cflags``, the ``compile`` rule), staging path replaced by a
  placeholder, beneath the cache root's toolchain key: everything that decides the object.
* On a miss, ``main.o`` is compiled from a copy of ``main.cpp`` in a directory of its own beside
  staging, by a confined process that can write only there, while another confined process
  compiles the ``.cu`` in staging (it can write staging, never the host directory, so the call's
  own ``.cu`` flags cannot replace that ``main.o``); then a third links. What is kept under
  ``hosts/<key>/main.o`` was made from exactly the key's inputs.
* On a hit, a copy of the kept ``main.o`` goes into the host directory and one confined process
  compiles the ``.cu`` and links: the ``main.cpp`` compile is skipped.

A build whose ``build.ninja`` does not have torch's usual shape (one ``main.o`` from ``main.cpp``,
one ``.so`` linked from it) is built as before.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

PLACEHOLDER = "@EVOKERNEL_STAGING@"
HOST_PLACEHOLDER = "@EVOKERNEL_HOST@"
_HEADER_KEYS = ("ninja_required_version", "cxx", "cflags", "post_cflags")
_RULE = re.compile(r"^rule compile\n(?:[ \t]+\S.*\n)+", re.M)


@dataclass(frozen=True)
class HostPlan:
    """How one staged build splits: the host directory's ninja file (placeholdered), the key,
    the other objects' targets and the link edge to rewrite."""

    key: str
    ninja: str
    targets: tuple[str, ...]
    link: str


def plan(ninja: str, main_cpp: str) -> HostPlan | None:
    """The split of a ``build.ninja`` (staging path as :data:`PLACEHOLDER`), or None when it does
    not have torch's usual shape."""
    main_edge = f"build main.o: compile {PLACEHOLDER}/main.cpp"
    edges = [line for line in ninja.splitlines() if line.startswith("build ")]
    links = [line for line in edges if re.fullmatch(r"build \S+\.so: link .*", line)]
    rule = _RULE.search(ninja)
    if main_edge not in edges or len(links) != 1 or " main.o" not in links[0] or rule is None:
        return None
    header = [
        line for line in ninja.splitlines() if "=" in line and line.split("=", 1)[0].strip() in _HEADER_KEYS
    ]
    host_ninja = "\n".join(
        [
            *header,
            "",
            rule.group(0),
            f"build main.o: compile {HOST_PLACEHOLDER}/main.cpp",
            "default main.o",
            "",
        ]
    )
    targets = tuple(
        line.split(":", 1)[0].removeprefix("build ").strip()
        for line in edges
        if line != main_edge and line not in links
    )
    digest = hashlib.sha256(f"{len(host_ninja)}\0{host_ninja}\0{main_cpp}".encode()).hexdigest()
    return HostPlan(digest, host_ninja, targets, links[0])


def host_key(files: dict[str, str]) -> str:
    """A staged build's host key from its files (placeholdered text), or "" when it has none."""
    found = plan(files.get("build.ninja", ""), files.get("main.cpp", ""))
    return found.key if found else ""


def write_host_dir(found: HostPlan, staging: Path, host: Path) -> None:
    """The host directory: its ``build.ninja`` and a copy of staging's ``main.cpp`` (made here,
    before any confined process starts, so nothing can change it in between)."""
    (host / "main.cpp").write_bytes((staging / "main.cpp").read_bytes())
    (host / "build.ninja").write_text(found.ninja.replace(HOST_PLACEHOLDER, str(host)))


def link_through(found: HostPlan, staging: Path, host: Path) -> None:
    """Staging's ``build.ninja`` linking the host directory's ``main.o`` instead of its own."""
    ninja = staging / "build.ninja"
    text = ninja.read_text()
    link = found.link.replace(" main.o", f" {host}/main.o")
    ninja.write_text(text.replace(found.link, link))
