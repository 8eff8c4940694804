"""bench/ as scripts on one harness: no script imports another script (so no import cycle), one
percentile, one server launcher; and the percentile's definition (nearest rank).

Read from the source with ast, nothing imported but bench/harness.py."""

from __future__ import annotations

import ast
import math
from pathlib import Path

from bench.harness import median, percentile
from tests.support import called

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
# The modules the bench scripts share; every other bench/*.py is a script (or floor_app.py, the
# bare page the latency scripts serve), which nothing in bench/ imports.
HARNESS = {"harness", "pages", "session", "decoder_folders", "encoder_folders"}
LAUNCHER = "harness"  # the one module that runs `streamlit run`
SUBPROCESS_CALLS = {"Popen", "run", "call", "check_call", "check_output"}
PERCENTILE_CALLS = {"percentile", "nanpercentile", "quantile", "nanquantile", "quantiles"}


def bench_trees() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(BENCH.glob("*.py"))}


def bench_imports(tree: ast.Module) -> set[str]:
    """The bench modules a module imports, anywhere in it (a function's lazy import too)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "bench" and len(parts) > 1:
                    found.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "bench/ imports absolutely (python -m bench.NAME)"
            parts = (node.module or "").split(".")
            if parts[0] != "bench":
                continue
            if len(parts) > 1:
                found.add(parts[1])
            else:  # from bench import x, y
                found.update(alias.name for alias in node.names)
    return found


def functions_named(tree: ast.Module, name: str) -> list[ast.FunctionDef]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
    ]


def test_the_harness_modules_are_there():
    assert HARNESS <= set(bench_trees()), HARNESS - set(bench_trees())


def test_no_bench_script_imports_another_script_and_there_is_no_import_cycle():
    trees = bench_trees()
    graph = {name: bench_imports(tree) for name, tree in trees.items()}
    for name, imported in graph.items():
        assert imported <= set(trees), f"bench/{name}.py imports missing modules {imported}"
        scripts = imported - HARNESS
        assert not scripts, f"bench/{name}.py imports the script(s) {sorted(scripts)}"
    # What is left could only loop among the harness modules: none may.
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for other in sorted(graph[name]):
            assert state.get(other) != "open", f"import cycle: {' -> '.join(path + [other])}"
            if other not in state:
                visit(other, path + [other])
        state[name] = "done"

    for name in graph:
        if name not in state:
            visit(name, [name])


def test_one_percentile_in_bench_and_at_most_one_in_tfviz():
    trees = bench_trees()
    where = [name for name, tree in trees.items() if functions_named(tree, "percentile")]
    assert where == ["harness"] and len(functions_named(trees["harness"], "percentile")) == 1, where
    medians = [name for name, tree in trees.items() if functions_named(tree, "median")]
    assert medians == ["harness"], medians
    # No other definition by the back door: numpy's or statistics' percentiles and quantiles.
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                assert node.func.attr not in PERCENTILE_CALLS, f"bench/{name}.py: {node.func.attr}"
    in_tfviz = [
        p
        for p in sorted((ROOT / "tfviz").rglob("*.py"))
        if functions_named(ast.parse(p.read_text(encoding="utf-8")), "percentile")
    ]
    assert len(in_tfviz) <= 1, in_tfviz


def test_one_server_launcher():
    """Only bench/harness.py runs `streamlit run` (Server, which start_server is a form of)."""
    trees = bench_trees()
    for name, tree in trees.items():
        launches = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and called(n) == "streamlit_command"
        ]
        if name == LAUNCHER:
            assert len(functions_named(tree, "streamlit_command")) == 1
            assert len(launches) == 1, "one call of streamlit_command: Server's"
            continue
        assert not functions_named(tree, "streamlit_command"), f"bench/{name}.py"
        assert not launches, f"bench/{name}.py builds a streamlit command"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and called(node) in SUBPROCESS_CALLS:
                words = {
                    c.value
                    for arg in [*node.args, *(k.value for k in node.keywords)]
                    for c in ast.walk(arg)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                }
                assert not any("streamlit" in w for w in words), f"bench/{name}.py starts one"


def test_percentile_is_the_nearest_rank():
    values = [40, 15, 50, 35, 20]  # unsorted: the order does not matter
    assert [percentile(values, q) for q in (5, 30, 40, 50, 95, 100)] == [15, 20, 20, 35, 50, 50]
    assert percentile(list(range(1, 21)), 95) == 19  # the 19th of 20
    assert percentile(list(range(1, 16)), 95) == 15  # of 15, the largest
    assert percentile([7.0], 95) == 7.0 and percentile([1, 2], 0) == 1
    assert math.isnan(percentile([], 95))
    assert median([3, 1, 2]) == 2 and median([4, 1, 3, 2]) == 2.5 and math.isnan(median([]))
