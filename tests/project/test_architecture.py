"""The layers of docs/architecture.md hold: checked on the import graph, read from the source.

The graph has a node for app.py and for every module under tfviz/, and an edge for every import,
at the top of a module or inside a function (a view imports some modules only when it is
opened). `from x import y` is an edge to x.y when y is a submodule, else to x. Nothing is
imported to build it, so a test that fails says which file and which line without running it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = "app"
VIEWS = "tfviz.ui.views"
UI = "tfviz.ui"
STATE = "tfviz.ui.state"


@dataclass(frozen=True)
class Edge:
    source: str  # the importing module
    target: str  # the imported module (x.y when y is a submodule of x)
    line: int

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> its file: app.py and every module of the tfviz package."""
    files = {APP: root / "app.py"}
    for path in sorted((root / "tfviz").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path
    return files


def is_package(name: str, files: dict[str, Path]) -> bool:
    return name in files and files[name].name == "__init__.py"


def resolve(node: ast.ImportFrom, module: str, files: dict[str, Path]) -> str:
    """The absolute name of a `from ... import` statement's module (relative imports included)."""
    if not node.level:
        return node.module or ""
    package = module if is_package(module, files) else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def imports_of(module: str, path: Path, files: dict[str, Path]) -> Iterator[Edge]:
    """Every import in the file, wherever it is (module level or inside a function)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Edge(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node, module, files)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield Edge(module, sub if sub in files else base, node.lineno)


def import_graph(root: Path = ROOT) -> list[Edge]:
    files = module_files(root)
    edges = (edge for name, path in files.items() for edge in imports_of(name, path, files))
    return list(dict.fromkeys(edges))  # `from x import a, b` is one edge to x


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def view_of(name: str) -> str | None:
    """The view a module belongs to: tfviz.ui.views.train for tfviz.ui.views.train.retrain too
    (a view may be a package of parts); None outside the views."""
    if not within(name, VIEWS) or name == VIEWS:
        return None
    return ".".join(name.split(".")[:4])


def find_cycle(edges: list[Edge]) -> list[str] | None:
    """One import cycle among tfviz modules, as [a, b, ..., a], or None."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if within(e.source, "tfviz") and within(e.target, "tfviz") and e.source != e.target:
            graph.setdefault(e.source, set()).add(e.target)
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_path:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in done:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            found = visit(start)
            if found:
                return found
    return None


def cross_view_imports(edges: list[Edge]) -> list[Edge]:
    """Imports from one view (module or package under tfviz/ui/views) into another."""
    return [
        e
        for e in edges
        if view_of(e.source) and view_of(e.target) and view_of(e.source) != view_of(e.target)
    ]


def streamlit_outside_ui(edges: list[Edge]) -> list[Edge]:
    """Library modules (tfviz/ outside tfviz/ui) that import streamlit."""
    return [
        e
        for e in edges
        if e.source != APP and not within(e.source, UI) and within(e.target, "streamlit")
    ]


def imports_of_app_or_tests(edges: list[Edge]) -> list[Edge]:
    """Modules of tfviz that import the entry point or the tests."""
    return [
        e
        for e in edges
        if within(e.source, "tfviz") and (e.target == APP or within(e.target, "tests"))
    ]


# The library's packages (and its three top-level modules) from the bottom up: a module may import
# from its own layer or a lower one, never a higher one. docs/architecture.md draws the same order.
LAYERS = (
    ("tfviz.settings", "tfviz.words", "tfviz.refusal"),
    ("tfviz.core", "tfviz.messages"),
    ("tfviz.analysis", "tfviz.hf", "tfviz.plots"),
    ("tfviz.training",),
    ("tfviz.experiments",),
    ("tfviz.serve",),
    ("tfviz.lessons",),
    ("tfviz.cli", UI),
)


def layer_of(name: str) -> int | None:
    for index, packages in enumerate(LAYERS):
        if any(within(name, package) for package in packages):
            return index
    return None


def upward_imports(edges: list[Edge]) -> list[Edge]:
    """Imports from a library package into a package of a higher layer."""
    found = []
    for e in edges:
        source, target = layer_of(e.source), layer_of(e.target)
        if source is not None and target is not None and target > source:
            found.append(e)
    return found


def session_state_uses(root: Path = ROOT) -> list[str]:
    """Where code outside tfviz/ui/state.py reads or writes session_state (an attribute named
    session_state, or the name itself imported), as "module:line"."""
    found = []
    for name, path in module_files(root).items():
        if name == STATE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            attr = isinstance(node, ast.Attribute) and node.attr == "session_state"
            bare = isinstance(node, ast.Name) and node.id == "session_state"
            if attr or bare:
                found.append(f"{name}:{node.lineno}")
    return found


# ---- the checks -------------------------------------------------------------------------------


def test_no_import_cycle_among_tfviz_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_view_imports_another_view():
    crossing = cross_view_imports(import_graph())
    assert not crossing, "\n".join(map(str, crossing))


def test_only_the_ui_imports_streamlit():
    found = streamlit_outside_ui(import_graph())
    assert not found, "\n".join(map(str, found))


def test_every_library_module_is_in_a_layer():
    """A new package or top-level module must be placed in LAYERS (and the drawing) on purpose."""
    names = [n for n in module_files() if n not in (APP, "tfviz")]
    assert [n for n in names if layer_of(n) is None] == []


def test_the_library_packages_import_only_downwards():
    found = upward_imports(import_graph())
    assert not found, "\n".join(map(str, found))


def test_session_state_is_touched_only_in_tfviz_ui_state():
    found = session_state_uses()
    assert not found, found


def test_no_tfviz_module_imports_app_or_tests():
    found = imports_of_app_or_tests(import_graph())
    assert not found, "\n".join(map(str, found))


# ---- the checks can fail: each one on a small tree with the import it forbids -----------------


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"app.py": "", "tfviz/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_cycle_is_found_and_named(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "tfviz/a.py": "from tfviz import b\n",
            "tfviz/b.py": "def f():\n    from tfviz.c import x\n",  # inside a function
            "tfviz/c.py": "import tfviz.a\nx = 1\n",
        },
    )
    assert find_cycle(import_graph(root)) == ["tfviz.a", "tfviz.b", "tfviz.c", "tfviz.a"]


