"""The precompiled torch/extension.h: built with the flags torch really uses, used by matching
load_inline builds, refused by gcc where flags differ, and withdrawn when someone changes it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from evokernel.evaluation import pch
from evokernel.evaluation.sandbox import sandbox_env

pytestmark = pytest.mark.slow

# A candidate-shaped build, in its own interpreter: the hooks change torch's module for good.
BUILD = """
import sys, torch
from evokernel.evaluation import inline_builds, integrity
integrity.install_launch_hooks()
inline_builds.install(sys.argv[1])
from torch.utils.cpp_extension import load_inline
source = "#include <torch/extension.h>\\ntorch::Tensor twice(torch::Tensor x) { return x * 2; }"
ext = load_inline(
    "evk_pch_twice", source, functions=["twice"], extra_cflags=["-O3"], build_directory=sys.argv[2]
)
assert torch.equal(ext.twice(torch.ones(3)), torch.full((3,), 2.0))
assert integrity.launches() == 1
assert dict(inline_builds.counts) == {"header": 1}, inline_builds.counts
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every variant, built once for the module (~60 s of two cores)."""
    base = tmp_path_factory.mktemp("pch")
    info = pch.build(base, cuda=False)
    assert sorted(info["built"]) == sorted(pch.variant_name(v) for v in pch.VARIANTS)
    return Path(info["root"])


def header_use(cflags: list[str], source: Path) -> list[str]:
    """gcc's -H verdict on the precompiled header: ['! path'] used, ['x path'] refused. gcc prints
    it where the #include is, before it reads anything the header stands for; the rest of the
    compile (7 s after a used header, 23 s after a refused one, on 2 cores) says nothing more, so
    gcc is stopped there. A compile that ends without a verdict fails the test with its output."""
    compiler = shlex.split(os.environ.get("CXX", "c++"))
    command = [*compiler, *cflags, "-H", "-fsyntax-only", str(source)]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as gcc:
        assert gcc.stderr is not None
        seen = []
        for line in gcc.stderr:
            seen.append(line)
            if line.rstrip("\n").endswith(".gch"):
                gcc.kill()
                return [line.rstrip("\n")]
        gcc.wait()
    assert gcc.returncode == 0, "".join(seen)[-2000:]
    return []


def test_a_matching_load_inline_build_compiles_against_the_precompiled_header(
    built: Path, tmp_path: Path
) -> None:
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(built), str(build_dir)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ninja = (build_dir / "build.ninja").read_text()
    cflags_line = next(line for line in ninja.splitlines() if line.startswith("cflags = "))
    cflags = shlex.split(cflags_line.removeprefix("cflags = "))
    o3 = built / "O3"
    assert f"-I{o3}" in cflags
    main_cpp = build_dir / "main.cpp"
    # The build's own flags: gcc takes the header ...
    assert header_use(cflags, main_cpp) == [f"! {o3 / pch.HEADER}"]
    # ... the default variant with the default flags too ...
    default = [f"-I{built / 'default'}" if f == f"-I{o3}" else f for f in cflags if f != "-O3"]
    assert header_use(default, main_cpp) == [f"! {built / 'default' / pch.HEADER}"]
    # ... and refuses the -O3 one without -O3 (reading the real header instead): the check that
    # makes the cache unable to change what a build produces.
    mismatched = [f for f in cflags if f != "-O3"]
    assert header_use(mismatched, main_cpp) == [f"x {o3 / pch.HEADER}"]


def test_only_calls_whose_flags_name_a_variant_get_a_header(built: Path) -> None:
    assert pch.header_dir(built, None) == built / "default"
    assert pch.header_dir(built, []) == built / "default"
    assert pch.header_dir(built, [" -O3 ", ""]) == built / "O3"
    assert pch.header_dir(built, ["-O2"]) is None
    assert pch.header_dir(built, ["-O3", "-DFAST"]) is None
    assert pch.header_dir(built, "-O3") is None  # not a list: left to torch
    assert pch.header_dir(built.parent / "elsewhere", None) is None  # nothing built there


def test_the_cache_is_found_again_and_withdrawn_when_a_header_changes(built: Path, tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    cache = pch.HeaderCache(built.parent, cuda=False, env=sandbox_env("cpu", workdir))
    state = cache.wait(pch.BUILD_TIMEOUT_S)  # a rebuild would finish, and show in "built"
    assert state["state"] == "ready", state
    assert state["built"] == []  # every variant found, none rebuilt
    assert cache.root() == str(built)
    header = built / "default" / pch.HEADER
    os.utime(header)  # any write or touch changes ctime, which no one can set back
    assert cache.root() is None
    assert cache.describe()["state"] == "failed"
    assert "changed after it was built" in cache.describe()["reason"]


def test_a_failed_build_says_why_and_offers_nothing(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {**sandbox_env("cpu", workdir), "CXX": str(tmp_path / "no-such-compiler")}
    cache = pch.HeaderCache(tmp_path / "base", cuda=False, env=env)
    state = cache.wait(120)
    assert state["state"] == "failed"
    assert state["reason"]
    assert cache.root() is None
