"""W_o's freedom (Take W_o apart) and the logit lens (Analysis) in the app, driven headless through
AppTest: each opens on a toy model and on GPT-2- and Llama-style folders, in English and Chinese,
without an exception or an error box, and the numbers shown are the library's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import MODELS as BUNDLED
from tests.conftest import start_app
from tests.hf import test_hf_decoders  # noqa: F401  (skips without transformers; fails in CI)
from tests.support import decoder_folders
from tfviz import analysis, hf, load_checkpoint
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app", "server_folder")
MODELS = (None, "folder:gpt2", "folder:llama")  # None: the app's default toy model


@pytest.fixture(scope="module")
def model_root(tmp_path_factory) -> Path:
    return decoder_folders(tmp_path_factory, "why_dir", ("gpt2", "llama"))


def opened(view: str, model: str | None, lang: str):
    at = start_app(translate(lang, f"app.view.{view}"), model=model, lang=lang)
    assert not at.exception, at.exception
    return at


def library_model(model: str | None, root: Path):
    """The model the app opened, as the library opens it: the bundled reverse model or a
    folder."""
    if model is None:
        return load_checkpoint(BUNDLED / "reverse.safetensors")[0]
    return hf.open_folder(root / model.split(":")[1]).model


def metric(at, lang: str, key: str) -> str:
    label = translate(lang, key)
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("model", MODELS)
def test_w_o_s_freedom_draws_and_shows_the_library_s_numbers(model, lang, model_root):
    at = opened("parts", model, lang)
    at.segmented_control(key="parts_section").set_value("freedom").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    model_ = library_model(model, model_root)
    ov = analysis.head_ov(model_, 0, 0)
    assert metric(at, lang, "parts.freedom.rank") == f"{ov.rank} / {model_.config.d_k}"
    # the learned output difference is float rounding, the identity one is not
    learned = float(metric(at, lang, "parts.freedom.out_learned"))
    identity = float(metric(at, lang, "parts.freedom.out_identity"))
    assert learned < 1e-4 < identity
    assert float(metric(at, lang, "parts.freedom.undo.attn_out")) < 1e-4  # W_o: a linear map


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("model", MODELS)
def test_the_logit_lens_draws_or_says_why_not(model, lang):
    at = opened("analysis", model, lang)
    at.segmented_control(key="analysis_section").set_value("Logit lens").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    if model is None:  # a toy model: one line, the refusal's words
        why = translate(lang, "refusal.lens.no_vocabulary")
        assert any(why in i.value for i in at.info), [i.value for i in at.info]
        return
    text = " ".join(m.value for m in at.markdown).replace("\\", "")  # markdown escapes out
    check = re.search(r"= (-?[\d.]+)\D+= (-?[\d.]+)\D+?([\d.]+e[+-]\d+)", text)
    assert check, text
    total, logit, gap = (float(g) for g in check.groups())
    assert abs(total - logit) < 1e-3 and gap < 1e-3
