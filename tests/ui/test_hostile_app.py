"""Hostile input through the whole app (AppTest): the sequence box, the model name, the numbers.

Every string of tests/hostile_inputs.json goes through the running app. Each must give one clear
error element or a valid result, never an exception, and nothing typed may come out as markup:
wherever the page renders markdown, the user's text appears only with its markup characters
escaped (or in a code block, which renders nothing). One AppTest per model is reused for the whole
corpus, so the file runs in well under a minute on two cores.
"""

from __future__ import annotations

import errno
import json
import math
import re
import string
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import page_figures, start_app
from tests.support import plain
from tfviz import get_task, list_tasks, settings
from tfviz.serve import checks
from tfviz.training.checkpoint import safe_model_path

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def _accepted(task: str, text: str) -> bool:
    try:
        get_task(task).validate(text)
    except ValueError:
        return False
    return True


ITEMS = json.loads((ROOT / "tests" / "hostile_inputs.json").read_text())["inputs"]
CORPUS = [item["text"] for item in ITEMS]
# For the second and third alphabet: what any task accepts, and what could turn into markup.
SAMPLE = [
    item["text"]
    for item in ITEMS
    if item["category"] in {"valid_somewhere", "numbers_as_text", "markup", "long", "empty"}
    or any(_accepted(task, item["text"]) for task in list_tasks())
]
BUNDLED = frozenset(p.stem for p in (ROOT / "models").glob("*.safetensors"))


def received(at: AppTest, key: str, typed: str) -> str:
    """What the script gets from a text box: Streamlit cuts it to the box's max_chars, if any.

    The sequence box has none (in a browser a longer paste would be dropped without a word): the
    script gets the whole text, and the task says why it is refused.
    """
    limit = at.text_input(key=key).proto.max_chars
    return typed[:limit] if limit else typed


# Elements whose text Streamlit renders as markdown, and the widget fields rendered the same way.
MARKDOWN_BODIES = {"markdown", "caption", "error", "warning", "info", "success", "title", "header"}
MARKDOWN_BODIES |= {"subheader", "toast"}
MARKDOWN_FIELDS = ("label", "help")
MARKUP = set("<>*_[]`$&#|~\\!")  # characters that can start markup in Streamlit's markdown
TAG = re.compile(r"<\s*/?\s*[A-Za-z!?]")


pytestmark = pytest.mark.usefixtures("fresh_app")
start = start_app


def walk(node):
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from walk(child)


def markdown_texts(at: AppTest):
    """(where, text) of everything on the page that is rendered as markdown."""
    for node in walk(at._tree):
        proto = getattr(node, "proto", None)
        kind = getattr(node, "type", None)
        if proto is None or kind is None:
            continue
        if kind in MARKDOWN_BODIES:
            yield kind, proto.body
        for field in MARKDOWN_FIELDS:
            value = (
                getattr(proto, field, None) if field in proto.DESCRIPTOR.fields_by_name else None
            )
            if isinstance(value, str) and value:
                yield f"{kind}.{field}", value


def escaped_chars(body: str) -> list[tuple[str, bool]]:
    """body's characters as markdown shows them, each with whether it was backslash-escaped."""
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body) and body[i + 1] in string.punctuation:
            out.append((body[i + 1], True))
            i += 2
        else:
            out.append((body[i], False))
            i += 1
    return out


def markup_problems(at: AppTest, text: str, known: set[str] = frozenset()) -> list[str]:
    """Where the page would render the typed text (or any tag) as markup instead of literally.

    known: texts the page shows whatever was typed (the app's own words, its own bold and code);
    the typed text is looked for in every other one.
    """
    problems = []
    for node in walk(at._tree):
        if getattr(node, "type", None) in ("markdown", "caption") and node.proto.allow_html:
            problems.append(f"{node.type} allows HTML: {node.proto.body[:80]!r}")
    risky = any(ch in MARKUP for ch in text)
    for where, body in markdown_texts(at):
        chars = escaped_chars(body)
        active = "".join("\0" if escaped else ch for ch, escaped in chars)
        if TAG.search(active):
            problems.append(f"{where} holds an unescaped tag: {body[:120]!r}")
        if not risky or body in known:
            continue
        shown = "".join(ch for ch, _ in chars)
        start = shown.find(text)
        while start != -1:
            span = chars[start : start + len(text)]
            if any(ch in MARKUP and not escaped for ch, escaped in span):
                problems.append(f"{where} shows the input as markup: {body[:120]!r}")
                break
            start = shown.find(text, start + 1)
    return problems


def page_texts(at: AppTest, key: str, inputs: list[str], submit: bool = False) -> set[str]:
    """The markdown texts the page shows for a few harmless inputs: the app's own words."""
    texts = set()
    for text in inputs:
        at.text_input(key=key).set_value(text)
        if submit:
            submit_refused(at)
        at.run()
        texts |= {body for _, body in markdown_texts(at) if text not in plain(body)}
    return texts


def test_the_corpus_is_large():
    assert len(CORPUS) >= 200
    assert any(len(t) == 10_000 for t in CORPUS) and any("\x00" in t for t in CORPUS)


