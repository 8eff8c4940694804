"""A server folder of Hugging Face models ($TFVIZ_PRETRAINED_DIR) and zipped model folders
uploaded in one session, in the app, driven headless through AppTest (issue 19).

One tiny model per family is built with transformers (tests/hf/test_hf_encoders.py's builders:
BertForMaskedLM, RobertaForMaskedLM, DistilBertForMaskedLM, D = 32, saved as safetensors with a
small tokenizer) into a temporary models folder, beside a hostile folder holding only a pickle.
The picker must list the three with their family and the hostile one with its reason; each must
open in every tab; the fill-in-the-mask answers shown must be hf.fill_mask's, learned and with
W_o switched off; a zipped folder must open for its session, and a zip with a '../' entry be
refused with the library's message. transformers builds the models only: without it these tests
skip, except under CI=true.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import page_figures, start_app
from tests.hf.test_hf_encoders import _build  # skips this module without transformers (fails in CI)
from tests.support import unescape
from tfviz import hf, settings
from tfviz.core.interventions import NONE, Interventions

pytestmark = pytest.mark.usefixtures("fresh_app")

FAMILIES = {"bert": "BERT", "roberta": "RoBERTa", "distilbert": "DistilBERT"}
HOSTILE = "pickled"
SENTENCE = "sentence-bert"  # a headless BERT: a sentence model, compared by similarity
MIME = "application/zip"


@pytest.fixture(scope="module")
def model_root(tmp_path_factory) -> Path:
    """The server's folder: one tiny model per family and one folder with only a pickle."""
    root = tmp_path_factory.mktemp("pretrained_dir")
    for kind in FAMILIES:
        _build(kind, root / kind)
    _build("bert-encoder-only", root / SENTENCE)  # a BertModel: no masked-LM head
    bad = root / HOSTILE
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
    (bad / "pytorch_model.bin").write_bytes(b"never unpickled")
    return root


@pytest.fixture(autouse=True)
def server_folder(model_root, monkeypatch) -> Path:
    monkeypatch.setenv(settings.PRETRAINED_DIR_ENV, str(model_root))
    return model_root


def answers(at: AppTest) -> list[list[str]]:
    """The fill-in-the-mask code blocks, each as its words in rank order."""
    blocks = [c.value for c in at.code if c.value.startswith("1. ")]
    return [[line.split()[1] for line in block.splitlines()] for block in blocks]


def expected(model_root: Path, kind: str, text: str, iv=NONE) -> hf.MaskAnswer:
    loaded = hf.open_folder(model_root / kind)
    mask = loaded.tokenizer.specials.mask
    return hf.fill_mask(loaded.model, loaded.head, loaded.tokenizer, text, iv, mask=mask)


def shown_words(guesses) -> list[str]:
    from tfviz.ui.masked import shown_word

    return [shown_word(g) for g in guesses]


# ---- the picker and the sidebar -------------------------------------------------------------


def test_the_picker_lists_each_family_and_the_refused_folder_with_its_reason():
    at = start_app()
    options = at.selectbox(key="model").options
    for kind, family in FAMILIES.items():
        assert f"{kind} ({family})" in options, options
    assert not any(HOSTILE in o for o in options)
    refused = [unescape(w.value) for w in at.warning if HOSTILE in w.value]
    assert len(refused) == 1, [w.value for w in at.warning]
    assert "pytorch_model.bin" in refused[0] and "pickle" in refused[0]
    assert at.selectbox(key="model").value == "bundled:reverse"  # still opens on a toy model


@pytest.mark.parametrize("kind", FAMILIES)
def test_the_sidebar_shows_family_sizes_and_the_models_own_limit(kind, model_root):
    info = hf.describe_folder(model_root / kind)
    at = start_app(model=f"folder:{kind}")
    assert not at.error
    facts = "\n".join(t.value for t in at.text)
    assert f"Family: {FAMILIES[kind]}" in facts and "Licence: not stated" in facts
    assert f"D={info.config.d_model}, {info.config.n_heads} heads" in facts
    assert f"Reads at most {info.max_pieces} word-pieces" in facts


