"""One seam for model kinds: a toy task, a sentence encoder, a masked LM and a decoder each have
one adapter (tfviz.ui.kinds) owning what differs, and the views ask it rather than test which
kind they hold.

The count is read from the source with ast: the UI modules (tfviz/ui/**, app.py) that test a
model's kind in any of the forms below may be kinds.py and at most one other. The adapters are
then checked on a toy model, MiniLM, a tiny BERT with its masked-LM head (transformers builds
it; skipped without) and the bundled character decoder.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import MODELS, ROOT
from tests.support import en, python_tree
from tfviz import get_task, hf, plots
from tfviz.hf import pretrained
from tfviz.ui import kinds
from tfviz.ui.labels import metric_name

MAX_MODULES = 2  # kinds.py, and the one other UI module that may still tell kinds apart
# Attributes whose reading or getattr/hasattr is a test of the kind: the View's old properties,
# a decoder's flag, a masked LM's head and marker, a decoder task's own method.
KIND_ATTRS = {"is_sentence", "is_decoder", "causal", "mask", "head", "answer_from_ids"}
DECODER_FOLDER = MODELS / "language" / "shakespeare-2l-attn"


def is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def names_a_task(node: ast.AST) -> bool:
    """node is `task` or `<something>.task`."""
    return (isinstance(node, ast.Name) and node.id == "task") or (
        isinstance(node, ast.Attribute) and node.attr == "task"
    )


def compares_kind(node: ast.Compare) -> bool:
    """x.kind == "..." (task.kind, meta.kind), source == "pretrained", task.name == "..."."""
    sides = [node.left, *node.comparators]
    if not any(is_str(side) for side in sides):
        return False
    for side in sides:
        if not isinstance(side, ast.Attribute):
            continue
        if side.attr == "kind" or (side.attr == "name" and names_a_task(side.value)):
            return True
        if side.attr == "source" and any(is_str(s) and s.value == "pretrained" for s in sides):
            return True
    return False


def type_names(node: ast.AST) -> list[str]:
    """The class names an isinstance's second argument lists."""
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return [i.id if isinstance(i, ast.Name) else getattr(i, "attr", "") for i in items]