def test_a_view_importing_another_is_found_but_not_its_own_parts(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "tfviz/ui/__init__.py": "",
            "tfviz/ui/views/__init__.py": "",
            "tfviz/ui/views/a.py": "from tfviz.ui.views import b\n",
            "tfviz/ui/views/b/__init__.py": "from . import part\n",
            "tfviz/ui/views/b/part.py": "",
        },
    )
    crossing = cross_view_imports(import_graph(root))
    assert [(e.source, e.target) for e in crossing] == [("tfviz.ui.views.a", "tfviz.ui.views.b")]


def test_streamlit_in_the_library_is_found(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "tfviz/ui/__init__.py": "",
            "tfviz/ui/ok.py": "import streamlit as st\n",
            "tfviz/lib.py": "def f():\n    from streamlit.runtime import exists\n",
        },
    )
    assert [e.source for e in streamlit_outside_ui(import_graph(root))] == ["tfviz.lib"]


def test_session_state_outside_state_is_found(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "tfviz/ui/__init__.py": "",
            "tfviz/ui/state.py": "import streamlit as st\nst.session_state['a'] = 1\n",
            "tfviz/ui/view.py": "import streamlit as st\n\nst.session_state.pop('a')\n",
        },
    )
    assert session_state_uses(root) == ["tfviz.ui.view:3"]


def test_an_upward_import_is_found(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "tfviz/core/model.py": "from tfviz.training import train\n",
            "tfviz/training/train.py": "from tfviz.core import model\n",
        },
    )
    found = upward_imports(import_graph(root))
    assert [str(e) for e in found] == ["tfviz.core.model:1 imports tfviz.training.train"]


def test_the_library_importing_app_or_tests_is_found(tmp_path):
    root = write_tree(
        tmp_path,
        {"tfviz/x.py": "import app\n", "tfviz/y.py": "from tests.conftest import start_app\n"},
    )
    found = [(e.source, e.target) for e in imports_of_app_or_tests(import_graph(root))]
    assert found == [("tfviz.x", "app"), ("tfviz.y", "tests.conftest")]
