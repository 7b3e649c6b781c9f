"""The static ``monkey-patch`` rule's judgement of ``setattr`` and environment writes (issue 34).

What the rule exists to refuse is a change to objects the candidate does not own: torch, triton,
time, builtins, the harness's modules. Two spellings of that change are also everyday model code,
and are judged here by *whose* object or variable they touch rather than by the spelling:

* ``setattr``/``delattr`` (and ``__setattr__``/``__delattr__``) on the candidate's own objects:
  ``self`` in a method of a class the file defines (``setattr(self, f"conv{i}", nn.Conv2d(...))``
  in ``__init__``, as published level-3 kernels build their layers), ``super()``, or a local name
  bound only to an instance the call site created (``block = nn.Sequential(); setattr(block, ...)``).
  Anything else (a module, a parameter, a loop variable, a name also bound elsewhere) is refused,
  as is calling a method of the file's own class with a module as ``self`` (``P.patch(torch)``),
  the one way to point a trusted ``self`` at a module that needs no other refused syntax.
* Environment writes to a named allow-list of build settings (:data:`BUILD_ENV`: where
  ``load_inline`` builds and with which compiler, flags and job count). Every other key, a key
  that is not a string literal, and any other write (``update`` of a non-literal, ``clear``) stays
  refused, whichever of ``os.environ[k] = v``, ``setdefault``, ``update``, ``pop``, ``del``,
  ``os.putenv``/``os.unsetenv`` spells it: variables such as ``TRITON_INTERPRET`` or
  ``CUDA_LAUNCH_BLOCKING`` change what the harness measures. A build directory outside the
  sandbox is then moved into it by the worker (:mod:`evokernel.evaluation.inline_builds`).

An AST cannot prove that a name is what it looks like; the run-time check of the harness's own
objects (integrity.harness_snapshot, rule ``harness-modified``) stays behind this rule.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator

# Environment variables a candidate may set: build settings of torch.utils.cpp_extension and its
# compilers (each read by the build, none by the harness's measurement).
BUILD_ENV = frozenset(
    {
        "TORCH_EXTENSIONS_DIR",
        "TORCH_EXTENSIONS_VERBOSE",
        "TORCH_CUDA_ARCH_LIST",
        "TORCH_DONT_CHECK_COMPILER_ABI",
        "TORCH_NVCC_FLAGS",
        "MAX_JOBS",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDAHOSTCXX",
        "CC",
        "CXX",
        "CFLAGS",
        "CXXFLAGS",
        "LDFLAGS",
        "NVCC_APPEND_FLAGS",
        "NVCC_PREPEND_FLAGS",
        "NVCC_CCBIN",
    }
)
_ENV_WRITES = frozenset({"setdefault", "update", "pop", "popitem", "clear", "__setitem__", "__delitem__"})
_SETATTR = frozenset({"setattr", "delattr"})
_DUNDER_SETATTR = frozenset({"__setattr__", "__delattr__"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _literal_key(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _root(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def is_environ(node: ast.expr, modules: set[str]) -> bool:
    """``os.environ`` (any module-rooted ``.environ``) or a bare ``environ`` imported from os."""
    if isinstance(node, ast.Attribute) and node.attr == "environ":
        return isinstance(node.value, ast.Name) and node.value.id in modules
    return isinstance(node, ast.Name) and node.id == "environ" and node.id in modules


def environ_target(target: ast.expr, modules: set[str]) -> str | None:
    """For ``os.environ[key]`` as an assignment or ``del`` target: "" for a build setting, else the
    violation's detail; None for any other target."""
    if not (isinstance(target, ast.Subscript) and is_environ(target.value, modules)):
        return None
    key = _literal_key(target.slice)
    return "" if key in BUILD_ENV else _env_detail([key])


def _env_detail(keys: list[str | None]) -> str:
    names = sorted({k for k in keys if k})
    if not names:
        return "sets an environment variable it does not name literally (only build settings may be set)"
    return f"sets environment variable {', '.join(names)}, which is not a build setting"