def test_an_unset_or_bad_setting_is_said_not_raised(monkeypatch, tmp_path):
    monkeypatch.delenv(settings.PRETRAINED_DIR_ENV)
    at = start_app()
    assert not any(o.startswith("bert (") for o in at.selectbox(key="model").options)
    monkeypatch.setenv(settings.PRETRAINED_DIR_ENV, str(tmp_path / "nowhere"))
    at = start_app()
    assert any(settings.PRETRAINED_DIR_ENV in unescape(w.value) for w in at.warning)


# ---- every view, and fill in the mask -------------------------------------------------------


@pytest.mark.parametrize("kind", FAMILIES)
def test_each_family_opens_in_every_tab_with_w_o_off(kind):
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
    at.session_state["view"] = "Attention"
    at.run()
    assert page_figures(at), "the attention view drew no chart"


@pytest.mark.parametrize("kind", FAMILIES)
def test_fill_mask_shows_five_answers_learned_then_switched(kind, model_root):
    at = start_app(model=f"folder:{kind}")
    text = at.text_input(key="sequence").value
    loaded = hf.open_folder(model_root / kind)
    assert loaded.tokenizer.specials.mask in text  # the first example asks for a word
    assert loaded.tokenizer.specials.mask in at.code[0].value.split()  # traced as the mask
    want = expected(model_root, kind, text)
    shown = answers(at)
    assert shown == [shown_words(want.learned)], shown  # one column while nothing is switched
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    switched = expected(model_root, kind, text, Interventions(w_o="identity"))
    shown = answers(at)
    assert shown == [shown_words(switched.learned), shown_words(switched.switched)], shown
    assert len(shown[0]) == len(shown[1]) == 5
    assert shown[0] != shown[1], "switching W_o off changed none of the guesses"


def test_no_mask_typed_gives_a_hint_and_a_button_that_hides_the_last_word():
    at = start_app(model="folder:bert")
    at.text_input(key="sequence").set_value("the cat sat on the mat .").run()
    assert not answers(at)
    assert any("Type [MASK] once" in unescape(i.value) for i in at.info)
    at.button(key="mask_last_word").click().run()
    assert not at.exception
    assert at.text_input(key="sequence").value == "the cat sat on the [MASK] ."
    assert len(answers(at)) == 1


# ---- a zipped model folder, uploaded --------------------------------------------------------


def zipped(folder: Path, extra: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.iterdir()):
            zf.write(path, f"model/{path.name}")
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return buffer.getvalue()


def test_a_zipped_model_folder_opens_in_this_session_only(model_root):
    at = start_app()
    at.file_uploader(key="upload").set_value(("my-roberta.zip", zipped(model_root / "roberta"),
                                              MIME)).run()  # fmt: skip
    assert not at.exception and not at.error, [e.value for e in at.error]
    picked = at.selectbox(key="model")
    assert picked.value.startswith("upload:")
    assert "my-roberta (RoBERTa, uploaded)" in picked.options
    assert "<mask>" in at.text_input(key="sequence").value
    assert len(answers(at)) == 1
    other = start_app()  # another browser tab: not there
    assert not any("uploaded" in o and "RoBERTa" in o for o in other.selectbox(key="model").options)