def kind_checks(tree: ast.AST) -> list[int]:
    """The lines of tree that test a model's kind."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in {"is_sentence", "is_decoder"}:
            lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and compares_kind(node):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if node.func.id in {"getattr", "hasattr"} and len(args) >= 2 and is_str(args[1]):
                if args[1].value in KIND_ATTRS:
                    lines.append(node.lineno)
            elif node.func.id == "isinstance" and len(args) == 2:
                if any(n.endswith(("Task", "Family")) for n in type_names(args[1])):
                    lines.append(node.lineno)
    return lines


def ui_modules() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "tfviz" / "ui").rglob("*.py"))]


def test_the_scan_finds_every_form_of_a_kind_check():
    forms = [
        "view.is_sentence",
        "view.is_decoder",
        'task.kind == "sentence"',
        'meta.kind != "decoder"',
        'getattr(task, "causal", False)',
        'hasattr(task, "answer_from_ids")',
        "isinstance(task, hf.NextTokenTask)",
        "isinstance(loaded, (Family, str))",
        'entry.source == "pretrained"',
        'view.task.name == "reverse"',
    ]
    for form in forms:
        assert kind_checks(ast.parse(form)) == [1], form
    for plain in ['kind == "error"', 'entry.source == "bundled"', "view.kind.has_answers"]:
        assert kind_checks(ast.parse(plain)) == [], plain


def test_at_most_two_ui_modules_tell_model_kinds_apart():
    found = {
        str(path.relative_to(ROOT)): lines
        for path in ui_modules()
        if (lines := kind_checks(python_tree(path)))
    }
    assert "tfviz/ui/kinds.py" in found  # the scan sees the one place that decides
    assert len(found) <= MAX_MODULES, f"kind checks outside tfviz/ui/kinds.py: {found}"


@pytest.fixture(scope="module")
def minilm_task() -> pretrained.SentenceTask:
    _, tokenizer = pretrained.load_minilm()
    return pretrained.SentenceTask(tokenizer)


@pytest.fixture(scope="module")
def decoder_task() -> hf.NextTokenTask:
    return hf.NextTokenTask(hf.open_folder(str(DECODER_FOLDER), device="cpu").tokenizer)


def test_a_toy_task_has_answers_its_metric_and_one_token_changed():
    task = get_task("reverse")
    kind = kinds.kind_of(task)
    assert kind is kinds.TOY
    assert kind.has_answers and kind.measures_heads and kind.shared_metric
    assert not kind.pretrained and not kind.next_tokens
    assert kind.heat_scale == plots.FIXED
    text = task.examples[0]
    changed = kind.second_text(text, task)
    assert len(changed) == len(text)
    assert sum(a != b for a, b in zip(text, changed, strict=True)) == 1
    assert metric_name(task.metric) in kind.question(task_view(task, kind), "W_o off")


def test_minilm_is_an_encoder_measured_by_similarity(minilm_task):
    kind = kinds.kind_of(minilm_task)
    assert kind is kinds.ENCODER
    assert kind.pretrained and not kind.has_answers and not kind.measures_heads
    assert kind.heat_scale == plots.FIXED
    assert kind.second_text("a sentence", minilm_task) == ""
    assert kind.folder_what == "sentence"
    view = task_view(minilm_task, kind, text="a cat", text_b="a dog")
    _, name = kind.measure(view)
    assert name == en("parts.modes.similarity")


def test_a_bert_with_its_head_is_a_masked_lm(tmp_path):
    pytest.importorskip("transformers")
    from tests.hf.test_hf_encoders import _build
    from tfviz.ui.folders import meta_and_task

    _build("bert", tmp_path / "bert")
    _, task = meta_and_task(hf.open_folder(str(tmp_path / "bert"), device="cpu"), "folder")
    kind = kinds.kind_of(task)
    assert kind is kinds.MASKED_LM and isinstance(kind, kinds.EncoderKind)
    assert kind.folder_what == "masked" and not kind.has_answers


def test_a_decoder_reads_next_tokens_on_a_log_scale(decoder_task):
    kind = kinds.kind_of(decoder_task)
    assert kind is kinds.DECODER
    assert kind.next_tokens and kind.measures_heads and kind.pretrained
    assert not kind.has_answers and not kind.shared_metric
    assert kind.heat_scale == plots.LOG
    assert kind.folder_what == "next"
    view = task_view(decoder_task, kind, text="to be")
    _, name = kind.measure(view)
    assert name == en("next.agreement")
    assert kind.analysis_inputs(view)["text"] == "to be"


def task_view(task, kind, text: str | None = None, text_b: str | None = None):
    """A View of task's kind with no model: enough for what the adapters say without running."""
    from tfviz.core.interventions import NONE
    from tfviz.ui.view import View

    return View(None, None, None, task, NONE, kind, text=text, text_b=text_b)


def draw_boxes(source: str, decoder_folder: str) -> None:
    """Run by AppTest: the sequence box(es) of the kind of the model source names."""
    from tfviz import get_task, hf
    from tfviz.hf import pretrained
    from tfviz.ui import kinds

    if source == "toy":
        task = get_task("reverse")
    elif source == "minilm":
        task = pretrained.SentenceTask(pretrained.load_minilm()[1])
    else:
        task = hf.NextTokenTask(hf.open_folder(decoder_folder, device="cpu").tokenizer)
    kinds.kind_of(task).sequence_input(task)


@pytest.mark.parametrize(("source", "boxes"), [("toy", 1), ("minilm", 2), ("decoder", 1)])
def test_each_kind_draws_its_own_boxes(source, boxes):
    args = (source, str(DECODER_FOLDER))
    at = AppTest.from_function(draw_boxes, args=args, default_timeout=60).run()
    assert not at.exception
    assert len(at.text_input) == boxes
