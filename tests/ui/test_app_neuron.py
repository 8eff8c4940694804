"""The neuron view (Attention: inside one head) and each head's share of attn_out (Before/after
W_o) in the app, driven headless through AppTest: for a toy model, MiniLM and a GPT-2-style and
Llama-style folder, in English and Chinese, each section draws, its numbers are the library's
(tfviz.analysis.neuron, tfviz.analysis.shares), and the softmax shown is the trace's attention.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import MODELS, page_figures, start_app
from tests.support import array, decoder_folders
from tfviz import analysis, get_task, hf
from tfviz.core.interventions import Interventions
from tfviz.core.trace import run_trace
from tfviz.hf import pretrained
from tfviz.training.checkpoint import load_checkpoint
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app", "server_folder")
transformers = pytest.importorskip("transformers")  # builds the tiny decoder folders

MINILM = f"pretrained:{pretrained.NAME}"
FOLDERS = ("gpt2", "llama")


@pytest.fixture(scope="module")
def model_root(tmp_path_factory) -> Path:
    return decoder_folders(tmp_path_factory, "neuron_decoders", FOLDERS)


def loaded(model: str | None, model_root: Path):
    """(model, task) the app runs for a picker entry (None: the default toy model)."""
    if model is None:
        net, _ = load_checkpoint(MODELS / "reverse.safetensors")
        return net, get_task("reverse")
    folder = hf.open_folder(model_root / model.split(":", 1)[1])
    return folder.model, hf.NextTokenTask(folder.tokenizer)


def fixed_part(lang: str, key: str, name: str) -> str:
    """The longest part of a catalogue text that does not depend on its placeholder name."""
    return max(translate(lang, key, **{name: "\0"}).split("\0"), key=len)


def titled(at, text: str) -> dict:
    """The one chart on the page whose title contains text."""
    found = [f for f in page_figures(at) if text in f["layout"].get("title", {}).get("text", "")]
    assert len(found) == 1, [f["layout"].get("title") for f in page_figures(at)]
    return found[0]


def open_neuron(model: str | None, lang: str):
    at = start_app(view="Attention", model=model, lang=lang)
    at.toggle(key="attn_neuron").set_value(True).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def shown_difference(at, lang: str) -> float:
    """The number the softmax-equals-attention sentence prints."""
    head = re.escape("L0 H0")
    pattern = re.escape(translate(lang, "attention.neuron.matches", head="§", diff="¶"))
    pattern = pattern.replace("§", head).replace("¶", r"([-+.e\d]+)")
    said = [m.value for m in at.markdown if re.search(pattern, m.value)]
    assert len(said) == 1, [m.value for m in at.markdown]
    return float(re.search(pattern, said[0]).group(1))


def neuron_numbers(at) -> dict[str, np.ndarray]:
    """The neuron view's charts' numbers: q, k, q x k and the three bar panels."""
    qk = titled(at, translate(at.session_state["lang"], "chart.title.neuron_qk"))
    product = titled(at, translate(at.session_state["lang"], "chart.title.neuron_product"))
    lang = at.session_state["lang"]
    bars = titled(at, fixed_part(lang, "attention.neuron.scores_title", "token"))
    panels = [array(t["x"]) for t in bars["data"] if t["type"] == "bar"]
    keys, query = (array(t["z"]) for t in qk["data"][:2])
    return {
        "k": keys,
        "q": query[0],
        "product": array(product["data"][0]["z"]),
        "dots": panels[0],
        "scores": panels[1],
        "weights": panels[2],
    }


CASES = [
    pytest.param(None, "en", id="toy-en"),
    pytest.param(None, "zh", id="toy-zh"),
    pytest.param("folder:gpt2", "en", id="gpt2-en"),
    pytest.param("folder:llama", "zh", id="llama-zh"),
    pytest.param("folder:llama", "en", id="llama-en"),
]


@pytest.mark.parametrize(("model", "lang"), CASES)
def test_the_neuron_view_draws_the_library_s_numbers(model, lang, model_root):
    at = open_neuron(model, lang)
    got = neuron_numbers(at)
    net, task = loaded(model, model_root)
    trace = run_trace(net, task, at.text_input(key="sequence").value)
    T = len(trace.labels)
    want = analysis.neuron_view_of_trace(net, task, trace, 0, 0, T - 1)  # the pickers' defaults
    masked = want.masked
    np.testing.assert_allclose(got["q"], want.q, atol=1e-5)
    np.testing.assert_allclose(got["k"], want.k, atol=1e-5)
    np.testing.assert_allclose(got["product"][~masked], want.product[~masked], atol=1e-5)
    assert np.isnan(got["product"][masked]).all()  # masked keys: gaps, not 0
    np.testing.assert_allclose(got["dots"][~masked], want.dots[~masked], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["scores"][~masked], want.scores[~masked], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["weights"][~masked], want.weights[~masked], atol=1e-6)
    assert np.isnan(got["weights"][masked]).all()
    gap = np.abs(want.weights - trace.attn[0, 0, T - 1]).max()
    assert shown_difference(at, lang) == pytest.approx(gap, abs=1e-7)
    assert shown_difference(at, lang) < 1e-5  # the softmax is the trace's attention


def test_a_decoder_s_query_reads_no_later_key_and_names_its_shared_key_value_head():
    at = open_neuron("folder:llama", "en")
    at.selectbox(key="attn_neuron_query").set_value(1).run()
    at.selectbox(key="attn_neuron_head").set_value(3).run()
    assert not at.exception
    got = neuron_numbers(at)
    assert np.isnan(got["weights"][2:]).all() and got["weights"][:2].sum() == pytest.approx(1)
    said = " ".join(c.value for c in at.caption)
    assert translate("en", "attention.neuron.kv_head", head="H3", kv=1, shared="H2, H3") in said
    at.toggle(key="attn_neuron_unrotated").set_value(True).run()  # a rotary model's toggle
    assert not at.exception
    assert translate("en", "attention.neuron.unrotated") in " ".join(c.value for c in at.caption)


def test_a_model_with_learned_positions_has_no_rotation_toggle():
    at = open_neuron("folder:gpt2", "en")
    assert not [t for t in at.toggle if t.key == "attn_neuron_unrotated"]


def test_the_neuron_view_follows_the_switches():
    at = open_neuron(None, "en")
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    said = " ".join(c.value for c in at.caption)
    assert translate("en", "attention.neuron.switched") in said
    assert shown_difference(at, "en") < 1e-5


def test_the_neuron_view_on_minilm_traces_sentence_a():
    pytest.importorskip(pretrained.PACKAGE)
    at = open_neuron(MINILM, "en")
    got = neuron_numbers(at)
    assert got["weights"].sum() == pytest.approx(1, abs=1e-5)
    np.testing.assert_allclose(got["product"].sum(-1), got["dots"], rtol=1e-4, atol=1e-4)
    assert shown_difference(at, "en") < 1e-5


# ---- each head's share of attn_out -------------------------------------------------------------


def open_shares(model: str | None, lang: str, switched: bool = False):
    at = start_app(view="Before/after W_o", model=model, lang=lang)
    if switched:
        at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


SHARE_CASES = [
    pytest.param(None, "en", id="toy-en"),
    pytest.param(None, "zh", id="toy-zh"),
    pytest.param("folder:gpt2", "zh", id="gpt2-zh"),
    pytest.param("folder:llama", "en", id="llama-en"),
]


@pytest.mark.parametrize(("model", "lang"), SHARE_CASES)
@pytest.mark.parametrize("switched", [False, True], ids=["learned", "switched"])
def test_the_head_shares_are_the_library_s(model, lang, switched, model_root):
    at = open_shares(model, lang, switched)
    net, task = loaded(model, model_root)
    text = at.text_input(key="sequence").value
    iv = Interventions(w_o="identity") if switched else None
    now = analysis.output_shares_of_trace(net, run_trace(net, task, text, iv))
    flow = titled(at, fixed_part(lang, "w_o.shares.flow_title", "at"))
    bars = np.stack([array(t["x"]) for t in flow["data"]], axis=-1)  # (rows, H)
    mean = now.norm_share.mean(axis=-1)  # (L, H): the picker's default, the mean over tokens
    if switched:
        learned = analysis.output_shares_of_trace(net, run_trace(net, task, text))
        np.testing.assert_allclose(bars[0::2], learned.norm_share.mean(axis=-1), atol=1e-6)
        np.testing.assert_allclose(bars[1::2], mean, atol=1e-6)
    else:
        np.testing.assert_allclose(bars, mean, atol=1e-6)
    tokens = titled(at, translate(lang, "w_o.shares.tokens_title", layer=0))
    np.testing.assert_allclose(array(tokens["data"][0]["z"]), now.norm_share[0].T, atol=1e-6)


def test_the_shares_at_one_token_are_that_token_s():
    at = open_shares(None, "en")
    at.selectbox(key="wo_share_token").set_value(2).run()
    assert not at.exception
    net, task = loaded(None, MODELS)
    now = analysis.output_shares_of_trace(
        net, run_trace(net, task, at.text_input(key="sequence").value)
    )
    flow = titled(at, "layer by layer")
    bars = np.stack([array(t["x"]) for t in flow["data"]], axis=-1)
    np.testing.assert_allclose(bars, now.norm_share[..., 2], atol=1e-6)


def test_the_head_shares_on_minilm_draw():
    pytest.importorskip(pretrained.PACKAGE)
    at = open_shares(MINILM, "zh")
    flow = titled(at, fixed_part("zh", "w_o.shares.flow_title", "at"))
    bars = np.stack([array(t["x"]) for t in flow["data"]], axis=-1)
    assert bars.shape == (6, 12)
    np.testing.assert_allclose(bars.sum(-1), 1.0, atol=1e-5)
