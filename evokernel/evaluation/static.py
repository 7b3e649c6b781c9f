"""Stage 1, static: named AST rules that refuse the known reward hacks before any code runs.

The rules are deliberately narrow: each names one trick seen in the wild (KernelBench, METR,
robust-kbench write-ups) and the syntax it needs. A kernel that computes its output does not need
any of it: no threads or processes, no capture checks or external streams, no frame or
``globals()`` inspection, no assignment into torch/time/the harness (``setattr`` on the file's own
objects and build settings in ``os.environ`` are not that: static_patching.py), no file or socket I/O, no
reference ``Model`` it did not define itself, no ``torch.compile`` (its Inductor kernels would
pass the launch check), no pointer-keyed caches. What real kernels do with syntax that hacks also
use is decided at run time from what the call did (integrity.py, supervisor.py): side streams and
CUDA graphs whose work the call joins before returning, ``try``/``except`` guards whose fallback
never runs, and a helper class named ``Model`` the candidate defines itself (weight-fusion code
keeps a copy of the reference) are accepted; work left running, a fallback taken, and the task's
own ``Model`` (imported, or named without being defined) are refused. Python is too dynamic for
an AST check to be a proof; the rules are the first of several layers (the run-time integrity
checks, the audit hook and the process split in :mod:`evokernel.evaluation.harness` are the
others), and they make the honest path the easy one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from evokernel.evaluation.static_patching import environ_target, environ_violations, setattr_violations

# Modules a kernel file has no reason to import: concurrency, processes, frames, raw memory, I/O.
FORBIDDEN_MODULES: dict[str, str] = {
    "threading": "threads-processes",
    "_thread": "threads-processes",
    "multiprocessing": "threads-processes",
    "concurrent": "threads-processes",
    "subprocess": "threads-processes",
    "asyncio": "threads-processes",
    "signal": "threads-processes",
    "pty": "threads-processes",
    "socket": "network",
    "urllib": "network",
    "http": "network",
    "requests": "network",
    "inspect": "introspection",
    "gc": "introspection",
    "importlib": "introspection",
    "builtins": "monkey-patch",
    "ctypes": "introspection",
    "cffi": "introspection",
    "traceback": "introspection",
    # Not tempfile: inside the worker it names the candidate's own directory (workspace.py), and
    # published kernels choose build directories with it (PIKE pop_25/task_19, issue 34).
    "io": "raw-io",
    "pathlib": "raw-io",
    "shutil": "raw-io",
    "pickle": "raw-io",
    "marshal": "raw-io",
    "evokernel": "reference-model",
    "reference": "reference-model",
    "__main__": "reference-model",
}
# Called as plain names.
FORBIDDEN_CALLS: dict[str, str] = {
    "globals": "introspection",
    "locals": "introspection",
    "vars": "introspection",
    "eval": "introspection",
    "exec": "introspection",
    "compile": "introspection",
    "__import__": "introspection",
    "breakpoint": "introspection",
    "open": "raw-io",
    "id": "output-cache",
}
# Attribute names, wherever they appear (``x.<name>``).
FORBIDDEN_ATTRS: dict[str, str] = {
    "_getframe": "introspection",
    "f_back": "introspection",
    "f_globals": "introspection",
    "f_locals": "introspection",
    "f_code": "introspection",
    "__globals__": "introspection",
    "__code__": "introspection",
    "__closure__": "introspection",
    "__subclasses__": "introspection",
    "__builtins__": "introspection",
    "modules": "introspection",  # sys.modules
    "settrace": "introspection",
    "setprofile": "introspection",
    # The dispatch-mode stack: how a candidate would notice the pytorch-recompute recorder.
    "_python_dispatch": "introspection",
    "TorchDispatchMode": "introspection",
    "_get_current_dispatch_mode": "introspection",
    "_get_current_dispatch_mode_stack": "introspection",
    "_len_torch_dispatch_stack": "introspection",
    "_get_dispatch_stack_at": "introspection",
    "stdout": "raw-io",
    "stderr": "raw-io",
    "__stdout__": "raw-io",
    "write": "raw-io",
    "fork": "process-control",
    "forkpty": "process-control",
    "system": "process-control",
    "popen": "process-control",
    "_exit": "process-control",
    "exit": "process-control",
    "kill": "process-control",
    "killpg": "process-control",
    "abort": "process-control",
    "setsid": "process-control",
    "posix_spawn": "process-control",
    "execv": "process-control",
    "execve": "process-control",
    "execvp": "process-control",
    "spawnv": "process-control",
    # A stream outside torch's pool (a raw handle) escapes the run-time join check (integrity.py).
    "ExternalStream": "streams",
    # Behaving differently while a CUDA graph of the call is captured would fake its graph timing.
    "is_current_stream_capturing": "streams",
    "compile": "generated-kernels",  # torch.compile
    "_dynamo": "generated-kernels",
    "_inductor": "generated-kernels",
    "data_ptr": "output-cache",
    "lru_cache": "output-cache",
    "cache": "output-cache",
}
# Attributes no honest kernel touches on any object: frames, code objects, raw pointers, streams.
ANY_OWNER_ATTRS = frozenset(
    {
        "_getframe",
        "f_back",
        "f_globals",
        "f_locals",
        "f_code",
        "__globals__",
        "__code__",
        "__closure__",
        "__subclasses__",
        "__builtins__",
        "settrace",
        "setprofile",
        "_python_dispatch",
        "TorchDispatchMode",
        "_get_current_dispatch_mode",
        "_get_current_dispatch_mode_stack",
        "_len_torch_dispatch_stack",
        "_get_dispatch_stack_at",
        "is_current_stream_capturing",
        "_exit",
        "fork",
        "ExternalStream",
        "_dynamo",
        "_inductor",
        "data_ptr",
    }
)
RULE_HELP: dict[str, str] = {
    "syntax": "the file must parse as Python",
    "threads-processes": "no threads, processes or signals: all work must happen inside the call",
    "process-control": "no fork/exec/exit/kill: the candidate may not end or spawn processes",
    "streams": "no capture checks or external streams: use torch's streams and join them before returning",
    "monkey-patch": "no assignment into modules (torch, time, triton, the harness) or builtins, no setattr "
    "on objects the file did not make, no environment variables but build settings (TORCH_EXTENSIONS_DIR, "
    "TORCH_CUDA_ARCH_LIST, MAX_JOBS, CXX, ...)",
    "introspection": "no frame, globals(), gc, module-table or dispatch-mode inspection, eval/exec, ctypes",
    "raw-io": "no files or raw stdout/stderr: results come only from the returned tensors",
    "network": "no sockets or HTTP",
    "reference-model": "no use of the task's reference Model (a Model class the file defines itself is "
    "its own) or the evaluator's modules",
    "generated-kernels": "no torch.compile/dynamo/inductor: the kernel must be written, not generated",
    "output-cache": "no pointer- or id-keyed caches (data_ptr, id, functools caches)",
}


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    detail: str

    def describe(self) -> str:
        return f"rule {self.rule} (line {self.line}): {self.detail}; {RULE_HELP[self.rule]}"


def check_source(source: str) -> list[Violation]:
    """Every rule violation in ``source``, in line order; a syntax error is one ``syntax`` violation."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Violation("syntax", exc.lineno or 0, f"syntax error: {exc.msg}")]
    found: list[Violation] = []
    modules = _imported_module_names(tree)
    # A top-level ``class Model`` is the candidate's own (a helper, or PIKE's name for the
    # optimized class); naming Model without defining it can only mean the task's.
    own_model = _defines_own_model(tree)
    for node in ast.walk(tree):
        found.extend(_check_node(node, modules, own_model))
    # setattr and friends: judged by whose object they change (static_patching.py).
    found.extend(
        Violation("monkey-patch", line, detail) for line, detail in setattr_violations(tree, modules)
    )
    return sorted(set(found), key=lambda v: (v.line, v.rule, v.detail))


