"""The registry with every line of tracing code taken out, built at benchmark time.

The registry promises that tracing off costs nothing measurable: with ``trace=None`` every
emission point is one attribute test.  To measure that honestly the benchmark needs the same
registry *without* those tests, and a hand-kept copy would drift from the real one.  So this
module reads the registry's modules (:data:`SOURCES`: the call, the driver, the binding and
``ToolRegistry``) as they are now, removes the tracing code with :mod:`ast`, and compiles the rest
as sibling modules, ``toolcancel.runtime._<module>_untraced``: their relative imports of each
other name the stripped siblings, every other one resolves to the real package.
What is removed, all of it only ever doing something when a trace sink is set:

* every ``if <x>.trace is not None: ...`` and ``if <x>.trace is not None and ...: ...``
  (replaced by its ``else`` branch, which is what runs when the sink is ``None``), and every other
  test of the sink, in a statement or an expression, folded to its value when the sink is
  ``None`` (``a if b and x.trace is None else c`` becomes ``a if b else c``);
* the ``emit``, ``emit_line`` and ``emit_listener`` methods, and ``if`` statements that do nothing
  but call them;
* the assignments of the sink (``self._trace``, ``self.trace``), the ``trace`` keyword of
  ``ToolRegistry``, and the imports from ``.trace``; the sink the registry hands each call's plan
  (``CallPlan(..., self._trace, ...)``) becomes ``None``;
* locals that only the removed blocks set (``owner``), with their initial constant and the
  ``if <local> is not None:`` blocks that only emit;
* module-level tables built from names of ``.trace`` that nothing uses any more (``_LINES``,
  the line templates), and a sibling's import of such a table.

Everything else is kept verbatim.  If an expected pattern is missing (registry.py changed how
tracing is wired), or anything trace-related is left after stripping, :class:`StripError` names
it: the benchmark must then be taught the new wiring, not silently measure something else.
What hooks return (``Allow``, ``Accept``, ...) lives in ``toolcancel.runtime.hooks``, which both
modules import, so isinstance checks hold on both.

Like with like: when the package runs the registry compiled with mypyc (a ``TOOLCANCEL_COMPILE=1``
install, ``setup.py``), the stripped module is compiled the same way (into a temporary folder,
never into the installed package) before it is loaded.
"""

from __future__ import annotations

import ast
import sys
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {name: ROOT / "machine" / "runtime" / f"{name}.py"
           for name in ("stepping", "driver", "binding", "toolregistry")}  # fmt: skip
"""The registry's modules, each after those it imports: the call, the driver, the binding (which
setup.py compiles together) and the public face (``ToolRegistry``, plain Python)."""
COMPILED = ("stepping", "driver", "binding")
"""The modules compiled with mypyc when the package runs its driver compiled."""
SUFFIX = "_untraced"
"""``toolcancel.runtime.<module>`` without tracing is ``toolcancel.runtime._<module><SUFFIX>``."""

SINK_ATTRS = frozenset({"trace", "_trace"})
"""Attributes holding the trace sink (``ToolRegistry._trace``, ``_Call.trace``)."""
EMITTERS = frozenset({"emit", "emit_line", "emit_listener"})
"""The methods that write trace lines."""
TRACE_MODULE = "contract.trace"
"""``from ..contract.trace import ...`` (from the runtime room) brings in only tracing names."""

EXPECTED = {
    "trace guard (if <x>.trace is not None[ and ...])": 1,
    "emit method": 1,
    "emit_line method": 1,
    "emit_listener method": 1,
    "sink assignment (self._trace / self.trace = ...)": 2,
    "trace keyword of ToolRegistry.__init__": 1,
    "import from .trace": 1,
    "sink handed to a call's plan": 1,
}
"""Each pattern the stripper expects, with the fewest times it must be found (two sink
assignments: the registry's ``_trace`` and each call's ``trace``)."""


class StripError(RuntimeError):
    """registry.py's tracing is not wired the way the stripper expects."""


