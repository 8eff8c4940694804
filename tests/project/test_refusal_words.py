"""Why a model folder, a zip, a checkpoint or a timeline is refused is said by the catalogue, in
every language: the library raises a code and values (tfviz.refusal), never a sentence.

Read from the syntax tree of the modules that refuse files: every exception they make is given
a code (a literal like "not_object", or a choice of literals), and that code's catalogue key
exists in English and Chinese with exactly the placeholders the call fills. A builtin error
(ValueError, ...) with English words is allowed only where INTERNAL names it: a caller's misuse
of the API, which no file or typing of a student reaches.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import called
from tfviz import hf
from tfviz.core import config
from tfviz.core.config import ConfigValueError
from tfviz.hf import pretrained
from tfviz.messages import PREFIX as MESSAGE_PREFIX
from tfviz.refusal import MAX_TEXT, MAX_VALUE, Refusal, shown, worded
from tfviz.serve import tally
from tfviz.serve.tally import TallyRefusal
from tfviz.training import checkpoint, timeline
from tfviz.training.checkpoint import CheckpointError
from tfviz.words import catalogue, placeholders

ROOT = Path(__file__).resolve().parents[2]
# Found through the modules, so a module moved to another package is still read.
SOURCES = sorted(
    {*Path(hf.__file__).parent.glob("*.py")}
    | {Path(m.__file__) for m in (checkpoint, config, pretrained, timeline, tally)}
)
CODE = re.compile(r"[a-z][a-z0-9_]*")
HAN = re.compile(r"[\u4e00-\u9fff]")
BUILTIN = {"ValueError", "TypeError", "IndexError", "KeyError", "RuntimeError"}
# (module, function) -> why its builtin errors may stay English: nothing a student brings or
# types reaches them (the app checks first), only a program calling the function wrongly.
INTERNAL = {
    ("tokenizer", "__init__"): "max_pieces is the code's own setting",
    ("tokenizer", "batch"): "the app validates each text first (SentenceTask.validate)",
    ("pretrained", "_check_sentence_model"): "the app passes only headless encoders",
    ("pretrained", "drift_from_traces"): "both traces come from one sequence",
    ("pretrained", "trace_embedding"): "the app pools only a sentence model's trace",
    ("pretrained", "encode_batch"): "the app always passes a text",
    ("pretrained", "check_config"): "a sentence task is never in a checkpoint's metadata",
    ("timeline", "__post_init__"): "the training code's own recorder settings",
    ("timeline", "_check_index"): "the slider offers only the kept steps",
    ("timeline", "scores"): "a timeline is shown only once it holds a step",
    ("causal_lm", "next_tokens"): "the app passes one sequence's logits",
    ("causal_lm", "_check"): "the app continues only a decoder, from its typed text",
    ("causal_lm", "check_config"): "the app gives a next-token task only to a decoder",
}
# Whose catalogue part a refusal's code is looked up in, by the name called.
PREFIXES = {
    "CheckpointError": CheckpointError.PREFIX,
    "ConfigValueError": ConfigValueError.PREFIX,
    "InputError": "input.",
    "TallyRefusal": TallyRefusal.PREFIX,
    "say": MESSAGE_PREFIX,
}
REFUSALS = {  # every refusal class these modules raise, and the names that stand for one
    *(name for name in hf.__all__ if name.endswith("Error")),
    "CheckpointError", "ConfigValueError", "InputError", "TallyRefusal", "error", "kind",
}  # fmt: skip


def codes(node: ast.AST, tables: dict[str, list[str]] | None = None) -> list[str] | None:
    """The codes an argument can be: a literal code, each branch of a conditional, or any value
    of a module's table of codes looked up (TABLE[...]); None for anything else (a sentence, an
    f-string, a computed text)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if CODE.fullmatch(node.value) else None
    if isinstance(node, ast.IfExp):
        body, orelse = codes(node.body, tables), codes(node.orelse, tables)
        return None if body is None or orelse is None else body + orelse
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return (tables or {}).get(node.value.id)
    return None