def _imported_module_names(tree: ast.Module) -> set[str]:
    """Local names bound to imported modules or their members (torch, tl, F, perf_counter, ...)."""
    names = {"torch", "triton", "time", "os", "sys", "math", "numpy", "functools"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def _defines_own_model(tree: ast.Module) -> bool:
    """``class Model`` at the top level, or ``Model = X`` there for a class X the file defines
    (PIKE's files alias their optimized class: ``Model = ModelNew``)."""
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    if "Model" in classes:
        return True
    return any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "Model" for t in n.targets)
        and isinstance(n.value, ast.Name)
        and n.value.id in classes
        for n in tree.body
    )


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _check_node(node: ast.AST, modules: set[str], own_model: bool) -> list[Violation]:
    line = getattr(node, "lineno", 0)
    out: list[Violation] = []
    if isinstance(node, ast.Import | ast.ImportFrom):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if isinstance(node, ast.ImportFrom) and node.level:
            out.append(Violation("reference-model", line, "relative import"))
        for name in names:
            top = name.split(".")[0]
            # evokernel_reference_N: the worker's name for the loaded task module.
            rule = FORBIDDEN_MODULES.get("evokernel" if top.startswith("evokernel") else top)
            if rule:
                out.append(Violation(rule, line, f"imports {name}"))
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                rule = FORBIDDEN_ATTRS.get(alias.name) or FORBIDDEN_CALLS.get(alias.name)
                if rule:
                    out.append(Violation(rule, line, f"imports {alias.name} from {node.module}"))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
        out.append(Violation(FORBIDDEN_CALLS[node.func.id], line, f"calls {node.func.id}()"))
    elif isinstance(node, ast.Call):
        out.extend(Violation("monkey-patch", line, detail) for detail in environ_violations(node, modules))
    elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRS:
        # Common words (compile, modules, write, stream, ...) count only on a module (torch.compile,
        # sys.modules, os.write, torch.cuda.stream), not on self or a tensor.
        if node.attr in ANY_OWNER_ATTRS or _root_name(node.value) in modules:
            out.append(Violation(FORBIDDEN_ATTRS[node.attr], line, f"uses .{node.attr}"))
    elif isinstance(node, ast.Name) and node.id in ("Model", "__builtins__", "__loader__", "__spec__"):
        if node.id == "Model" and own_model:
            return out
        out.append(Violation("reference-model" if node.id == "Model" else "introspection", line, node.id))
    elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for target in targets:
            env = environ_target(target, modules)
            if env is not None:  # os.environ[key]: only build settings (static_patching.py)
                if env:
                    out.append(Violation("monkey-patch", line, env))
                continue
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute | ast.Subscript) and _root_name(sub) in modules:
                    out.append(Violation("monkey-patch", line, f"assigns into {_root_name(sub)}"))
                    break
    return out