@dataclass
class Stripped:
    source_lines: int
    removed: Counter[str] = field(default_factory=Counter)
    trace_locals: set[str] = field(default_factory=set)
    trace_tables: set[str] = field(default_factory=set)
    """The trace-only module tables dropped so far (a sibling's import of one goes too)."""
    code: dict[str, Any] = field(default_factory=dict)
    """Each stripped module's code, by module (the keys of :data:`SOURCES`)."""
    source: dict[str, str] = field(default_factory=dict)
    """Each stripped module's source (mypyc compiles the driver's when it runs compiled)."""
    compiled: bool = False
    """Whether the stripped module was compiled with mypyc, as the shipped registry is."""

    def summary(self) -> str:
        """What was cut, e.g. ``11 trace guards, 1 emit method, ...``."""
        parts = [f"{n} {what.split(' (')[0]}{'s' if n > 1 else ''}"
                 for what, n in sorted(self.removed.items(), key=lambda kv: -kv[1])]
        if self.trace_locals:
            parts.append(f"trace-only locals {', '.join(sorted(self.trace_locals))}")
        if self.compiled:
            parts.append("compiled with mypyc like the shipped registry")
        return ", ".join(parts)


def _sink_test(node: ast.expr) -> bool | None:
    """The value of ``<anything>.trace is [not] None`` (or ``._trace``) when the sink is None;
    None if ``node`` is no such test."""
    if (
        isinstance(node, ast.Compare)
        and isinstance(node.left, ast.Attribute)
        and node.left.attr in SINK_ATTRS
        and len(node.ops) == 1
        and isinstance(node.ops[0], (ast.Is, ast.IsNot))
        and isinstance(node.comparators[0], ast.Constant)
        and node.comparators[0].value is None
    ):
        return isinstance(node.ops[0], ast.Is)
    return None


def fold(test: ast.expr) -> ast.expr:
    """A test (only its truth matters) with every sink test replaced by its value when the sink
    is None, and ``and`` / ``or`` / ``not`` over those values folded: a constant when the test
    no longer depends on anything else."""
    value = _sink_test(test)
    if value is not None:
        return ast.Constant(value)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = fold(test.operand)
        if isinstance(inner, ast.Constant):
            return ast.Constant(not inner.value)
        return ast.UnaryOp(ast.Not(), inner) if inner is not test.operand else test
    if isinstance(test, ast.BoolOp):
        decisive = isinstance(test.op, ast.Or)  # the constant that decides the whole test
        values = [fold(v) for v in test.values]
        if any(isinstance(v, ast.Constant) and bool(v.value) is decisive for v in values):
            return ast.Constant(decisive)
        rest = [v for v in values if not isinstance(v, ast.Constant)]
        if not rest:
            return ast.Constant(not decisive)
        if len(rest) == 1:
            return rest[0]
        if all(a is b for a, b in zip(rest, test.values, strict=False)) and len(rest) == len(
            test.values
        ):
            return test
        return ast.BoolOp(test.op, rest)
    return test


def _depends_on_sink(test: ast.expr) -> bool:
    return any(_sink_test(n) is not None for n in ast.walk(test) if isinstance(n, ast.expr))


def _is_emit_call(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and stmt.value.func.attr in EMITTERS
    )


def _assigned_attr(stmt: ast.stmt) -> str | None:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign):
        targets = [stmt.target]
    for t in targets:
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            return t.attr
    return None


