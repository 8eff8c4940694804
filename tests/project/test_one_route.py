"""One route from code to words (issue 45): one error type that carries a catalogue key and its
values (tfviz.refusal.Refusal: every other is its subclass), one function that words an error
for the page (tfviz.ui.i18n.why) and one table of metric names (tfviz.core.metrics.METRICS, its
names in the catalogue under "metric.<key>.name").

Read from the syntax tree of every module of tfviz/ (and app.py), then checked on the classes
themselves, so a second root, a second wording function or a second table fails here, naming
its file and line.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support import python_tree, tfviz_files
from tfviz.core.metrics import METRICS, NAMES
from tfviz.refusal import Refusal
from tfviz.words import LANGUAGES, catalogue

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "tfviz" / "ui"
WORDING = ("tfviz/ui/i18n.py", "why")  # the one function that words an error for the page

# What makes a class carry a catalogue key: a part of the catalogue (PREFIX) or a code (CODE) of
# its own, or instances that keep a code, a key, the values a sentence takes or a Message.
KEY_CLASS_ATTRIBUTES = {"PREFIX", "CODE"}
KEY_INSTANCE_ATTRIBUTES = {"code", "key", "values", "message"}
# What the words of an error are made from: read only by the one wording function (and the
# errors' own methods), never by a page that would word an error its own way.
ERROR_WORDS = {"code", "key", "values", "message", "slots", "waiting", "field", "index"}


@dataclass(frozen=True)
class Found:
    path: str  # relative to the root, e.g. "tfviz/messages.py"
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name}"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# ---- one root error type with a key -------------------------------------------------------------


def carries_a_key(node: ast.ClassDef) -> bool:
    """Whether a class, read from its source, carries a catalogue key (KEY_*_ATTRIBUTES)."""
    for item in node.body:
        targets = (
            item.targets
            if isinstance(item, ast.Assign)
            else [item.target]
            if isinstance(item, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id in KEY_CLASS_ATTRIBUTES for t in targets):
            return True
    for method in node.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        for sub in ast.walk(method):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.ctx, ast.Store)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
                and sub.attr in KEY_INSTANCE_ATTRIBUTES
            ):
                return True
    return False


def key_classes(root: Path = ROOT) -> list[Found]:
    """Every class of tfviz/ that carries a catalogue key (errors or not: checked on import)."""
    found = []
    for path in tfviz_files(root):
        for node in ast.walk(python_tree(path)):
            if isinstance(node, ast.ClassDef) and carries_a_key(node):
                found.append(Found(path.relative_to(root).as_posix(), node.lineno, node.name))
    return found


def class_of(found: Found, root: Path = ROOT) -> type:
    path = root / found.path
    name = module_name(path, root)
    if root == ROOT:
        module = importlib.import_module(name)
    else:  # a sample tree of a test: loaded from its file, under a name of its own
        name = f"one_route_sample.{name}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # while it runs (a dataclass looks its module up)
        try:
            spec.loader.exec_module(module)
        finally:
            del sys.modules[name]
    return getattr(module, found.name)


def roots(classes: list[type]) -> set[type]:
    """The root of each error type that carries a key: the first class of its ancestry that is
    itself one of them."""
    return {next(c for c in reversed(cls.__mro__) if c in classes) for cls in classes}


def key_errors(root: Path = ROOT) -> dict[Found, type]:
    """The error types (BaseException subclasses) among the classes that carry a key."""
    classes = {found: class_of(found, root) for found in key_classes(root)}
    return {f: c for f, c in classes.items() if issubclass(c, BaseException)}


def test_every_error_that_carries_a_catalogue_key_is_a_refusal():
    errors = key_errors()
    assert len(errors) >= 15, f"fewer error types than expected: is the scan broken? {errors}"
    strays = [str(f) for f, cls in errors.items() if not issubclass(cls, Refusal)]
    assert not strays, "carry a catalogue key but are no tfviz.refusal.Refusal:\n" + "\n".join(
        strays
    )
    assert roots(list(errors.values())) == {Refusal}  # one root error type with a key


def test_the_errors_that_were_roots_of_their_own_are_refusals_caught_as_before():
    from tfviz.core.tasks import InputError
    from tfviz.lessons import LessonInputError
    from tfviz.messages import Refused
    from tfviz.serve.jobs import Draining, JobEnded, QueueFull

    for cls in (InputError, Refused, LessonInputError):
        assert issubclass(cls, Refusal) and issubclass(cls, ValueError), cls
    assert issubclass(Draining, QueueFull) and issubclass(QueueFull, RuntimeError)
    assert all(issubclass(cls, Refusal) for cls in (QueueFull, JobEnded))


def test_a_second_root_is_found(tmp_path):
    package = tmp_path / "tfviz"
    package.mkdir()
    (package / "sample_one_route.py").write_text(
        "from tfviz.refusal import Refusal\n"
        "\n"
        "class Kept(Refusal):\n"
        '    PREFIX = "refusal.kept."\n'
        "\n"
        "class OwnWords(ValueError):\n"
        "    def __init__(self, code, **values):\n"
        "        super().__init__(code)\n"
        "        self.code, self.values = code, values\n"
        "\n"
        "class NoKey(ValueError):\n"
        "    pass\n",
        encoding="utf-8",
    )
    errors = key_errors(tmp_path)
    assert sorted(f.name for f in errors) == ["Kept", "OwnWords"]
    by_name = {found.name: cls for found, cls in errors.items()}
    assert roots(list(errors.values())) == {by_name["Kept"], by_name["OwnWords"]}  # two roots


# ---- one function that words an error -----------------------------------------------------------


def all_functions(tree: ast.Module):
    """Every function of a module with its node (methods and nested functions included)."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def called_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def error_names(function: ast.AST, error_classes: set[str]) -> set[str]:
    """Names that hold an error in a function: an except handler's, a parameter annotated with
    an error class, a name checked with isinstance against one."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.arg) and node.annotation is not None:
            if {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)} & (
                error_classes | {"Exception", "BaseException", "ValueError"}
            ):
                names.add(node.arg)
        elif isinstance(node, ast.Call) and called_name(node) == "isinstance":
            if len(node.args) == 2 and isinstance(node.args[0], ast.Name):
                checked = {
                    n.id if isinstance(n, ast.Name) else n.attr
                    for n in ast.walk(node.args[1])
                    if isinstance(n, (ast.Name, ast.Attribute))
                }
                if checked & error_classes:
                    names.add(node.args[0].id)
    return names


def page_modules(root: Path = ROOT) -> list[Path]:
    return [root / "app.py", *sorted((root / "tfviz" / "ui").rglob("*.py"))]


def wording_functions(root: Path, error_classes: set[str]) -> tuple[list[Found], list[Found]]:
    """(the functions of the pages that word a refusal through tfviz.refusal.worded, the places
    where a page reads an error's words itself: its code, values, message or numbers)."""
    wording, reading = [], []
    for path in page_modules(root):
        if not path.exists():
            continue
        rel = path.relative_to(root).as_posix()
        tree = python_tree(path)
        classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for function in all_functions(tree):
            if any(
                isinstance(n, ast.Call) and called_name(n) == "worded" for n in ast.walk(function)
            ):
                wording.append(Found(rel, function.lineno, function.name))
            if (rel, function.name) == WORDING:
                continue
            held = error_names(function, error_classes)
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Load)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in held
                    and node.attr in ERROR_WORDS
                    and node.value.id != "self"
                    and function.name not in classes  # a class's own method
                ):
                    reading.append(Found(rel, node.lineno, f"{function.name}: {ast.unparse(node)}"))
    return wording, reading


