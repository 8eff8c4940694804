"""README.md's "Layout" block and docs/architecture.md name the tree as it is: every module of
tfviz/ is in the layout, every path the layout names exists, and every package the architecture
drawing lists exists and is a package of tfviz/. A module added or removed without its line fails
here.

The layout block is read by indentation: an entry is a line indented less than DESC_COLUMN whose
first word ends in "/" (a folder) or names a file; a folder's entries are indented two more
columns; any other line continues the description above it. Entries at the left margin are paths
from the repository's root. Packages' __init__.py files are not listed: the folder's own line
describes the package.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESC_COLUMN = 10  # a line indented this far or more continues a description


def layout_block(text: str) -> list[str]:
    """The lines of the first code block under README.md's "## Layout" heading."""
    after = text[text.index("\n## Layout\n") :]
    start = after.index("```\n") + 4
    return after[start : after.index("\n```", start)].splitlines()


def layout_paths(lines: list[str]) -> list[str]:
    """Every path the layout names, relative to the root: folders end in "/"."""
    stack: list[tuple[int, str]] = []  # (indent, folder path)
    paths = []
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        if not words or indent >= DESC_COLUMN:
            continue
        name = words[0]
        assert name.endswith("/") or "." in name, f"not a path at indent {indent}: {line!r}"
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if indent:
            assert stack, f"an indented entry under no folder: {line!r}"
            assert indent == stack[-1][0] + 2, f"indent two more than its folder: {line!r}"
        path = (stack[-1][1] if stack else "") + name
        paths.append(path)
        if name.endswith("/"):
            stack.append((indent, path))
    return paths


def readme_paths() -> list[str]:
    return layout_paths(layout_block((ROOT / "README.md").read_text(encoding="utf-8")))


def library_modules() -> set[str]:
    """Every module file of tfviz/ but the packages' __init__.py, and every package folder."""
    found = set()
    for path in (ROOT / "tfviz").rglob("*.py"):
        rel = path.relative_to(ROOT)
        if path.name == "__init__.py":
            if rel.parent != Path("tfviz"):
                found.add(rel.parent.as_posix() + "/")
        else:
            found.add(rel.as_posix())
    return found


def test_every_module_of_tfviz_is_in_the_readme_layout():
    named = set(readme_paths())
    assert sorted(library_modules() - named) == []


def test_every_path_the_readme_layout_names_exists():
    missing = [p for p in readme_paths() if not (ROOT / p).exists()]
    assert missing == []


def test_the_readme_layout_names_each_path_once():
    paths = readme_paths()
    assert sorted({p for p in paths if paths.count(p) > 1}) == []


def test_the_readme_layout_names_bench_as_a_folder_only():
    # bench/ changes file by file; its README holds the figures and names its scripts.
    assert [p for p in readme_paths() if p.startswith("bench/") and p != "bench/"] == []


# ---- docs/architecture.md ---------------------------------------------------------------------

# The library's packages as the drawing names them ("cli/", "core/", ...) and its top-level
# modules ("settings.py", ...), read from the lines of the `tfviz/*  the library` block.
ARCH_NAME = re.compile(r"(?<![\w/.])([a-z_]+/|[a-z_]+\.py)(?=[\s,;:)]|$)")


def architecture_names() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawing = text[text.index("```\n") + 4 :]
    drawing = drawing[: drawing.index("\n```")]
    library = drawing[drawing.index("tfviz/*") :]
    names = set()
    for line in library.splitlines():
        # The name columns only: a package or module is written before its description.
        for name in ARCH_NAME.findall(line[:70]):
            names.add(name)
    return names


def test_every_package_the_architecture_names_exists():
    names = architecture_names()
    assert names, "no package found in the drawing"
    missing = [n for n in sorted(names) if not (ROOT / "tfviz" / n).exists()]
    assert missing == []


def test_the_architecture_drawing_names_every_package_and_top_level_module():
    names = architecture_names()
    tree = {p.name + "/" for p in (ROOT / "tfviz").iterdir() if (p / "__init__.py").exists()}
    tree |= {p.name for p in (ROOT / "tfviz").glob("*.py") if p.name != "__init__.py"}
    tree -= {"ui/"}  # drawn above the library, as tfviz/ui/
    assert sorted(tree - names) == []


def test_the_architecture_says_which_init_files_import_something():
    """The sentence on the packages' __init__ files matches what they import."""
    import ast

    importing, empty = [], []
    for init in sorted((ROOT / "tfviz").glob("*/__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        imports = any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body)
        (importing if imports else empty).append(init.parent.name + "/")
    text = " ".join((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split())
    text = text.replace(" | ", " ")
    said = re.search(r"the __init__ files of ([^.]*?) import nothing", text)
    assert said, "docs/architecture.md no longer says which __init__ files import nothing"
    assert sorted(re.findall(r"[a-z_]+/", said.group(1))) == sorted(empty)
    reexport = re.search(r"those of ([^.]*?) re-export", text)
    assert reexport, "docs/architecture.md no longer says which __init__ files re-export"
    assert sorted(re.findall(r"[a-z_]+/", reexport.group(1))) == sorted(importing)


def test_the_layout_reader_finds_a_missing_and_an_unlisted_module():
    lines = [
        "app.py        the entry point",
        "tfviz/        the library",
        "  core/         the model",
        "    model.py    the encoder",
        "                a description that goes on",
        "    gone.py     a module that is not there",
    ]
    assert layout_paths(lines) == [
        "app.py",
        "tfviz/",
        "tfviz/core/",
        "tfviz/core/model.py",
        "tfviz/core/gone.py",
    ]
