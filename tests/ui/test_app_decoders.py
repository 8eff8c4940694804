"""Decoder folders (GPT-2, Llama with grouped-query attention, Qwen2) in the app, driven headless
through AppTest (issue 32).

One tiny model per family is built with transformers (tests/hf/test_hf_decoders.py's builder) into a
temporary models folder. Each must be listed with its family, open in every tab with W_o switched
and in every analysis section, show the next tokens the library computes (learned, and switched
beside them), continue the text greedily as hf.greedy_continuation does, and draw its heatmaps
with the masked upper triangle as gaps, not as weights of 0. transformers builds the models
only: without it these tests skip, except under CI=true.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from tests.conftest import page_figures, start_app
from tests.hf import test_hf_decoders  # noqa: F401  (skips without transformers; fails in CI)
from tests.support import decoder_folders
from tests.ui.test_app import array
from tfviz import hf
from tfviz.core.interventions import Interventions

pytestmark = pytest.mark.usefixtures("fresh_app", "server_folder")
FAMILIES = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2"}
SECTIONS = (
    "Norm-based attention",
    "Attention rollout",
    "Head importance",
    "Ablate before vs after W_o",
    "OV circuits",
    "How W_o mixes heads",
    "Induction heads",
)


@pytest.fixture(scope="module")
def model_root(tmp_path_factory) -> Path:
    return decoder_folders(tmp_path_factory, "decoders_dir", FAMILIES)


def table_rows(at) -> list[list[str]]:
    """The next-token table (the prediction block), one list of cells a row, header first."""
    block = at.code[0].value
    return [re.split(r" {2,}", line.strip()) for line in block.splitlines()]


def test_the_picker_lists_each_decoder_with_its_family():
    at = start_app()
    options = at.selectbox(key="model").options
    for kind, family in FAMILIES.items():
        assert f"{kind} ({family})" in options, options


@pytest.mark.parametrize("kind", FAMILIES)
def test_the_sidebar_says_it_is_a_decoder(kind):
    at = start_app(model=f"folder:{kind}")
    assert not at.exception and not at.error
    said = " ".join(c.value for c in at.sidebar.caption).replace("\\", "")
    assert "pretrained decoder" in said
    if kind != "gpt2":  # the Llama-style builds have 2 key/value heads for 4 query heads
        assert "2 key/value heads for 4 query heads" in said


@pytest.mark.parametrize("kind", FAMILIES)
def test_each_decoder_opens_in_every_tab_with_w_o_off(kind):
    at = start_app(model=f"folder:{kind}")
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    labels = [tab.label for tab in at.tabs]
    assert len(labels) >= 8
    for label in labels:
        at.session_state["view"] = label
        at.run()
        assert not at.exception, (kind, label, at.exception)
        assert not at.error, (kind, label, [e.value for e in at.error])


@pytest.mark.parametrize("section", SECTIONS)
def test_every_analysis_section_opens_on_a_decoder(section):
    at = start_app(view="Analysis", model="folder:llama")
    at.segmented_control(key="analysis_section").set_value(section).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("kind", FAMILIES)
def test_the_next_tokens_are_the_models_learned_then_switched(kind, model_root):
    at = start_app(model=f"folder:{kind}")
    text = at.text_input(key="sequence").value
    loaded = hf.open_folder(model_root / kind)
    ids = torch.tensor([loaded.tokenizer.encode(text).ids])

    def top1(iv=None) -> list[str]:
        with torch.no_grad():
            logits = loaded.model(ids, interventions=iv, trace=False).logits[0]
        return [loaded.tokenizer.piece_text(int(i)) for i in logits.argmax(-1)]

    rows = table_rows(at)
    assert len(rows) == ids.shape[1] + 1  # a header and one row a position
    shown = [r[2].rsplit(" ", 1)[0].strip() for r in rows[1:]]
    want = [w if w.strip() else repr(w) for w in top1()]
    assert [s.strip() for s in shown] == [w.strip() for w in want]
    # Each with its probability to a tenth of a percent: a tiny model's best guess is under 1%,
    # which a whole percent would show as "0%".
    with torch.no_grad():
        best = loaded.model(ids, trace=False).logits[0].softmax(-1).amax(-1)
    assert [r[2].rsplit(" ", 1)[1] for r in rows[1:]] == [f"{p:.1%}" for p in best.tolist()]
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    rows = table_rows(at)
    assert len(rows[0]) == 4  # learned and switched side by side
    switched = [r[3].replace("*", "").rsplit(" ", 1)[0].strip() for r in rows[1:]]
    want = top1(Interventions(w_o="identity"))
    assert switched == [(w if w.strip() else repr(w)).strip() for w in want]


def test_the_continuation_is_the_librarys_greedy_one(model_root):
    at = start_app(model="folder:gpt2")
    at.radio(key="w_o_mode").set_value("identity").run()
    at.button(key="next_continue").click().run()
    assert not at.exception
    loaded = hf.open_folder(model_root / "gpt2")
    text = at.text_input(key="sequence").value
    ids = list(loaded.tokenizer.encode(text).ids)
    stop = (loaded.tokenizer.sep_id,)
    for iv in (None, Interventions(w_o="identity")):
        tokens = hf.greedy_continuation(loaded.model, ids, hf.MAX_NEW_TOKENS, iv, stop)
        written = f"{text} ▶ {loaded.tokenizer.decode_ids(tokens)}"
        assert any(c.value == written for c in at.code), (written, [c.value for c in at.code])


def test_the_heatmaps_leave_the_masked_triangle_blank():
    at = start_app(model="folder:llama")
    figures = page_figures(at)
    assert figures
    z = array(figures[0]["data"][0]["z"]).astype(float)
    # The first block (L0 H0) sits top-left: row 0 reads only key 0, so its next cells are gaps,
    # and every row's first cell is a weight.
    assert not math.isnan(z[0, 0]) and math.isnan(z[0, 1]) and math.isnan(z[1, 2])
    assert not math.isnan(z[1, 1]) and not math.isnan(z[2, 0])
    captions = " ".join(c.value for c in at.caption).replace("\\", "")  # md_escape
    assert "masked (left blank), not weights of 0" in captions
    assert "H0–H1, H2–H3" in captions  # which query heads share a key/value head
    assert at.radio(key="attn_weight_scale").value == "log"  # the first token's sink


@pytest.mark.parametrize("section", ["Head importance", "Ablate before vs after W_o"])
def test_importance_and_ablation_measure_the_texts_own_next_tokens(section, model_root):
    at = start_app(view="Analysis", model="folder:qwen2")
    at.segmented_control(key="analysis_section").set_value(section).run()
    assert not at.exception and not at.error
    assert not [i.value for i in at.info if "toy model" in i.value]  # not refused as toy-only
    loaded = hf.open_folder(model_root / "qwen2")
    task = hf.NextTokenTask(loaded.tokenizer)
    batch = task.batch_from_texts([at.text_input(key="sequence").value])
    if section == "Head importance":
        from tfviz import analysis

        imp = analysis.head_importance(loaded.model, task, batch=batch)
        shown = [m.value for m in at.metric]
        assert imp.n == 1 and imp.loss_change.shape == (2, 4)
        assert any(f"{imp.base_metric:.0%}" in v or f"{imp.base_metric:.3g}" in v for v in shown)
    else:
        assert len(at.metric) == 2  # zeroed before W_o and after it, on the text alone
    # the targets: each position's next token, none after the last
    assert batch.target[0, :-1].tolist() == batch.ids[0, 1:].tolist()
    assert batch.target[0, -1].item() == -100
