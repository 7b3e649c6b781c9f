"""Stage 1: the named AST rules, on the hack corpus, honest kernels and small snippets."""

from __future__ import annotations

import pytest

from evokernel.evaluation.static import RULE_HELP, check_source
from tests.core.corpus import ROOT, Case, corpus

STATIC_HACKS = [c for c in corpus("hack") if c.expect.stage == "static"]
HONEST = [c.path for c in corpus("legit")] + sorted((ROOT / "experiments" / "tasks").rglob("*.seed.py"))


@pytest.mark.parametrize("case", STATIC_HACKS, ids=lambda c: c.id)
def test_hack_violates_the_rule_its_header_names(case: Case) -> None:
    rules = {v.rule for v in check_source(case.path.read_text())}
    assert case.expect.rule in rules, rules


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.stem)
def test_honest_kernels_break_no_rule(path: object) -> None:
    assert check_source(path.read_text()) == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("snippet", "rule"),
    [
        ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "monkey-patch"),
        ("import triton\nsetattr(triton, 'jit', None)\n", "monkey-patch"),
        # setattr on what the file did not make: a module, a parameter, a name also bound elsewhere.
        ("def patch(m):\n    setattr(m, 'allclose', None)\n", "monkey-patch"),
        ("import torch\nm = getattr(torch, 'cuda')\nsetattr(m, 'synchronize', None)\n", "monkey-patch"),
        (
            "import torch\nimport torch.nn as nn\nb = nn.Linear(1, 1)\nb = torch\nsetattr(b, 'equal', 0)\n",
            "monkey-patch",
        ),
        (
            "import torch\nclass A:\n    def __new__(cls):\n        return torch\nsetattr(A(), 'equal', 0)\n",
            "monkey-patch",
        ),
        ("import torch\nobject.__setattr__(torch, 'allclose', None)\n", "monkey-patch"),
        ("import time\ntime.__setattr__('perf_counter', None)\n", "monkey-patch"),
        (
            "import torch\nclass P:\n    def patch(self):\n"
            "        setattr(self, 'allclose', 0)\nP.patch(torch)\n",
            "monkey-patch",
        ),
        (
            "import torch\nclass P:\n    def f(self):\n        self = torch\n"
            "        setattr(self, 'equal', 0)\n",
            "monkey-patch",
        ),
        (
            "import torch\nclass P:\n    @staticmethod\n    def f(self):\n"
            "        setattr(self, 'equal', 0)\n",
            "monkey-patch",
        ),
        # Environment variables that are not build settings, however the write is spelled.
        ("import os\nos.environ['TRITON_INTERPRET'] = '0'\n", "monkey-patch"),
        ("import os\nos.environ.setdefault('CUDA_LAUNCH_BLOCKING', '1')\n", "monkey-patch"),
        ("import os\nos.environ.update({'MAX_JOBS': '4', 'PATH': '/x'})\n", "monkey-patch"),
        ("import os\nkey = 'MAX_JOBS'\nos.environ[key] = '4'\n", "monkey-patch"),
        ("import os\ndel os.environ['PATH']\n", "monkey-patch"),
        ("import os\nos.putenv('LD_PRELOAD', 'x.so')\n", "monkey-patch"),
        ("from os import environ\nenviron.clear()\n", "monkey-patch"),
        ("import torch\ns = torch.cuda.ExternalStream(0)\n", "streams"),
        ("import torch\nif torch.cuda.is_current_stream_capturing():\n    pass\n", "streams"),
        ("class ModelNew:\n    def forward(self, x):\n        return Model()(x)\n", "reference-model"),
        ("def f():\n    import evokernel_reference_0\n", "reference-model"),
        ("import os\nos.system('ls')\n", "process-control"),
        ("from sys import _getframe\n", "introspection"),
        ("x = vars()\n", "introspection"),
        ("import torch\nf = torch.compile(abs)\n", "generated-kernels"),
        ("import functools\n@functools.lru_cache\ndef f(x):\n    return x\n", "output-cache"),
        ("from .reference import Model\n", "reference-model"),
        ("import urllib.request\n", "network"),
        ("def f(", "syntax"),
    ],
)
def test_snippet_is_caught_by_its_rule(snippet: str, rule: str) -> None:
    violations = check_source(snippet)
    assert rule in {v.rule for v in violations}, violations
    assert all(v.describe().startswith(f"rule {v.rule}") for v in violations)


def test_common_words_on_objects_are_not_flagged() -> None:
    """``compile``, ``modules`` or ``stream`` on self or a tensor are ordinary code."""
    source = (
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        for m in self.modules():\n            pass\n        return x.cuda_stream if False else x\n"
    )
    assert check_source(source) == []


def test_what_is_decided_at_run_time_breaks_no_rule() -> None:
    """Streams, CUDA graphs, try/except guards and a Model class of the file's own are judged by
    what the call does (integrity.py), not by their syntax."""
    source = (
        "import torch\nclass Model(torch.nn.Module):\n    pass\n"
        "class ModelNew(Model):\n    def forward(self, x):\n        s = torch.cuda.Stream()\n"
        "        g = torch.cuda.CUDAGraph()\n        with torch.cuda.stream(s):\n            pass\n"
        "        try:\n            y = x + 1\n        except RuntimeError:\n            y = x\n"
        "        torch.cuda.current_stream().wait_stream(s)\n        return y\n"
    )
    assert check_source(source) == []
    alias = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\nModel = ModelNew\n"
    assert check_source(alias) == []  # PIKE's files alias their optimized class
    borrowed = "import torch\nModel = torch.nn.Module\nclass ModelNew(Model):\n    pass\n"
    assert "reference-model" in {v.rule for v in check_source(borrowed)}


def test_module_level_import_guard_is_allowed_and_every_rule_is_documented() -> None:
    assert check_source("try:\n    import triton\nexcept ImportError:\n    triton = None\n") == []
    assert {v.rule for c in STATIC_HACKS for v in check_source(c.path.read_text())} <= set(RULE_HELP)


def test_setattr_on_the_files_own_objects_and_build_settings_break_no_rule() -> None:
    """Issue 34: published models register layers with ``setattr(self, ...)`` and set build
    settings in ``os.environ``; the rule judges whose object or variable is changed."""
    layers = (
        "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def __init__(self, n):\n"
        "        super().__init__()\n        for i in range(n):\n"
        "            setattr(self, f'conv{i}', nn.Conv2d(3, 3, 1))\n"
        "        block = nn.Sequential()\n        setattr(block, 'act', nn.ReLU())\n"
        "        self.block = block\n        delattr(self, 'conv0')\n"
        "        super().__setattr__('scale', 2.0)\n        object.__setattr__(self, 'n', n)\n"
        "        nn.Module.__setattr__(self, 'm', n)\n"
        "class Holder:\n    pass\nholder = Holder()\nsetattr(holder, 'x', 1)\n"
    )
    assert check_source(layers) == []
    settings = (
        "import os\nfrom os import environ\nos.environ['TORCH_EXTENSIONS_DIR'] = '/tmp/torch_extensions'\n"
        "os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\nos.environ.setdefault('MAX_JOBS', '4')\n"
        "os.environ.update({'CXX': 'g++', 'CUDA_HOME': '/usr/local/cuda'})\nenviron['CC'] = 'gcc'\n"
        "os.environ.update(NVCC_APPEND_FLAGS='-lineinfo')\n"
    )
    assert check_source(settings) == []