def _env_call_keys(call: ast.Call) -> list[str | None]:
    """The keys an environment-writing call names (None for one it does not name literally)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else ""
    if name == "update":
        keys: list[str | None] = [k.arg for k in call.keywords]  # None for **mapping
        if len(call.args) > 1 or (call.args and not isinstance(call.args[0], ast.Dict)):
            return [None]
        return keys + [_literal_key(k) for arg in call.args if isinstance(arg, ast.Dict) for k in arg.keys]
    if name in ("popitem", "clear"):
        return [None]
    return [_literal_key(call.args[0]) if call.args else None]


def environ_violations(call: ast.Call, modules: set[str]) -> list[str]:
    """What an environment-writing call changes beyond the build settings, as violation details."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return []
    writes = is_environ(func.value, modules) and func.attr in _ENV_WRITES
    os_call = func.attr in ("putenv", "unsetenv") and _root(func.value) in modules
    if not (writes or os_call):
        return []
    bad = [key for key in _env_call_keys(call) if key not in BUILD_ENV]
    if not bad:
        return []
    return [_env_detail(bad)]


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes evaluated in ``scope``'s namespace; nested scopes are yielded, not entered
    (their decorators, defaults and bases are evaluated here)."""
    todo: list[ast.AST] = []
    if isinstance(scope, ast.Lambda):
        todo.append(scope.body)
    elif isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        todo.extend(scope.body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.ClassDef):
            todo.extend([*node.decorator_list, *node.bases, *(k.value for k in node.keywords)])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if not isinstance(node, ast.Lambda):
                todo.extend(node.decorator_list)
            todo.extend([*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)])
        else:
            todo.extend(ast.iter_child_nodes(node))


class _Ownership:
    """Which names of which scope stand for objects the candidate made (see the module's doc)."""

    def __init__(self, tree: ast.Module, modules: set[str]) -> None:
        self.modules = modules
        stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        self.rebound = stored
        self.classes = {
            n.name: n
            for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef)
            and n.name not in stored
            and not n.keywords  # no metaclass: calling the class makes an instance of it
            and not any(isinstance(b, ast.FunctionDef) and b.name == "__new__" for b in n.body)
        }

    def is_constructor(self, func: ast.expr) -> bool:
        """A class the file defines, or an imported ``Capitalised`` name (``nn.Linear``, ``Linear``)."""
        if isinstance(func, ast.Name):
            return func.id in self.classes or (
                func.id in self.modules and func.id[:1].isupper() and func.id not in self.rebound
            )
        root: ast.expr = func
        while isinstance(root, ast.Attribute):
            root = root.value
        return (
            isinstance(func, ast.Attribute)
            and func.attr[:1].isupper()
            and isinstance(root, ast.Name)
            and root.id in self.modules
            and root.id not in self.rebound
        )

    def own_names(self, scope: ast.AST, nodes: list[ast.AST], in_class: bool) -> set[str]:
        stores: Counter[str] = Counter()
        made: Counter[str] = Counter()
        excluded: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                stores[node.id] += 1
            elif isinstance(node, ast.Global | ast.Nonlocal):
                excluded.update(node.names)
            elif isinstance(node, _SCOPES) and not isinstance(node, ast.Lambda):
                excluded.add(node.name)
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and self.is_constructor(node.value.func)
            ):
                made.update(t.id for t in node.targets if isinstance(t, ast.Name))
        own = {name for name, n in made.items() if stores[name] == n}
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            params = [*scope.args.posonlyargs, *scope.args.args]
            decorators = [] if isinstance(scope, ast.Lambda) else scope.decorator_list
            static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in decorators)
            bound_self = None
            if in_class and params and not static and stores[params[0].arg] == 0:
                bound_self = params[0].arg  # self (or cls) of a method of the file's own class
                own.add(bound_self)
            every = [*params, *scope.args.kwonlyargs, scope.args.vararg, scope.args.kwarg]
            excluded.update(a.arg for a in every if a is not None and a.arg != bound_self)
        return own - excluded - self.modules

    def is_own(self, node: ast.expr | None, own: set[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in own
        # super() inside a method: the instance itself.
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"

    def instance_methods(self, cls: str) -> set[str]:
        node = self.classes.get(cls)
        if node is None:
            return set()
        return {
            b.name
            for b in node.body
            if isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef)
            and not any(
                isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in b.decorator_list
            )
        }


def setattr_violations(tree: ast.Module, modules: set[str]) -> list[tuple[int, str]]:
    """(line, detail) for each ``setattr``-like change of an object the candidate does not own."""
    owner = _Ownership(tree, modules)
    found: list[tuple[int, str]] = []
    scopes: list[tuple[ast.AST, bool]] = [(tree, False)]
    while scopes:
        scope, in_class = scopes.pop()
        nodes = list(_scope_nodes(scope))
        own = owner.own_names(scope, nodes, in_class)
        for node in nodes:
            if isinstance(node, _SCOPES):
                scopes.append((node, isinstance(scope, ast.ClassDef)))  # a def in a class body: a method
            elif isinstance(node, ast.Call):
                detail = _judge_call(node, owner, own)
                if detail:
                    found.append((node.lineno, detail))
    return found


def _judge_call(node: ast.Call, owner: _Ownership, own: set[str]) -> str | None:
    func = node.func
    first = node.args[0] if node.args else None
    if isinstance(func, ast.Name) and func.id in _SETATTR:
        return None if owner.is_own(first, own) else f"calls {func.id}() on an object it did not make"
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr in _DUNDER_SETATTR:
        # object.__setattr__(x, ...), nn.Module.__setattr__(x, ...): unbound, x is the target;
        # torch.__setattr__(...), super().__setattr__(...): bound, the owner is.
        unbound = isinstance(func.value, ast.Name | ast.Attribute) and (
            (isinstance(func.value, ast.Name) and func.value.id in ("object", "type"))
            or (func.value.attr if isinstance(func.value, ast.Attribute) else func.value.id)[:1].isupper()
        )
        target = first if unbound else func.value
        return None if owner.is_own(target, own) else f"calls {func.attr} on an object it did not make"
    cls = func.value.id if isinstance(func.value, ast.Name) else None
    if (
        cls in owner.classes
        and func.attr in owner.instance_methods(cls)
        and isinstance(first, ast.Name)
        and first.id in owner.modules
    ):
        return f"calls {cls}.{func.attr} with the module {first.id} as self"
    return None