def test_a_zip_with_path_traversal_is_refused_with_the_librarys_message(model_root):
    at = start_app()
    data = zipped(model_root / "bert", {"../evil.txt": b"outside"})
    at.file_uploader(key="upload").set_value(("evil.zip", data, MIME)).run()
    assert not at.exception
    errors = [unescape(e.value) for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("evil.zip was not loaded: "), errors
    assert "'..' path" in errors[0]
    assert at.selectbox(key="model").value == "bundled:reverse"


def test_a_chinese_page_says_why_a_folder_and_a_zip_are_refused_in_chinese(model_root):
    """The library raises a code; the page words it in its own language (issue 30): the refused
    folder's warning and a refused zip's error are the catalogue's Chinese, shown inert."""
    from tfviz.ui.i18n import translate
    from tfviz.ui.text import md_escape

    at = start_app(lang="zh")
    with pytest.raises(hf.UnsafeFileError) as folder:
        hf.describe_folder(model_root / HOSTILE)
    why = folder.value.text("zh")
    assert "`pickle`" in why and "pytorch_model.bin" in why  # the code's Chinese, its values
    # The folder's name and the reason's values inert, the catalogue's markup (`pickle`) kept.
    said = translate(
        "zh", "folder.refused", name=md_escape(HOSTILE), why=folder.value.text("zh", md_escape)
    )
    assert [w.value for w in at.warning if HOSTILE in w.value] == [said]
    assert "`pickle`" in said and "\\`" not in said

    data = zipped(model_root / "bert", {"../evil.txt": b"outside"})
    with pytest.raises(hf.ZipRefusedError) as refused:
        hf.open_zip(data)
    at.file_uploader(key="upload").set_value(("evil.zip", data, MIME)).run()
    assert not at.exception
    said = translate(
        "zh", "uploads.refused", name=md_escape("evil.zip"), why=refused.value.text("zh", md_escape)
    )
    assert [e.value for e in at.error] == [said]
    assert "'..' path" not in unescape(said) and "`'..'`" in unescape(said)  # not the English
    assert "\\`" not in said


def test_a_zip_with_a_pickle_only_is_refused(model_root):
    at = start_app()
    data = zipped(model_root / HOSTILE)
    at.file_uploader(key="upload").set_value(("pickle.zip", data, MIME)).run()
    assert not at.exception
    errors = [unescape(e.value) for e in at.error]
    assert len(errors) == 1 and "pytorch_model.bin" in errors[0], errors


def test_fill_mask_speaks_chinese():
    from tfviz.ui.i18n import translate

    at = start_app(model="folder:distilbert", lang="zh")
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    shown = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert translate("zh", "masked.title") in unescape(shown)
    assert translate("zh", "masked.learned") in unescape(shown)
    assert len(answers(at)) == 2


def test_a_roberta_is_explained_with_its_own_specials():
    at = start_app(model="folder:roberta")
    pieces = [unescape(c.value) for c in at.caption if "as the model reads it" in c.value]
    assert len(pieces) == 1 and "<s> and </s> are not typed" in pieces[0], pieces
    assert "[CLS]" not in pieces[0]
    assert "lower-case English" not in at.text_input(key="sequence").help
    assert any("**Task:** fill in the masked word" in unescape(m.value) for m in at.markdown)
    grid = [unescape(c.value) for c in at.caption if "Rows and columns are" in c.value]
    assert len(grid) == 1 and "framed by <s> and </s>" in grid[0], grid  # the Attention tab's


def test_a_zip_over_the_upload_limit_is_refused_before_it_is_opened(model_root, monkeypatch):
    monkeypatch.setenv("TFVIZ_MAX_UPLOAD_MB", "1")
    at = start_app()
    padding = {"model/padding.bin": os.urandom(1_300_000)}  # random: deflate cannot shrink it
    data = zipped(model_root / "bert", padding)
    assert len(data) > 1024 * 1024
    at.file_uploader(key="upload").set_value(("big.zip", data, MIME)).run()
    errors = [unescape(e.value) for e in at.error]
    assert len(errors) == 1 and "uploads may be at most 1 MB" in errors[0], errors


def test_a_link_opens_a_folder_model_with_its_sentence(model_root):
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"))
    at.default_timeout = 60
    at.query_params["model"] = "folder:distilbert"
    at.query_params["sequence"] = "the dog [MASK] on the mat ."
    at.run()
    assert not at.exception and not at.error
    assert at.selectbox(key="model").value == "folder:distilbert"
    assert at.text_input(key="sequence").value == "the dog [MASK] on the mat ."
    want = expected(model_root, "distilbert", "the dog [MASK] on the mat .")
    assert answers(at) == [shown_words(want.learned)]


def test_the_shared_model_is_unchanged_by_every_tab_with_w_o_off(model_root):
    import torch

    from tfviz.ui import folders

    test_each_family_opens_in_every_tab_with_w_o_off("bert")
    sig = {name: weights for name, _, weights in folders.signature(model_root)}
    mtime, size = sig["bert"]
    shared, _, _ = folders.load_folder(
        str(model_root / "bert"), f"folder:bert:{mtime}:{size}", "cpu"
    )
    fresh = hf.open_folder(model_root / "bert").model
    assert (
        shared
        is folders.load_folder(str(model_root / "bert"), f"folder:bert:{mtime}:{size}", "cpu")[0]
    )  # once per process
    for (name, a), (_, b) in zip(
        shared.state_dict().items(), fresh.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


# ---- the listing's signature: a sharded folder is watched too --------------------------------


def _fake_sharded(folder: Path, shards: dict[str, bytes]) -> None:
    """A folder laid out as a sharded checkpoint (config, index, shards); only stat'ed here."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
    where = {f"t{n}": name for n, name in enumerate(shards)}
    (folder / hf.files.WEIGHTS_INDEX).write_text(json.dumps({"weight_map": where}))
    for name, data in shards.items():
        (folder / name).write_bytes(data)


def test_the_signature_changes_when_a_shard_changes(tmp_path):
    from tfviz.ui import folders

    a, b = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    _fake_sharded(tmp_path / "big", {a: b"x" * 10, b: b"y" * 20})
    before = folders.signature(tmp_path)
    assert before == folders.signature(tmp_path)  # unchanged: not read again
    (tmp_path / "big" / b).write_bytes(b"z" * 21)  # a shard replaced (new size)
    resized = folders.signature(tmp_path)
    assert resized != before
    shard = tmp_path / "big" / b
    shard.write_bytes(b"w" * 21)  # same size, only its time tells
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))
    assert folders.signature(tmp_path) != resized
    retimed = folders.signature(tmp_path)
    index = tmp_path / "big" / hf.files.WEIGHTS_INDEX
    index.write_text(index.read_text() + " ")  # the index rewritten
    assert folders.signature(tmp_path) != retimed
    # The digest of the model follows: a new stamp is a new model for load_folder's cache.
    keys = {folders.stamp_key(s[0][2]) for s in (before, resized, retimed)}
    assert len(keys) == 3
    # One model.safetensors wins over an index beside it, as in hf.shards.weight_files.
    (tmp_path / "big" / hf.files.WEIGHTS).write_bytes(b"w" * 5)
    ((name, _, stamp),) = folders.signature(tmp_path)
    assert name == "big" and stamp[1] == 5 and folders.stamp_key(stamp).endswith(":5")


def test_a_sharded_model_in_the_server_folder_gets_a_new_digest_when_a_shard_changes(
    tmp_path, monkeypatch
):
    from tfviz.ui import folders

    root = tmp_path / "served"
    ref = _build("bert", root / "sharded")
    (root / "sharded" / hf.files.WEIGHTS).unlink()
    ref.save_pretrained(root / "sharded", safe_serialization=True, max_shard_size="20KB")
    monkeypatch.setenv(settings.PRETRAINED_DIR_ENV, str(root))
    problems: list[str] = []

    def served() -> list:  # the server folder's entries (the bundled language models aside)
        return [e for e in folders.folder_entries(problems) if e.key.startswith("folder:")]

    (entry,) = served()
    assert not problems and entry.key == "folder:sharded" and entry.family == "BERT"
    shard = sorted((root / "sharded").glob("model-*-of-*.safetensors"))[-1]
    st = shard.stat()
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # rewritten in place
    (again,) = served()
    assert again.digest != entry.digest
