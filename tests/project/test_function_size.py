"""No function in tfviz/ is longer than LIMIT lines (issue 45): a function that long does several
things, and each should be a helper whose name says what it does.

A function's length runs from its `def` line to its last line, decorators not counted (ast's
end_lineno - lineno + 1); methods and nested functions are counted on their own, and a nested
function's lines count in the function around it too. Read from the source, nothing imported.

NOT_YET lists the functions still too long while they are being split; it may only shrink: an
entry that is no longer too long (or no longer exists) fails the test until it is taken out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80  # lines, def to last line

# "path:qualified name" of each function still over LIMIT, to be split (then removed from here).
NOT_YET: set[str] = set()

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def function_lengths(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int, int]]:
    """(qualified name, def line, length in lines) of every function in tree, nested ones and
    methods included: Class.method, outer.inner."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, FUNCTIONS):
            name = prefix + node.name
            yield name, node.lineno, node.end_lineno - node.lineno + 1
            yield from function_lengths(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from function_lengths(node, prefix + node.name + ".")
        else:  # functions defined under an if, a try, a with...
            yield from function_lengths(node, prefix)


def too_long(root: Path = ROOT) -> dict[str, str]:
    """ "path:name" -> where and how long, for every function under tfviz/ over LIMIT lines."""
    found = {}
    for path in sorted((root / "tfviz").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        for name, line, length in function_lengths(tree):
            if length > LIMIT:
                found[f"{rel}:{name}"] = f"{rel}:{line} {name}: {length} lines"
    return found


def test_no_function_in_tfviz_is_longer_than_the_limit():
    new = sorted(where for key, where in too_long().items() if key not in NOT_YET)
    why = f"functions over {LIMIT} lines (split them into named helpers):\n"
    assert not new, why + "\n".join(new)


def test_not_yet_lists_only_functions_still_too_long():
    done = sorted(NOT_YET - set(too_long()))
    why = "no longer over the limit (or gone): take them out of NOT_YET:\n"
    assert not done, why + "\n".join(done)


def test_the_count_sees_methods_nested_functions_and_decorators_apart():
    source = (
        "@decorator\n"
        "def outer():\n"  # line 2
        "    def inner():\n"
        "        pass\n"
        "    return inner\n"
        "class C:\n"
        "    if True:\n"
        "        def method(self):\n"  # line 8
        "            return 1\n"
    )
    found = {name: (line, length) for name, line, length in function_lengths(ast.parse(source))}
    assert found == {"outer": (2, 4), "outer.inner": (3, 2), "C.method": (8, 2)}