def submit_refused(at: AppTest) -> None:
    """Click Start training with Steps 0: refused whatever the name, so no job ever starts.

    A form's values reach the script only with its submit button, so Steps is set every time.
    The form reports every problem at once, so the name is still checked.
    """
    at.number_input(key="train_steps").set_value(0)
    at.button(key="train_submit").click()


def check_sequence_result(at: AppTest, task, text: str, errors: list[str]) -> bool:
    """The page's answer to the sequence text: one clear error, or a prediction. True if valid."""
    try:
        task.validate(text)
    except ValueError as e:
        assert len(errors) == 1, (text[:50], errors)
        message = plain(errors[0])
        assert message == str(e), (text[:50], message)
        assert f"takes {task.min_len} to {task.max_len} characters from: {task.alphabet}" in message
        assert len(message) < 400  # a 10,000-character paste is never echoed back
        assert not at.code and not page_figures(at)  # no result for a bad input
        return False
    assert not errors, (text, errors)
    assert "right answer" in at.code[0].value  # the prediction table
    return True


def test_every_corpus_string_in_both_text_boxes(tmp_path):
    """Each string typed as the sequence and as the model name at once, then Start training."""
    folder = tmp_path / "user_models"
    at = start("Train")
    task = get_task("reverse")
    known = page_texts(at, "sequence", [task.examples[0], "not valid!"])
    known |= page_texts(at, "train_name", ["fine", "not/fine"], submit=True)
    accepted = 0
    for typed in CORPUS:
        at.text_input(key="sequence").set_value(typed)
        at.text_input(key="train_name").set_value(typed)
        submit_refused(at)
        at.run()
        assert not at.exception, (typed[:50], at.exception)
        sequence, name = typed, received(at, "train_name", typed)  # what the script gets
        assert at.text_input(key="sequence").value == sequence
        assert at.text_input(key="train_name").value == name
        errors = [e.value for e in at.error]
        form = [e for e in errors if e.startswith("Training not started")]
        accepted += check_sequence_result(at, task, sequence, [e for e in errors if e not in form])
        assert len(form) == 1, typed[:50]
        message = plain(form[0])
        assert "Steps must be a whole number from 1 to 20,000; got 0" in message
        try:
            safe_model_path(folder, name, reserved=BUNDLED)
        except ValueError as e:
            assert str(e) in message, (typed[:50], message)
            assert len(message) < 400
        else:
            assert "model name" not in message, (typed[:50], message)
        for text in (sequence, name):
            problems = markup_problems(at, text, known)
            assert not problems, (typed[:50], problems)
    assert accepted >= 2
    assert "train_job" not in at.session_state
    assert not folder.exists() or not list(folder.iterdir())


# The strings some task accepts, and the markup, against each kind of alphabet with the Attention
# view open: valid ones draw charts from the typed tokens.
@pytest.mark.parametrize("model", ["bundled:reverse", "bundled:sort", "bundled:balanced"])
def test_corpus_sample_through_the_attention_view(model):
    at = start()
    at.selectbox(key="model").set_value(model).run()
    task = get_task(model.split(":")[1])
    known = page_texts(at, "sequence", [task.examples[0], "not valid!"])
    accepted = 0
    for typed in SAMPLE:
        at.text_input(key="sequence").set_value(typed).run()
        assert not at.exception, (typed[:50], at.exception)
        text = typed
        if check_sequence_result(at, task, text, [e.value for e in at.error]):
            accepted += 1
            assert page_figures(at)  # the attention charts
        problems = markup_problems(at, text, known)
        assert not problems, (typed[:50], problems)
    assert accepted >= 2  # the corpus holds inputs each of these tasks takes


@pytest.mark.parametrize(
    "name, expected",
    [
        ("../../x", "may only hold letters"),
        ("/etc/passwd", "may only hold letters"),
        ("/tmp/evil.safetensors", "may only hold letters"),
        ("", "is empty"),
        ("   ", "is empty"),
        (".safetensors", "is empty"),
        ("reverse", "is reserved"),
        ("Sort.safetensors", "is reserved"),
        ("con", "is reserved"),
        ("..x", "nor contain '..'"),
        # A box with max_chars passes its first characters on; one without, all 10,000.
        ("/" + "x" * 9_999, None),
        ("x\x00y", "found '\\x00'"),
        ("model😀", "found '😀'"),
        ("taken", "already exists"),
    ],
    ids=lambda v: ascii(v)[:24],
)
def test_the_train_form_refuses_a_bad_name_and_writes_nothing(tmp_path, name, expected):
    folder = tmp_path / "user_models"
    folder.mkdir()
    taken = folder / "taken.safetensors"
    taken.write_bytes((ROOT / "models" / "sort.safetensors").read_bytes())
    at = start("Train")
    at.text_input(key="train_name").set_value(name)
    at.button(key="train_submit").click().run()
    assert not at.exception
    assert len(at.error) == 1
    if expected is None:
        cut = at.text_input(key="train_name").proto.max_chars
        expected = "may only hold letters" if cut else "10000 characters long"
    assert expected in plain(at.error[0].value)
    assert "train_job" not in at.session_state  # no job was started
    assert [p.name for p in folder.iterdir()] == ["taken.safetensors"]
    assert taken.read_bytes() == (ROOT / "models" / "sort.safetensors").read_bytes()
    assert not (tmp_path / "x").exists() and not (ROOT / "x.safetensors").exists()