class _Stripper(ast.NodeTransformer):
    def __init__(self, out: Stripped) -> None:
        self.out = out
        self.functions: list[ast.AST] = []  # the enclosing functions, innermost last
        self.trace_names: set[str] = set()  # the names imported from .trace

    def _body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        kept: list[ast.stmt] = []
        for stmt in stmts:
            result = self.visit(stmt)
            if result is None:
                continue
            kept.extend(result if isinstance(result, list) else [result])
        return kept

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = self._body(stmts)
                if not kept and name in ("body", "finalbody"):
                    kept = [ast.Pass()]  # a block cannot be empty
                setattr(node, name, kept)
        for handler in getattr(node, "handlers", []):
            self.visit(handler)
        return node

    def visit_If(self, node: ast.If) -> Any:
        if not _depends_on_sink(node.test):
            return self.generic_visit(node)
        test = fold(node.test)
        if isinstance(test, ast.Constant) and not test.value:
            # A trace guard: with the sink None its block never runs.
            self.out.removed["trace guard (if <x>.trace is not None[ and ...])"] += 1
            if self.functions:  # locals the guard sets belong to tracing, in this function
                names = _trace_locals(self.functions[-1])
                for stmt in node.body:
                    stored = _stored_names(stmt)
                    names |= stored
                    self.out.trace_locals |= stored
            return self._body(node.orelse) or None
        self.out.removed["sink test folded in an if"] += 1
        if isinstance(test, ast.Constant):
            return self._body(node.body) or None
        node.test = test
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        if node.name in EMITTERS:
            self.out.removed[f"{node.name} method"] += 1
            return None
        if node.name == "__init__":
            kw = [a for a in node.args.kwonlyargs if a.arg == "trace"]
            if kw:
                i = node.args.kwonlyargs.index(kw[0])
                del node.args.kwonlyargs[i]
                del node.args.kw_defaults[i]
                self.out.removed["trace keyword of ToolRegistry.__init__"] += 1
        self.functions.append(node)
        try:
            return self.generic_visit(node)
        finally:
            self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assign(self, node: ast.Assign) -> Any:
        return self._assignment(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        return self._assignment(node)

    def _assignment(self, node: ast.Assign | ast.AnnAssign) -> Any:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets)
            and isinstance(node.value, (ast.Tuple, ast.List))
        ):
            kept = [e for e in node.value.elts
                    if not (isinstance(e, ast.Constant) and e.value in SINK_ATTRS)]
            if len(kept) < len(node.value.elts):
                self.out.removed["trace slot"] += len(node.value.elts) - len(kept)
                node.value.elts = kept
            return node
        attr = _assigned_attr(node)
        if attr in SINK_ATTRS:
            self.out.removed["sink assignment (self._trace / self.trace = ...)"] += 1
            return None
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        if node.level == 2 and node.module == TRACE_MODULE:
            self.out.removed["import from .trace"] += 1
            self.trace_names |= {alias.asname or alias.name for alias in node.names}
            return None
        return node


_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda,
           ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _stored_names(node: ast.AST) -> set[str]:
    """Names a statement binds in its own scope (not inside comprehensions or nested defs)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return {node.id}
    if isinstance(node, _SCOPES):
        return set()
    out: set[str] = set()
    for child in ast.iter_child_nodes(node):
        out |= _stored_names(child)
    return out


def _trace_locals(function: ast.AST) -> set[str]:
    names: set[str] | None = getattr(function, "trace_locals", None)
    if names is None:
        names = set()
        function.trace_locals = names  # type: ignore[attr-defined]
    return names


class _FoldExpressions(ast.NodeTransformer):
    """First pass: sink tests inside expressions, e.g. ``a if b and x.trace is None else c``
    becomes ``a if b else c`` (``if`` statements are the second pass's)."""

    def __init__(self, out: Stripped) -> None:
        self.out = out

    def visit_If(self, node: ast.If) -> Any:
        node.body = [self.visit(s) for s in node.body]
        node.orelse = [self.visit(s) for s in node.orelse]
        return node  # its test is the stripper's

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        self.generic_visit(node)
        if not _depends_on_sink(node.test):
            return node
        self.out.removed["sink test folded in an expression"] += 1
        test = fold(node.test)
        if isinstance(test, ast.Constant):
            return node.body if test.value else node.orelse
        node.test = test
        return node

    def visit_Call(self, node: ast.Call) -> Any:
        """The registry hands its sink to each call's plan (``CallPlan(..., self._trace, ...)``):
        with the sink gone, the plan gets ``None``."""
        self.generic_visit(node)
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Attribute) and arg.attr in SINK_ATTRS:
                node.args[i] = ast.copy_location(ast.Constant(None), arg)
                self.out.removed["sink handed to a call's plan"] += 1
        return node


class _TraceLocals(ast.NodeTransformer):
    """Second pass: locals only the removed blocks of a function set (their initial constant, and
    ``if`` blocks on them that only emit)."""

    def __init__(self, out: Stripped) -> None:
        self.out = out
        self.names: list[set[str]] = [set()]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        self.names.append(getattr(node, "trace_locals", set()))
        try:
            self.generic_visit(node)
        finally:
            self.names.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> Any:
        t = node.test
        if (
            isinstance(t, ast.Compare)
            and isinstance(t.left, ast.Name)
            and t.left.id in self.names[-1]
            and not node.orelse
            and all(_is_emit_call(s) for s in node.body)
        ):
            self.out.removed["emit-only if on a trace local"] += 1
            return None
        self.generic_visit(node)
        return node

    def visit_Assign(self, node: ast.Assign) -> Any:
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in self.names[-1]
            and isinstance(node.value, ast.Constant)
        ):
            self.out.removed["initial constant of a trace local"] += 1
            return None
        return node