def code_tables(tree: ast.Module) -> dict[str, list[str]]:
    """A module's top-level dicts whose values are all codes: name -> those codes."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            values = [codes(v) for v in node.value.values]
            if values and all(v is not None for v in values):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = [c for v in values for c in v]
    return found


def nodes_by_function(tree: ast.Module):
    """(function name, node) for every node, by the innermost function holding it."""
    found = []

    def walk(node, where):
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            )
            found.append((inner, child))
            walk(child, inner)

    walk(tree, "")
    return found


def refusal_calls(path: Path, root: Path = ROOT):
    """(where, name, call, codes) of each refusal made in a file, and the English found: each
    raise or refusal call whose message is not a code, and each builtin error raised outside
    INTERNAL."""
    rel = path.relative_to(root).as_posix()
    made, english = [], []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tables = code_tables(tree)
    for function, node in nodes_by_function(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            name = called(node.exc)
            if name in BUILTIN:
                if (path.stem, function) not in INTERNAL:
                    english.append(f"{rel}:{node.lineno} raises {name} in {function}()")
                continue
            # refused_config (tfviz.hf.shards) returns a refusal made with a literal code.
            if name not in REFUSALS and name not in ("Refused", "say", "refused_config"):
                english.append(f"{rel}:{node.lineno} raises {name or 'a computed class'}")
        if not isinstance(node, ast.Call):
            continue
        name = called(node)
        if name not in REFUSALS and name != "say":
            continue
        first = node.args[0] if node.args else None
        found = codes(first, tables) if first is not None else None
        if found is None:
            text = ast.unparse(first) if first is not None else "nothing"
            english.append(f"{rel}:{node.lineno} {name}({text[:60]}): not a code")
            continue
        made.append((f"{rel}:{node.lineno}", name, node, found))
    return made, english


def test_the_modules_that_refuse_files_raise_codes_not_sentences():
    found = [line for path in SOURCES for line in refusal_calls(path)[1]]
    assert not found, "\n".join(found)


def test_the_check_finds_a_sentence_where_there_is_one(tmp_path):
    source = tmp_path / "tfviz" / "sample.py"
    source.parent.mkdir()
    source.write_text(
        "def f(e, name):\n"
        '    raise ConfigError("not_object", file="config.json")\n'  # a code: fine
        '    raise ConfigError("config.json is not a JSON object")\n'
        '    raise WeightsError(f"{name} holds NaN")\n'
        '    raise CheckpointError("tensor " + name)\n'
        "    raise CheckpointError(str(e))\n"
        '    raise ValueError("the model name is empty")\n'  # a builtin outside INTERNAL
        '    return ZipRefusedError("entry_dotdot" if e else "entry absolute", entry=name)\n'
    )
    made, english = refusal_calls(source, tmp_path)
    assert [line.split(" ")[0] for line in english] == [
        "tfviz/sample.py:3", "tfviz/sample.py:4", "tfviz/sample.py:5", "tfviz/sample.py:6",
        "tfviz/sample.py:7", "tfviz/sample.py:8",
    ], english  # fmt: skip
    assert [m[3] for m in made] == [["not_object"]]


def test_every_internal_exception_names_a_function_that_raises_a_builtin():
    raising = set()
    for path in SOURCES:
        for function, node in nodes_by_function(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                if called(node.exc) in BUILTIN:
                    raising.add((path.stem, function))
    assert set(INTERNAL) <= raising, set(INTERNAL) - raising  # none is stale


def prefix_of(name: str) -> str:
    return PREFIXES.get(name, hf.PretrainedError.PREFIX)  # every hf error shares one part


def test_every_code_has_its_words_in_both_languages_with_the_values_it_is_given():
    en, zh = catalogue("en"), catalogue("zh")
    problems, keys = [], set()
    for path in SOURCES:
        for where, name, call, found in refusal_calls(path)[0]:
            given = {k.arg for k in call.keywords if k.arg is not None}
            more = any(k.arg is None for k in call.keywords)  # **values: some filled there
            for code in found:
                key = prefix_of(name) + code
                keys.add(key)
                if key not in en or key not in zh:
                    problems.append(f"{where}: {key} is not in both catalogues")
                    continue
                wanted = placeholders(en[key])
                if placeholders(zh[key]) != wanted:
                    problems.append(f"{where}: {key}: zh fills {placeholders(zh[key])}")
                if given != wanted and not (more and given <= wanted):
                    problems.append(f"{where}: {key} takes {sorted(wanted)}, given {sorted(given)}")
    assert not problems, "\n".join(problems)
    assert len(keys) > 100, "fewer refusals than expected: is the scan broken?"
    # and no refusal key is left over, unused (the catalogue would drift from the code)
    parts = (hf.PretrainedError.PREFIX, CheckpointError.PREFIX, ConfigValueError.PREFIX)
    unused = {k for k in en if k.startswith(parts)} - keys
    assert not unused, sorted(unused)


def test_the_sentences_are_written_once_in_the_catalogue():
    """No module of the library spells a refusal's English (a sentence of its own: its longest
    stretch between placeholders, 32 characters or more)."""
    parts = (hf.PretrainedError.PREFIX, CheckpointError.PREFIX, ConfigValueError.PREFIX)
    sentences = {k: v for k, v in catalogue("en").items() if k.startswith(parts)}
    found = []
    for path in sorted((ROOT / "tfviz").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for key, text in sentences.items():
            fixed = max(re.split(r"\{[^}]*\}", text), key=len)
            if len(fixed) >= 32 and fixed in source:
                found.append(f"{path.relative_to(ROOT)} spells {key}")
    assert not found, "\n".join(found)


def test_a_refusal_is_english_for_logs_and_chinese_for_a_chinese_page():
    error = hf.ConfigError("not_object", file="config.json")
    assert str(error) == "config.json is not a JSON object"
    assert error.code == "not_object" and error.values == {"file": "config.json"}
    zh = error.text("zh")
    assert HAN.search(zh) and "config.json" in zh and zh != str(error)
    assert worded(error, "zh") == zh and worded(OSError("disk"), "zh") == "disk"


def test_values_from_a_hostile_folder_are_made_encodable_and_short():
    error = hf.UnsafeFileError("file_name_not_utf8", file="bad-\udcff-" + "x" * 5000)
    for text in (str(error), error.text("zh")):
        assert text == shown(text) and "\\xff" in text, text  # a page can encode it
        assert len(text) <= MAX_TEXT
    assert len(error.values["file"]) <= MAX_VALUE


def test_a_nested_refusal_is_worded_in_its_parents_language():
    inner = hf.ZipRefusedError("unpacks_past_header", entry="'m/w.bin'")
    outer = hf.ZipRefusedError("cannot_unpack", entry="'m/w.bin'", why=inner)
    assert "(a zip bomb?)" in str(outer)
    assert inner.text("zh") in outer.text("zh") and "zip bomb" not in outer.text("zh")


def test_a_refusal_survives_pickling_with_its_code_and_values():
    import pickle

    error = CheckpointError("too_large", size=21.5, limit=20.0)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is CheckpointError and copy.code == "too_large"
    assert str(copy) == str(error) == "file is 21.5 MB; the limit is 20.0 MB"


@pytest.mark.parametrize("cls", [hf.PretrainedError, CheckpointError])
def test_a_refusal_of_each_kind_is_still_caught_as_before(cls):
    error = cls("no_file", **({"file": "x"} if cls is hf.PretrainedError else {"path": "x"}))
    assert isinstance(error, Refusal)
    assert isinstance(error, RuntimeError if cls is hf.PretrainedError else ValueError)


# ---- a library's own reason (tfviz.refusal.cause), worded in the page's language ----------------

# Latin words a Chinese reason may keep: names of formats, written the same in every language.
KEPT_LATIN = {"JSON", "UTF", "safetensors", "zip"}  # `JSON` and `UTF-8` in backticks, as code
LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def raised(make) -> BaseException:
    try:
        make()
    except BaseException as e:  # noqa: BLE001  (each kind of library error is the point)
        return e
    raise AssertionError(f"{make} raised nothing")


def library_failures(tmp: Path) -> dict[str, BaseException]:
    """A failure of each kind refusal.cause words, by the code it should get: made for real by
    the library where this machine can make it, else built as the library builds it."""
    import errno
    import io
    import json
    import os
    import zipfile

    from safetensors import SafetensorError
    from safetensors.torch import load, save

    good = save({"a": checkpoint.torch.zeros(4)})
    header = int.from_bytes(good[:8], "little")
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("a.txt", "hello world")
    crc = bytearray(zipped.getvalue())
    crc[crc.index(b"hello")] ^= 1
    directory = bytearray(zipped.getvalue())
    directory[directory.index(b"PK\x01\x02") + 2] = 9
    (tmp / "file").write_text("x")
    (tmp / "loop").symlink_to(tmp / "loop")
    failures = {
        "json_value": raised(lambda: json.loads("[1,")),
        "json_comma": raised(lambda: json.loads("[1 2]")),
        "json_colon": raised(lambda: json.loads('{"a" 1}')),
        "json_name": raised(lambda: json.loads("{a: 1}")),
        "json_extra": raised(lambda: json.loads("[1] x")),
        "json_unterminated": raised(lambda: json.loads('"abc')),
        "json_control": raised(lambda: json.loads('"a\x01"')),
        "json_escape": raised(lambda: json.loads('"\\q"')),
        "too_deep": raised(lambda: json.loads("[" * 200_000)),
        "not_utf8": raised(lambda: b"ab\xff".decode("utf-8")),
        # zipfile's reader on a member shorter than its header says
        "truncated": EOFError(),
        "missing_key": raised(lambda: {}["hidden_size"]),
        "os_missing": raised(lambda: open(tmp / "absent")),
        "os_is_folder": raised(lambda: open(tmp)),
        "os_not_folder": raised(lambda: open(tmp / "file" / "x")),
        "os_name_too_long": raised(lambda: open(tmp / ("x" * 300))),
        "os_link_loop": raised(lambda: open(tmp / "loop")),
        "os_exists": raised(lambda: os.mkdir(tmp)),
        "safetensors_header_small": raised(lambda: load(b"")),
        "safetensors_header_large": raised(lambda: load(b"\xff" * 16)),
        "safetensors_header_json_at": raised(lambda: load((8).to_bytes(8, "little") + b"notjson!")),
        "safetensors_header_json": SafetensorError(
            "Error while deserializing: invalid JSON in header"  # with no place named
        ),
        "safetensors_incomplete": raised(lambda: load(good[:-4])),
        "safetensors_offset": raised(
            lambda: load(good.replace(b'"data_offsets":[0,16]', b'"data_offsets":[4,16]'))
        ),
        "zip_not_zip": raised(lambda: zipfile.ZipFile(io.BytesIO(b"not a zip"))),
        "zip_crc": raised(lambda: zipfile.ZipFile(io.BytesIO(bytes(crc))).read("a.txt")),
        "zip_multi_disk": zipfile.BadZipFile("zipfiles that span multiple disks are not supported"),
        "zip_damaged": raised(lambda: zipfile.ZipFile(io.BytesIO(bytes(directory)))),
    }
    assert header > 0
    # What a root user on this machine cannot be made to meet: built as the system reports them.
    for code, number in [
        ("os_permission", errno.EACCES), ("os_disk_full", errno.ENOSPC),
        ("os_read_only", errno.EROFS), ("os_io", errno.EIO), ("os_too_many_open", errno.EMFILE),
    ]:  # fmt: skip
        failures[code] = OSError(number, os.strerror(number), str(tmp / "secret"))
    return failures


def test_every_library_failure_is_worded_by_the_catalogue_in_both_languages(tmp_path):
    from tfviz.refusal import Cause, cause

    failures = library_failures(tmp_path)
    en, zh = catalogue("en"), catalogue("zh")
    made = {k.removeprefix(Cause.PREFIX) for k in en if k.startswith(Cause.PREFIX)}
    assert made == set(failures), "a code with no failure that makes it, or the reverse"
    for code, error in failures.items():
        reason = cause(error)
        assert isinstance(reason, Cause) and reason.code == code, (code, error, reason)
        assert placeholders(en[reason.key]) == placeholders(zh[reason.key]) == set(reason.values)
        chinese = reason.text("zh")
        assert HAN.search(chinese), chinese
        # the library's English is gone: no Latin word but a format's name or a value
        values = " ".join(map(str, reason.values.values()))
        stray = set(LATIN_WORD.findall(chinese)) - KEPT_LATIN - set(LATIN_WORD.findall(values))
        assert not stray, (code, chinese, stray)
        assert str(tmp_path) not in chinese + str(reason)  # a server path is never echoed


def test_an_unknown_library_failure_keeps_its_own_words_without_a_path(tmp_path):
    from tfviz.refusal import cause

    assert cause(RuntimeError("something new")) == "something new"
    odd = OSError(123456, "Strange failure", str(tmp_path / "secret"))
    assert cause(odd) == "Strange failure"


def test_a_refused_file_s_reason_reads_in_chinese_on_a_chinese_page(tmp_path):
    from tfviz.hf.files import read_json

    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 8,, }')
    error = raised(lambda: read_json(bad))
    assert isinstance(error, hf.ConfigError) and "Expecting" in error.__context__.msg
    assert "a name in double quotes was expected at line 1, column 19" in str(error)
    assert "第 1 行第 19 列" in error.text("zh") and "Expecting" not in error.text("zh")


def test_a_model_config_s_refusal_reads_in_chinese_with_its_english_unchanged():
    error = raised(lambda: config.ModelConfig(vocab_size=10, n_out=-1))
    assert isinstance(error, ConfigValueError) and isinstance(error, ValueError)
    assert str(error) == "n_out must be between 0 and 262144, got -1 (0: no output head)"
    assert error.text("zh") == "n_out 必须在 0 到 262144 之间，实际为 -1（0 表示没有输出层）"
    outer = CheckpointError("bad_config", why=error)
    assert error.text("zh") in outer.text("zh") and "must" not in outer.text("zh")
