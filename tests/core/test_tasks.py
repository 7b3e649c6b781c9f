"""The task loader (evokernel.tasks) through its public API, and the bundled suite in experiments/tasks."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from evokernel.exceptions import TaskError
from evokernel.tasks import METADATA_KEYS, load_task, load_tasks, task_globals_overrides
from evokernel.types import DEFAULT_TOLERANCE

SUITE = Path(__file__).resolve().parents[2] / "experiments" / "tasks"

BODY = """
import torch
import torch.nn as nn

batch_size = 64
dim = 128


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""

SEED = """
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def task_text(meta: str | None = None, body: str = BODY) -> str:
    return body if meta is None else f"{body}\n\nEVOKERNEL = {meta}\n"


# --- loading ---------------------------------------------------------------------------------


def test_single_file_with_full_metadata(tmp_path: Path) -> None:
    write(tmp_path / "relu.seed.py", SEED)
    meta = (
        '{"level": 2, "description": "ReLU", "small": {"batch_size": 4}, '
        '"variants": [{"batch_size": 7}, {"batch_size": 3, "dim": 5}], '
        '"tolerance": {"float16": [2e-2, 3e-2]}, "seed": "relu.seed.py", "nondeterministic": True}'
    )
    path = write(tmp_path / "relu.py", task_text(meta))
    task = load_task(path)
    assert task.name == "relu"
    assert task.path == str(path.resolve())
    assert task.source == path.read_text()
    assert task.level == 2
    assert task.description == "ReLU"
    assert task.small == {"batch_size": 4}
    assert task.variants == ({"batch_size": 7}, {"batch_size": 3, "dim": 5})
    assert task.tolerance["float16"] == (2e-2, 3e-2)
    assert task.tolerance["float32"] == DEFAULT_TOLERANCE["float32"]
    assert task.seed_source == SEED
    assert task.seed_path == str((tmp_path / "relu.seed.py").resolve())
    assert task.nondeterministic is True
    assert load_tasks(path) == [task]


def test_file_without_metadata_gets_defaults(tmp_path: Path) -> None:
    task = load_task(write(tmp_path / "plain.py", BODY))
    assert (task.level, task.small, task.variants, task.seed_source, task.seed_path) == (
        None,
        {},
        (),
        None,
        None,
    )
    assert task.tolerance == DEFAULT_TOLERANCE
    assert task.description == ""


def test_loading_never_executes_the_file(tmp_path: Path) -> None:
    body = BODY + "\nimport module_that_does_not_exist\nraise SystemExit('executed')\n"
    assert load_task(write(tmp_path / "inert.py", body)).name == "inert"


def test_nested_level_folders_skip_helpers_and_infer_level(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    write(root / "level1" / "b.py", BODY)
    write(root / "level1" / "a.py", task_text('{"seed": "a.seed.py"}'))
    write(root / "level1" / "a.seed.py", SEED)
    write(root / "level1" / "_helper.py", "x = 1\n")
    write(root / "level1" / "__pycache__" / "stale.py", "x = 1\n")
    write(root / "level1" / "notes.txt", "not a task\n")
    write(root / "level_2" / "c.py", BODY)
    write(root / "level_2" / "d.py", task_text('{"level": 5}'))
    write(root / "misc" / "e.py", BODY)
    tasks = load_tasks(root)
    assert [(t.name, t.level) for t in tasks] == [("a", 1), ("b", 1), ("c", 2), ("d", 5), ("e", None)]
    assert tasks[0].seed_source == SEED
    assert [t.name for t in load_tasks(root / "level_2")] == ["c", "d"]


def test_kernelbench_style_folder(tmp_path: Path) -> None:
    level = tmp_path / "KernelBench" / "level1"
    for name in ("10_Softmax.py", "2_ReLU.py", "1_Matmul.py"):
        write(level / name, BODY)
    tasks = load_tasks(level)
    assert [t.name for t in tasks] == ["1_Matmul", "2_ReLU", "10_Softmax"]
    assert {t.level for t in tasks} == {1}
    assert all(t.variants == () and t.seed_source is None for t in tasks)


def test_several_paths_keep_argument_order_and_dedupe_same_file(tmp_path: Path) -> None:
    a = write(tmp_path / "x" / "a.py", BODY)
    write(tmp_path / "y" / "b.py", BODY)
    tasks = load_tasks([tmp_path / "y", str(a), tmp_path / "x"])
    assert [t.name for t in tasks] == ["b", "a"]


def test_duplicate_names_name_both_files(tmp_path: Path) -> None:
    one = write(tmp_path / "level1" / "same.py", BODY)
    two = write(tmp_path / "level2" / "same.py", BODY)
    with pytest.raises(TaskError) as exc:
        load_tasks([tmp_path / "level1", tmp_path / "level2"])
    assert str(one.resolve()) in str(exc.value) and str(two.resolve()) in str(exc.value)
    with pytest.raises(TaskError, match="duplicate"):
        load_tasks(tmp_path)


def test_missing_path_and_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="does not exist"):
        load_tasks(tmp_path / "nope")
    with pytest.raises(TaskError, match="does not exist"):
        load_task(tmp_path / "nope.py")
    write(tmp_path / "empty" / "_private.py", BODY)
    write(tmp_path / "empty" / "x.seed.py", SEED)
    with pytest.raises(TaskError, match="no task files"):
        load_tasks(tmp_path / "empty")
    with pytest.raises(TaskError, match="no task paths"):
        load_tasks([])


MODEL_LINE = BODY[: BODY.index("class Model")].count("\n") + 1
MISSING_MODEL = BODY.replace("class Model(nn.Module)", "class Other(nn.Module)")
# get_inputs defined inside a class is not a module-level function.
NESTED_INPUTS = BODY.replace("def get_inputs():", "class Holder:\n  def get_inputs():")

BROKEN: list[tuple[str, str, list[str]]] = [
    ("syntax", BODY.replace("(nn.Module):", "(nn.Module:"), ["syntax error", f"line {MODEL_LINE}"]),
    ("no_model", MISSING_MODEL, ["missing", "class Model"]),
    ("no_get_inputs", BODY.replace("def get_inputs", "def make_inputs"), ["function get_inputs()"]),
    ("nested_get_inputs", NESTED_INPUTS, ["function get_inputs()"]),
    ("no_init_inputs", BODY.replace("def get_init_inputs", "def init"), ["function get_init_inputs()"]),
    ("meta_call", task_text('{"level": int("1")}'), ["EVOKERNEL", "not a literal dict"]),
    ("meta_name", task_text('{"small": {"dim": dim}}'), ["EVOKERNEL", "not a literal dict"]),
    ("meta_list", task_text('[{"level": 1}]'), ["EVOKERNEL", "literal dict", "list"]),
    ("meta_key", task_text('{"smal": {"dim": 8}}'), ["unknown EVOKERNEL key 'smal'", *METADATA_KEYS]),
    ("small_global", task_text('{"small": {"batch": 8}}'), ["small", "batch", "batch_size, dim"]),
    ("variant_global", task_text('{"variants": [{"dim": 8}, {"seq": 3}]}'), ["variants[1]", "seq"]),
    ("variants_type", task_text('{"variants": {"dim": 8}}'), ["variants must be a list"]),
    ("tol_dtype", task_text('{"tolerance": {"fp16": [1e-2, 1e-2]}}'), ["'fp16'", "float16", "float32"]),
    ("tol_pair", task_text('{"tolerance": {"float16": [1e-2]}}'), ["[atol, rtol]"]),
    ("level_type", task_text('{"level": "one"}'), ["level", "'one'"]),
    ("seed_missing", task_text('{"seed": "gone.seed.py"}'), ["seed file", "gone.seed.py", "does not exist"]),
    ("seed_no_modelnew", task_text('{"seed": "bad.seed.py"}'), ["bad.seed.py", "ModelNew"]),
    ("seed_syntax", task_text('{"seed": "syntax.seed.py"}'), ["syntax.seed.py", "syntax error", "line 1"]),
]


@pytest.mark.parametrize(("stem", "text", "expected"), BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_file_names_itself_and_the_problem(
    tmp_path: Path, stem: str, text: str, expected: list[str]
) -> None:
    write(tmp_path / "bad.seed.py", "class NotModelNew:\n    pass\n")
    write(tmp_path / "syntax.seed.py", "class ModelNew(:\n")
    path = write(tmp_path / f"{stem}.py", text)
    for loader in (load_task, load_tasks):
        with pytest.raises(TaskError) as exc:
            loader(path)
        message = str(exc.value)
        assert f"{stem}.py" in message
        for part in expected:
            assert part in message, f"{part!r} not in {message!r}"


def test_folder_with_several_broken_files_lists_each(tmp_path: Path) -> None:
    write(tmp_path / "good.py", BODY)
    write(tmp_path / "one.py", MISSING_MODEL)
    write(tmp_path / "two.py", task_text('{"bogus": 1}'))
    with pytest.raises(TaskError) as exc:
        load_tasks(tmp_path)
    message = str(exc.value)
    assert "2 task files could not be loaded" in message
    assert "one.py: missing module-level class Model" in message
    assert "two.py: unknown EVOKERNEL key 'bogus'" in message


def test_globals_overrides_apply_small_then_variant(tmp_path: Path) -> None:
    meta = '{"small": {"batch_size": 4, "dim": 8}, "variants": [{"batch_size": 7}]}'
    task = load_task(write(tmp_path / "t.py", task_text(meta)))
    assert task_globals_overrides(task, "full", 0) == {}
    assert task_globals_overrides(task, "full", 1) == {"batch_size": 7}
    assert task_globals_overrides(task, "small", 0) == {"batch_size": 4, "dim": 8}
    assert task_globals_overrides(task, "small", 1) == {"batch_size": 7, "dim": 8}
    with pytest.raises(TaskError, match="variant 2 out of range"):
        task_globals_overrides(task, "small", 2)
    with pytest.raises(TaskError, match="unknown scale 'tiny'"):
        task_globals_overrides(task, "tiny", 0)


# --- the bundled suite -----------------------------------------------------------------------

SUITE_TASKS = load_tasks(SUITE)


def test_suite_covers_three_levels_with_seeds() -> None:
    levels = [t.level for t in SUITE_TASKS]
    assert len(SUITE_TASKS) >= 12
    assert levels.count(1) >= 6 and levels.count(2) >= 4 and levels.count(3) >= 3
    assert set(levels) == {1, 2, 3}
    assert sum(t.seed_source is not None for t in SUITE_TASKS) >= 4
    assert all(t.small and t.variants and t.description for t in SUITE_TASKS)


def launch_knobs(source: str) -> list[dict[str, Any]]:
    """Keyword arguments of every kernel launch (a call carrying num_warps) in a seed."""
    launches = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and any(k.arg == "num_warps" for k in node.keywords):
            launches.append({k.arg: k.value for k in node.keywords if k.arg})
    return launches


@pytest.mark.parametrize("task", [t for t in SUITE_TASKS if t.seed_source], ids=lambda t: t.name)
def test_suite_seeds_expose_literal_knobs_at_the_launch(task: Any) -> None:
    # The tune operator edits integer literals at the launch site: every BLOCK knob, num_warps and
    # num_stages must be one, and BLOCK values must be powers of two for tl.arange.
    launches = launch_knobs(task.seed_source)
    assert launches
    for kwargs in launches:
        blocks = {k: v for k, v in kwargs.items() if "BLOCK" in k}
        assert blocks and {"num_warps", "num_stages"} <= kwargs.keys()
        for name in [*blocks, "num_warps", "num_stages"]:
            value = kwargs[name]
            assert isinstance(value, ast.Constant) and isinstance(value.value, int), name
        assert all(16 <= v.value <= 512 and v.value & (v.value - 1) == 0 for v in blocks.values())


def import_task(task: Any, overrides: dict[str, Any]) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_evk_suite_{task.name}", task.path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for key, value in overrides.items():
        setattr(module, key, value)
    return module


SMALL_MAX_FLOPS = 10**7
SMALL_MAX_ELEMENTS = 10**5


@pytest.mark.parametrize("task", SUITE_TASKS, ids=lambda t: t.name)
def test_suite_reference_is_cheap_at_small_scale_and_uses_every_input(task: Any) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    for variant in range(len(task.variants) + 1):
        module = import_task(task, task_globals_overrides(task, "small", variant))
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
        flops = FlopCounterMode(display=False)
        with torch.no_grad(), flops:
            out = model(*inputs)
        # Cheap by its work, not its time on a shared machine: the Triton interpreter runs this
        # scale on a CPU. The bundled small scales reach 1e6 matmul FLOPs and 3e4 tensor elements;
        # their full scales 3e7 elements and up to 1e11 FLOPs.
        elements = sum(t.numel() for t in [*inputs, out] if isinstance(t, torch.Tensor))
        assert flops.get_total_flops() <= SMALL_MAX_FLOPS and elements <= SMALL_MAX_ELEMENTS
        assert all(t.device.type == "cpu" for t in inputs if isinstance(t, torch.Tensor))
        assert not torch.allclose(out.float(), torch.zeros_like(out, dtype=torch.float32), atol=1e-2)
        atol, rtol = task.tolerance[str(out.dtype).removeprefix("torch.")]
        torch.manual_seed(1)
        fresh = module.get_inputs()
        # Replacing any single tensor input must move the output beyond the task's tolerance.
        for i, replacement in enumerate(fresh):
            if not isinstance(replacement, torch.Tensor):
                continue
            changed = [replacement if j == i else x for j, x in enumerate(inputs)]
            with torch.no_grad():
                other = model(*changed)
            assert not torch.allclose(other, out, atol=atol, rtol=rtol), f"output ignores input {i}"