def error_class_names() -> set[str]:
    """The names of every error type with a key: each found, and each subclass of one."""
    seen, todo = set(), [*key_errors().values(), Refusal]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            todo += cls.__subclasses__()
    return {cls.__name__ for cls in seen}


def test_one_function_words_an_error_for_the_page():
    wording, reading = wording_functions(ROOT, error_class_names())
    assert [(f.path, f.name) for f in wording] == [WORDING], [str(f) for f in wording]
    assert not reading, "a page words an error its own way:\n" + "\n".join(map(str, reading))


def test_the_old_wording_functions_are_gone():
    """ui/jobs.refusal, ui/labels.refusal and the lessons' input_message were each a way to word
    an error; tfviz.ui.i18n.why is now the only one."""
    gone = {"refusal", "input_refusal", "input_message"}
    found = [
        Found(path.relative_to(ROOT).as_posix(), f.lineno, f.name)
        for path in page_modules()
        for f in all_functions(python_tree(path))
        if f.name in gone
    ]
    assert not found, [str(f) for f in found]


def test_a_second_wording_function_is_found(tmp_path):
    ui = tmp_path / "tfviz" / "ui"
    ui.mkdir(parents=True)
    (tmp_path / "app.py").write_text("")
    (ui / "i18n.py").write_text(
        "def why(reason, lang=None):\n    return worded(reason, lang, md_escape)\n"
    )
    (ui / "view.py").write_text(
        "def refusal(e: Exception) -> str:\n"
        "    if isinstance(e, QueueFull):\n"
        '        return t("jobs.queue_full", slots=e.slots, waiting=e.waiting)\n'
        "    return worded(e, current(), md_escape)\n"
        "\n"
        "def start():\n"
        "    try:\n"
        "        submit()\n"
        "    except Refused as e:\n"
        "        return job_text(e.message)\n"
    )
    wording, reading = wording_functions(tmp_path, {"QueueFull", "Refused"})
    assert [(f.path, f.name) for f in wording] == [WORDING, ("tfviz/ui/view.py", "refusal")]
    assert [(f.line, f.name) for f in reading] == [
        (3, "refusal: e.slots"),
        (3, "refusal: e.waiting"),
        (10, "start: e.message"),
    ]


