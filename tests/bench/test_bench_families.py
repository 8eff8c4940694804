"""bench/ui_latency.py --families: the model folders it builds open in tfviz as the app lists them,
and its sentences have exactly the asked number of word-pieces under each folder's own tokenizer
(the keystroke figures per length mean nothing otherwise).

The folders are built small here (2 layers, D = 32): what is checked depends on the tokenizer and
the config's family, not on the sizes the bench uses. transformers builds them: without it these
tests skip, except under CI=true.
"""

from __future__ import annotations

import os

import pytest

from tfviz import hf

IN_CI = os.environ.get("CI", "").lower() == "true"
try:
    import transformers  # noqa: F401 - the builder's dependency
except ImportError:  # pragma: no cover - a test-only dependency
    if IN_CI:
        raise
    pytest.skip("transformers is not installed", allow_module_level=True)

from bench import ui_latency  # noqa: E402
from bench.hf_families import FAMILIES  # noqa: E402

TINY = dict(layers=2, heads=4, hidden=32, ff=64)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrained_dir")
    for kind in FAMILIES:
        ui_latency.build_family(kind, root, TINY)
    return root


@pytest.fixture(scope="module")
def configs(root):
    """family_configs over the built folders (already there: not built again at full size)."""
    return ui_latency.family_configs("bert:32,roberta:128,distilbert,bert:9", 48, root)


def test_family_configs_name_the_folder_as_the_picker_and_sidebar_show_it(root, configs):
    assert [(c.model, c.T) for c in configs] == [
        ("bert", 32), ("roberta", 128), ("distilbert", 48), ("bert", 9)
    ]  # fmt: skip
    listed = {info.name: info for info in hf.list_folder(root)}
    assert sorted(listed) == sorted(FAMILIES), listed  # none refused
    for c in configs:
        assert c.label == f"{c.model} ({listed[c.model].family})"  # the picker's option
        assert c.sentence and not c.minilm
        assert c.task_name == "fill in the masked word"
    assert ui_latency.folder_environ(configs) == {"TFVIZ_PRETRAINED_DIR": str(root)}
    with pytest.raises(SystemExit, match="not one of"):
        ui_latency.family_configs("t5", 32, root)


@pytest.mark.parametrize("kind", list(FAMILIES))
@pytest.mark.parametrize("pieces", [9, 32, 128])
def test_sentences_have_exactly_the_pieces_asked_with_one_mask(root, kind, pieces):
    loaded = hf.open_folder(root / kind)
    assert loaded.head is not None  # a masked-LM model: the app answers for the mask
    cfg = ui_latency.Config(kind, pieces, None, FAMILIES[kind], folder=str(root / kind))
    task = ui_latency.sentence_task(cfg)
    made = ui_latency.sentences(task, pieces, 12, seed=3)
    assert len({text for text, _ in made}) == 12
    mask = loaded.tokenizer.specials.mask
    for text, shown in made:
        # Split again by the folder's tokenizer as opened, not by the task the bench used.
        encoded = loaded.tokenizer.encode(text, mask=mask)
        assert len(encoded.ids) == pieces, (text, encoded.pieces)
        assert len(encoded.masked) == 1 and text.count(mask) == 1
        assert loaded.tokenizer.unk_id not in encoded.ids
        assert shown == "".join(encoded.pieces).replace(" ", "")


def test_minilm_sentences_are_unchanged_in_length_and_have_no_mask():
    cfg = ui_latency.model_config("minilm:20", 32)
    made = ui_latency.sentences(ui_latency.sentence_task(cfg), cfg.T, 5, seed=0)
    for text, _ in made:
        assert "[MASK]" not in text
        assert len(ui_latency.sentence_task(cfg).pieces(text).ids) == 20
