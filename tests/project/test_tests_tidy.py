"""The tests themselves stay tidy (issue 45): a helper lives once (tests/support.py for plain
functions, tests/conftest.py for fixtures), no test reads a private attribute of tfviz, and no
test sleeps to let another thread or process get somewhere.

Read from the source with ast, nothing imported:
- a plain helper (a module-level function that is neither a test nor a fixture) defined in two
  test files with the same body is a copy; with the same name and another body, two helpers
  whose names do not tell them apart (SAME_NAME_NOT_YET, which may only shrink);
- `x._name` where x starts from a name imported from tfviz (a module, class or function:
  `hf.mlm._top`, `dissect.MeasureCache(m)._busy`) or from a name the file binds to what a call
  into tfviz returns (`task = get_task("sum")`, then `task._x`), or `from tfviz... import _name`:
  a private read (PRIVATE_ALLOWED says why each is left). Not seen: reads through a fixture, a
  parameter, a loop variable or an attribute chain of another object (`tok = opened["bert"]
  .tokenizer`, `pool` a fixture returning tfviz.core.buffers): grep for them;
- time.sleep outside any while/for loop: a fixed wait before an assertion, not a poll of a
  condition with a deadline (SLEEP_ALLOWED says why each is left).
Every allow-list entry must still match something: a fixed one fails until it is taken out.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# Helpers with one name and different bodies in several files, still to be renamed or merged.
SAME_NAME_NOT_YET: set[str] = set()

# "file: expression" -> why the private read is left.
PRIVATE_ALLOWED: dict[str, str] = {
    "test_heap.py: heap._modules_seen": "the count freeze_new_imports keeps between calls, reset "
    "and read back; no public view of it yet",
    "test_language_atlas.py: la._prepare": "one arm's preparation, timed on its own; the public "
    "entry runs a whole arm",
    "test_dissect.py: cache._busy": "the event an asker waits on while a key is measured, wrapped "
    "to know the asker waits: nothing public says a thread is blocked on it",
}

# "file: function" -> why the fixed sleep is left.
SLEEP_ALLOWED: dict[str, str] = {
    "test_drain.py: test_sigterm_lets_a_running_training_finish_then_exits_0": "the server is "
    "another process: nothing public says its worker thread has begun the job before SIGTERM",
    "test_drain.py: test_sigterm_cuts_off_a_training_longer_than_the_grace_and_still_exits_0": "as "
    "above: SIGTERM must land while the job runs in the server process",
    "test_hostile_folders.py: "
    "test_a_real_server_serves_pages_and_stays_healthy_beside_the_corpus": (
        "a window in which the server must NOT fail: an absence has no condition to wait on"
    ),
    "test_offline_server.py: test_a_started_server_makes_no_outbound_connection": "a window in "
    "which the server must NOT connect out: an absence has no condition to wait on",
}


def all_test_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def source_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def is_fixture(node: ast.FunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in node.decorator_list)


def plain_helpers(tree: ast.Module) -> Iterator[ast.FunctionDef]:
    for node in tree.body:
        if (
            isinstance(node, ast.FunctionDef)
            and not node.name.startswith("test_")
            and not node.name.startswith("pytest_")
            and not is_fixture(node)
        ):
            yield node


def body_text(node: ast.FunctionDef) -> str:
    """The function without its docstring and decorators: what it does."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.unparse(ast.Module(body=list(body), type_ignores=[])) + ast.unparse(node.args)


def helpers_by_name() -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for path in all_test_files():
        for node in plain_helpers(source_tree(path)):
            found[node.name][path.name] = body_text(node)
    return found


def test_no_helper_is_copied_into_two_all_test_files():
    copies = []
    for name, files in helpers_by_name().items():
        by_body: dict[str, list[str]] = defaultdict(list)
        for file, body in files.items():
            by_body[body].append(file)
        copies += [f"{name}: {sorted(same)}" for same in by_body.values() if len(same) > 1]
    assert not copies, f"move these into tests/support.py: {copies}"


def test_no_two_test_files_define_different_helpers_under_one_name():
    shared = {name for name, files in helpers_by_name().items() if len(files) > 1}
    assert not shared - SAME_NAME_NOT_YET, f"rename or merge: {sorted(shared - SAME_NAME_NOT_YET)}"
    assert not SAME_NAME_NOT_YET - shared, f"fixed, take out: {SAME_NAME_NOT_YET - shared}"


def tfviz_names(tree: ast.Module) -> set[str]:
    """The names a file binds to something of tfviz (import tfviz.x as y, from tfviz import y)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tfviz":
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tfviz":
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def root_name(node: ast.expr) -> str | None:
    """The name an expression starts from: dissect.MeasureCache(m).x -> "dissect"."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def tfviz_made(tree: ast.Module, names: set[str]) -> set[str]:
    """The names a file binds to what a call into tfviz returns (cache = dissect.MeasureCache(m),
    task = get_task("sum")): tfviz objects whose private attributes are tfviz's too."""
    made = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and root_name(node.value) in names
        ):
            made.add(node.targets[0].id)
    return made


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reads(path: Path) -> Iterator[str]:
    tree = source_tree(path)
    names = tfviz_names(tree)
    names |= tfviz_made(tree, names)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tfviz":
            for alias in node.names:
                if private(alias.name):
                    yield f"{path.name}: from {node.module} import {alias.name}"
        elif (
            isinstance(node, ast.Attribute)
            and private(node.attr)
            and root_name(node.value) in names
        ):
            yield f"{path.name}: {ast.unparse(node)}"


def test_no_test_reads_a_private_attribute_of_tfviz():
    found = {read for path in all_test_files() for read in private_reads(path)}
    assert not found - PRIVATE_ALLOWED.keys(), f"read through a public interface: {found}"
    stale = PRIVATE_ALLOWED.keys() - found
    assert not stale, f"fixed, take out of PRIVATE_ALLOWED: {stale}"


def is_sleep(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (
        isinstance(f, ast.Attribute) and f.attr == "sleep" and ast.unparse(f.value) == "time"
    ) or (isinstance(f, ast.Name) and f.id == "sleep")


def fixed_sleeps(path: Path) -> Iterator[str]:
    """file: function of every time.sleep that is not inside a while or for loop."""

    def visit(node: ast.AST, function: str, in_loop: bool) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from visit(child, f"{function}.{child.name}".lstrip("."), False)
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, f"{function}.{child.name}".lstrip("."), False)
            else:
                if is_sleep(child) and not in_loop:
                    yield f"{path.name}: {function or '<module>'}"
                loop = isinstance(child, (ast.While, ast.For, ast.AsyncFor))
                yield from visit(child, function, in_loop or loop)

    yield from visit(source_tree(path), "", False)


def test_no_test_sleeps_to_wait_for_another_thread():
    found = {sleep for path in all_test_files() for sleep in fixed_sleeps(path)}
    assert not found - SLEEP_ALLOWED.keys(), f"wait on the condition instead: {found}"
    stale = SLEEP_ALLOWED.keys() - found
    assert not stale, f"fixed, take out of SLEEP_ALLOWED: {stale}"