# ---- one table of metric names ------------------------------------------------------------------


def metric_tables(root: Path = ROOT) -> list[Found]:
    """Dicts written in the code whose keys are metric keys (two or more, nothing else): a table
    of their names (or their names' catalogue keys) besides tfviz.core.metrics.METRICS."""
    found = []
    for path in [root / "app.py", *tfviz_files(root)]:
        if not path.exists():
            continue
        for node in ast.walk(python_tree(path)):
            if not isinstance(node, ast.Dict):
                continue
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if len(keys) >= 2 and len(keys) == len(node.keys) and set(keys) <= set(METRICS):
                found.append(Found(path.relative_to(root).as_posix(), node.lineno, str(keys)))
    return found


def metric_keys_written(root: Path = ROOT) -> list[Found]:
    """String literals (or an f-string's literal start) naming a catalogue key of a metric's name
    outside the one group: "sidebar.metric.mae", f"parts.metric.{key}"."""
    found = []
    for path in [root / "app.py", *tfviz_files(root)]:
        if not path.exists():
            continue
        for node in ast.walk(python_tree(path)):
            text = (
                node.value
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
                else node.values[0].value
                if isinstance(node, ast.JoinedStr)
                and node.values
                and isinstance(node.values[0], ast.Constant)
                else None
            )
            if text and ".metric." in text and not text.startswith(NAMES):
                found.append(Found(path.relative_to(root).as_posix(), node.lineno, text))
    return list(dict.fromkeys(found))  # an f-string's start is a literal of its own too


def test_metric_names_are_defined_once():
    tables = metric_tables()
    assert not tables, "a second table of metric names:\n" + "\n".join(map(str, tables))
    written = metric_keys_written()
    assert not written, "a metric named outside the one table:\n" + "\n".join(map(str, written))


def test_every_metric_is_named_once_in_every_language():
    for lang in LANGUAGES:
        words = catalogue(lang)
        for m in METRICS.values():
            assert m.name_key in words, (lang, m.name_key)
        # no other part of the catalogue names a metric
        stray = [
            k
            for k in words
            if any(k.endswith(f".metric.{key}") for key in METRICS) and not k.startswith(NAMES)
        ]
        assert not stray, (lang, stray)
        assert {k for k in words if k.startswith(NAMES)} <= {
            key for m in METRICS.values() for key in (m.name_key, m.short_key)
        }


def test_a_second_metric_table_is_found(tmp_path):
    package = tmp_path / "tfviz"
    package.mkdir()
    (tmp_path / "app.py").write_text("")
    (package / "view.py").write_text(
        'NAMES = {"token_accuracy": "analysis.metric.token_accuracy", "mae": "MAE"}\n'
        'KINDS = {"token": "token_accuracy", "classify": "accuracy"}\n'
        'what = t(f"parts.metric.{key}")\n'
    )
    assert [f.line for f in metric_tables(tmp_path)] == [1]
    assert [(f.line, f.name) for f in metric_keys_written(tmp_path)] == [
        (1, "analysis.metric.token_accuracy"),
        (3, "parts.metric."),
    ]