NAN, INF = float("nan"), float("inf")


NUMBER_CASES = [
    ("train_steps", 0, "Steps must be a whole number from 1 to 20,000; got 0"),
    ("train_steps", -1, "Steps must be a whole number from 1 to 20,000; got -1"),
    ("train_steps", 20_001, "got 20001"),
    ("train_steps", 2.5, "got 2.5"),
    ("train_steps", 10**30, "got 1e+30"),
    ("train_steps", 1e308, "got 1e+308"),
    ("train_lr", 0.0, "The learning rate must be a number from 1e-05 to 1; got 0"),
    ("train_lr", -3e-3, "got -0.003"),
    ("train_lr", 2.0, "got 2"),
    ("train_lr", 1e308, "got 1e+308"),
    ("train_seed", -1, "The random seed must be a whole number from 0 to 2,147,483,647; got -1"),
    ("train_seed", 0.5, "got 0.5"),
    ("train_seed", 2**31, "got 2.14748e+09"),
    ("train_seed", 2**70, "got 1.18059e+21"),
    # Streamlit itself puts NaN and inf back to the field's default before the script runs.
    ("train_steps", NAN, None),
    ("train_steps", INF, None),
    ("train_steps", -INF, None),
    ("train_lr", NAN, None),
    ("train_lr", INF, None),
    ("train_seed", NAN, None),
    ("train_seed", -INF, None),
]


def test_the_train_form_checks_its_numbers():
    at = start("Train")
    defaults = {key: at.number_input(key=key).value for key, _, _ in NUMBER_CASES}
    for key, value, expected in NUMBER_CASES:
        case = (key, value)
        for other, default in defaults.items():  # one bad number at a time
            at.number_input(key=other).set_value(default)
        at.number_input(key=key).set_value(value)
        at.text_input(key="train_name").set_value("../blocked")  # never starts a job
        at.button(key="train_submit").click().run()
        assert not at.exception, (case, at.exception)
        assert len(at.error) == 1, case
        message = plain(at.error[0].value)
        assert message.startswith("Training not started:"), case
        assert "may only hold letters" in message, case  # the name's problem is listed too
        if expected is None:
            assert "must be a" not in message, (case, message)
            assert math.isfinite(at.number_input(key=key).value), case
        else:
            assert expected in message, (case, message)
            assert message.count("must be a") == 1, (case, message)
    assert "train_job" not in at.session_state


def test_form_number_checks_refuse_every_non_number():
    for bad in (NAN, INF, -INF, None, "12", True, 1.5, 0, 20_001):
        with pytest.raises(ValueError, match="(?i)steps must be a whole number from 1 to 20,000"):
            checks.whole_number(bad, "steps", 1, settings.MAX_STEPS)
    assert checks.whole_number(20.0, "steps", 1, settings.MAX_STEPS) == 20
    for bad in (NAN, INF, None, "0.1", False, 0.0, 1.5):
        with pytest.raises(ValueError, match="learning rate must be a number from 1e-05 to 1"):
            checks.number_in_range(bad, "lr", settings.MIN_LR, settings.MAX_LR)
    assert checks.number_in_range(1, "lr", settings.MIN_LR, settings.MAX_LR) == 1.0


def test_a_full_disk_gives_a_clear_error_and_keeps_the_saved_models(tmp_path, monkeypatch):
    folder = tmp_path / "user_models"
    folder.mkdir()
    (folder / "kept.safetensors").write_bytes((ROOT / "models" / "sort.safetensors").read_bytes())

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tfviz.training.checkpoint.os.fsync", disk_full)
    at = start("Train")
    for key, value in (("d_model", 16), ("heads", 2), ("layers", 1), ("d_ff", 32)):
        at.selectbox(key=f"train_{key}").set_value(value)
    at.number_input(key="train_steps").set_value(20)
    at.text_input(key="train_name").set_value("new")
    at.button(key="train_submit").click().run()
    assert not at.exception and not at.error
    end = time.monotonic() + 60
    while not at.error:
        assert time.monotonic() < end, "the training did not end in 60 s"
        time.sleep(0.2)
        at.run()
        assert not at.exception
    message = plain(at.error[0].value)
    assert message.startswith("Training new failed: trained, but saving new.safetensors failed")
    assert "(the disk is full)" in message and "nothing was written" in message
    assert [p.name for p in folder.iterdir()] == ["kept.safetensors"]
    assert "yours:new" not in at.selectbox(key="model").options
    at.selectbox(key="model").set_value("yours:kept").run()
    assert not at.exception and "1 1 2 3 4 5 6 9" in at.code[0].value  # still loads and answers