def _drop_trace_tables(tree: ast.Module, trace_names: set[str], out: Stripped) -> None:
    """Third pass: module-level assignments built from names of ``.trace`` whose names nothing
    in the stripped module reads any more."""
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    kept: list[ast.stmt] = []
    dropped = False  # the statement before was a removed table (its docstring goes with it)
    for stmt in tree.body:
        if dropped and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            dropped = False
            continue
        dropped = False
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            bound = {t.id for t in targets if isinstance(t, ast.Name)}
            uses = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            if bound and uses & trace_names and not bound & read:
                out.removed["trace-only module table"] += 1
                out.trace_tables |= bound
                dropped = True
                continue
        kept.append(stmt)
    tree.body = kept


def _leftovers(tree: ast.AST, trace_names: set[str]) -> list[str]:
    """Anything tracing-related still in the stripped tree (``line N: what``)."""
    found: list[str] = []
    attrs = SINK_ATTRS | EMITTERS | {"on_listener"}
    names = {"trace"} | trace_names  # and what this module imported from .trace

    def walk(node: ast.AST, local: set[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local = getattr(node, "trace_locals", set())
        what = None
        if isinstance(node, ast.Attribute) and node.attr in attrs:
            what = f".{node.attr}"
        elif isinstance(node, ast.Name) and (node.id in names or node.id in local):
            what = f"{node.id} (a name only tracing code used)" if node.id in local else node.id
        elif isinstance(node, ast.arg) and node.arg == "trace":
            what = "parameter trace"
        if what is not None:
            found.append(f"line {getattr(node, 'lineno', '?')}: {what}")
        for child in ast.iter_child_nodes(node):
            walk(child, local)

    walk(tree, set())
    return found


class _Siblings(ast.NodeTransformer):
    """Fourth pass: a relative import of another stripped module names its stripped copy, and
    drops the trace-only tables that copy no longer has."""

    def __init__(self, siblings: set[str], suffix: str, out: Stripped) -> None:
        self.siblings, self.suffix, self.out = siblings, suffix, out

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom | None:
        if node.level != 1:
            return node
        if node.module in self.siblings:
            node.module = f"_{node.module}{self.suffix}"
            kept = [a for a in node.names if a.name not in self.out.trace_tables]
            self.out.removed["import of a trace-only table"] += len(node.names) - len(kept)
            node.names = kept
            return node if kept else None
        if node.module is None:  # from . import driver
            node.names = [ast.alias(f"_{a.name}{self.suffix}", a.asname or a.name)
                          if a.name in self.siblings else a for a in node.names]  # fmt: skip
        return node


def strip(sources: dict[str, str], filenames: dict[str, str] | None = None,
          suffix: str = SUFFIX) -> Stripped:
    """The registry's modules (source by module name, each after those it imports) without their
    tracing code, compiled (``code``), and what was cut from them together; a module's imports of
    the others name their copies, ``toolcancel.runtime._<name><suffix>``."""
    out = Stripped(source_lines=sum(source.count("\n") for source in sources.values()))
    trees = {}
    for name, source in sources.items():
        filename = (filenames or {}).get(name, name + ".py")
        tree = ast.parse(source, filename)
        tree = _FoldExpressions(out).visit(tree)
        stripper = _Stripper(out)
        tree = stripper.visit(tree)
        tree = _TraceLocals(out).visit(tree)
        _drop_trace_tables(tree, stripper.trace_names, out)
        tree = _Siblings(set(sources), suffix, out).visit(tree)
        left = _leftovers(tree, stripper.trace_names | out.trace_tables)
        if left:
            raise StripError(
                f"{filename}: tracing code the stripper does not know survived: "
                + "; ".join(left)
            )
        ast.fix_missing_locations(tree)
        trees[name] = tree
        out.code[name] = compile(tree, f"{filename} (tracing stripped)", "exec")
        out.source[name] = ast.unparse(tree)
    missing = [f"{what} (found {out.removed[what]}, expected at least {least})"
               for what, least in EXPECTED.items() if out.removed[what] < least]
    if missing:
        raise StripError(
            f"{', '.join(sorted(sources))}: tracing is no longer wired as bench/untraced.py "
            "expects; missing: " + "; ".join(missing)
        )
    return out


def load(paths: dict[str, Path] = SOURCES) -> tuple[types.ModuleType, Stripped]:
    """Build (or rebuild) the registry without tracing from its modules as they are now: the call,
    the driver and the binding (compiled with mypyc when the package runs its driver compiled)
    and ``toolcancel.runtime._toolregistry_untraced``, whose ``ToolRegistry`` runs its calls on
    them. Returns the latter."""
    import tempfile

    import toolcancel.runtime.registry

    stripped = strip({name: path.read_text("utf-8") for name, path in paths.items()},
                     {name: str(path) for name, path in paths.items()})
    if toolcancel.runtime.registry.compiled():
        with tempfile.TemporaryDirectory(prefix="untraced-") as folder:
            compile_variant({f"_{name}{SUFFIX}": stripped.source[name] for name in COMPILED},
                            folder)
        stripped.compiled = True
        return _run(f"toolcancel.runtime._toolregistry{SUFFIX}", stripped.code["toolregistry"],
                    paths["toolregistry"]), stripped
    return run_interpreted(stripped, paths), stripped


def run_interpreted(stripped: Stripped, paths: dict[str, Path] = SOURCES,
                    suffix: str = SUFFIX) -> types.ModuleType:
    """Run every stripped module interpreted (``strip`` with the same ``suffix``), in order;
    returns the face's copy."""
    modules = {name: _run(f"toolcancel.runtime._{name}{suffix}", stripped.code[name], paths[name])
               for name in paths}  # fmt: skip
    return modules["toolregistry"]


def compile_variant(sources: dict[str, str], folder: str) -> None:
    """Compile ``sources`` (by stem, each after those it imports) with mypyc as the modules
    ``toolcancel.runtime.<stem>``, in ``folder`` (with a copy of the package they import from, as
    setup.py compiles the driver), and load them."""
    import importlib.machinery
    import importlib.util
    import shutil
    import subprocess

    import toolcancel

    if importlib.util.find_spec("mypyc") is None:
        raise StripError("the package runs compiled, so the untraced registry is compiled too: "
                         "that needs mypy (mypyc) and setuptools in this venv")
    package = Path(folder) / "toolcancel"
    shutil.copytree(Path(toolcancel.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    for stem, source in sources.items():
        (package / "runtime" / f"{stem}.py").write_text(source, "utf-8")
    done = subprocess.run([sys.executable, "-m", "mypyc", "--ignore-missing-imports",
                           *(f"toolcancel/runtime/{stem}.py" for stem in sources)], cwd=folder,
                          capture_output=True, text=True, check=False)  # fmt: skip
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    group = sorted(Path(folder).glob(f"*__mypyc{suffix}"))  # their code, for several modules
    libraries = {path.name.removesuffix(suffix): path for path in group}
    libraries.update({f"toolcancel.runtime.{stem}": package / "runtime" / f"{stem}{suffix}"
                      for stem in sources})  # fmt: skip
    if done.returncode or len(group) != 1 or not all(p.is_file() for p in libraries.values()):
        said = (done.stdout + done.stderr).strip().splitlines()
        raise StripError("mypyc failed on the untraced registry: " + " | ".join(said[-5:]))
    for name, location in libraries.items():  # the code first: each module's stub imports it
        loader = importlib.machinery.ExtensionFileLoader(name, str(location))
        spec = importlib.util.spec_from_file_location(name, location, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        loader.exec_module(module)


def _run(name: str, code: Any, path: Path) -> types.ModuleType:
    """Run ``code`` as the module ``name`` of the package (its relative imports are the
    package's)."""
    import toolcancel

    module = types.ModuleType(name)
    module.__package__ = f"{toolcancel.__name__}.runtime"
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


if __name__ == "__main__":
    _, s = load()
    print(f"{', '.join(str(p.relative_to(ROOT)) for p in SOURCES.values())}: removed "
          f"{s.summary()}")
