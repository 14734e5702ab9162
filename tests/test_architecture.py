"""The house reads bottom-up: no module imports a module of a higher layer, and no
modules import each other in a loop, not even inside one folder.

The layers, lowest first, are the table below (docs/architecture.md draws the same
map). A module may import its own unit (the longest matching prefix) or any unit of a
strictly lower rank — never one of the same rank or above. Imports under
``TYPE_CHECKING`` count too: a type that needs an upward import is a seam in the wrong
place.

The import graph has one arrow per ``import`` statement anywhere in a module — at the
top, inside a function (a lazy import), under ``TYPE_CHECKING`` — to the module it
names: ``from .a import b`` points at ``a.b`` when ``b`` is a module, else at ``a``
(its ``__init__``). An import of a module's own enclosing package (``from .. import
__version__``, ``from . import views``'s ``.``) is no arrow: Python has loaded that
package before the module runs, so it orders nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memstrata"

# unit (module prefix) -> rank; the longest prefix a module starts with is its unit
RANKS: dict[str, float] = {
    "memstrata.errors": 0,
    "memstrata.text": 1,
    "memstrata.quoting": 1.5,  # the one quoting function for prompts (pure, stdlib only)
    "memstrata.ids": 1.6,  # the one rule for a valid id (pure, stdlib only)
    "memstrata.checks": 1.8,  # the checks of a caller's values at every entrance
    "memstrata.types": 2,
    "memstrata.config": 2,
    "memstrata.tokens": 3,
    "memstrata.providers": 3,
    "memstrata.prompts": 4,
    "memstrata.priority": 4,  # requests before background work: threads and the embedder seam only
    "memstrata.stores": 5,
    "memstrata.sessions": 6,
    "memstrata.retrieval": 6,
    "memstrata.layers": 7,  # the package's own __init__
    "memstrata.layers.working": 7.0,
    "memstrata.layers.episodic": 7.1,
    "memstrata.layers.semantic": 7.2,
    "memstrata.knowledge": 7.25,  # the knowledge base: beside the memory layers
    "memstrata.layers.context": 7.3,
    "memstrata.jobs": 8,
    "memstrata.usage": 8,
    "memstrata.requests": 8.5,
    "memstrata.assembly": 8.7,  # the context of the next LLM call: gathered, then assembled
    "memstrata.parts": 8.8,  # the pieces a user's handle delegates to
    "memstrata.user": 9,
    "memstrata.by_user": 9.3,  # Memory's by-user_id methods (the compatibility surface)
    "memstrata.memory": 9.5,
    "memstrata.aio": 9.7,  # AsyncMemory: the same calls in a worker thread
    "memstrata.client": 9.7,  # Client: the same calls over HTTP
    "memstrata": 10,  # the package's __init__: the curated public surface
    "memstrata.server": 10.5,
    "memstrata.integrations": 10.6,  # framework adapters (LangGraph store) over Memory
    "memstrata.compat": 10.6,  # Mem0's method names over Memory (memstrata.compat.mem0)
    "memstrata.bench": 11,
    "memstrata.cli": 12,
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PACKAGE.parent / rel).with_suffix(".py").exists() or (PACKAGE.parent / rel).is_dir()


def _unit(name: str) -> str:
    return max((u for u in RANKS if name == u or name.startswith(u + ".")), key=len)


def _imports(path: Path) -> set[str]:
    """Every memstrata module ``path`` imports (relative imports resolved)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("memstrata")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("memstrata"):
                continue
            modules = {f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")}
            if len(modules) < len(node.names):  # a name of the package itself
                out.add(target)
            out |= modules
    return {name for name in out if not module.startswith(name + ".")}


FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    for path in FILES:
        assert _unit(_module_name(path)) in RANKS


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_higher_layer(path: Path) -> None:
    module = _module_name(path)
    unit = _unit(module)
    bad = sorted(target for target in _imports(path)
                 if _unit(target) != unit and RANKS[_unit(target)] >= RANKS[unit])
    assert not bad, f"{module} ({unit}, rank {RANKS[unit]}) imports up or sideways: {bad}"


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _graph() -> dict[str, set[str]]:
    return {_module_name(path): _imports(path) for path in FILES}


def test_no_modules_import_each_other_in_a_loop() -> None:
    graph = _graph()
    assert sum(len(targets) for targets in graph.values()) > 500  # the graph is really read
    assert _loops(graph) == [], "break these loops by moving the shared piece down"


def test_the_loop_finder_sees_a_loop_through_a_lazy_and_a_type_only_import() -> None:
    probes = {PACKAGE / "layers" / "_probe_a.py": "from typing import TYPE_CHECKING\n"
                                                  "if TYPE_CHECKING:\n    from . import _probe_b\n",
              PACKAGE / "layers" / "_probe_b.py": "def f():\n    from ._probe_a import x\n"}
    for path, text in probes.items():
        path.write_text(text)
    try:
        graph = {**_graph(), **{_module_name(p): _imports(p) for p in probes}}
    finally:
        for path in probes:
            path.unlink()
    assert _loops(graph) == [["memstrata.layers._probe_a", "memstrata.layers._probe_b"]]


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    fake = PACKAGE / "stores" / "base.py"
    assert "memstrata.types" in _imports(fake)  # a real downward import is seen
    tree = "from ..memory import Memory\nfrom . import policy\n"
    probe = PACKAGE / "stores" / "_probe_for_test.py"
    probe.write_text(tree)
    try:
        found = _imports(probe)
    finally:
        probe.unlink()
    assert {"memstrata.memory", "memstrata.stores.policy"} <= found


def test_the_core_does_not_import_the_benchmarks_or_the_cli() -> None:
    import subprocess
    import sys

    code = ("import sys, memstrata, memstrata.cli.main; "
            "print(sorted(m for m in sys.modules if m.startswith(('memstrata.bench', "
            "'memstrata.cli.bench'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_file_is_past_800_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in FILES
            if (n := len(p.read_text().splitlines())) > 800}
    assert not long, f"split these into two concepts: {long}"


#: The longest a function may be, from its ``def`` to its last line (docstring included):
#: past that it does several things, each of which deserves a name that says why.
MAX_FUNCTION_LINES = 60

#: ``path:qualified name`` -> why it may be longer. Only rule tables belong here: a
#: function whose length is one row per rule, which splitting would scatter.
LONG_FUNCTIONS: dict[str, str] = {}


def _function_lengths(path: Path) -> dict[str, int]:
    """``path:qualified name`` -> lines, for every function and method in ``path``."""
    out: dict[str, int] = {}
    rel = path.relative_to(PACKAGE).as_posix()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out[f"{rel}:{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text()), "")
    return out


def test_no_function_is_past_60_lines() -> None:
    lengths = {name: n for path in FILES for name, n in _function_lengths(path).items()}
    long = {name: n for name, n in lengths.items() if n > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS}
    assert not long, (f"split these into pieces whose names say why (at most {MAX_FUNCTION_LINES} "
                      f"lines each): {long}")
    fixed = sorted(name for name in LONG_FUNCTIONS if lengths.get(name, 0) <= MAX_FUNCTION_LINES)
    assert not fixed, f"no longer past {MAX_FUNCTION_LINES} lines (or gone): drop from LONG_FUNCTIONS: {fixed}"


def test_the_length_check_sees_nested_functions_and_methods() -> None:
    probe = PACKAGE / "layers" / "_probe_long.py"
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    probe.write_text(f"class A:\n    def m(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
                     f"def outer():\n    def inner():\n    {body.replace(chr(10), chr(10) + '    ')}\n")
    try:
        found = _function_lengths(probe)
    finally:
        probe.unlink()
    assert found["layers/_probe_long.py:A.m"] == 61
    assert found["layers/_probe_long.py:outer.inner"] == 61
    assert found["layers/_probe_long.py:outer"] == 62
