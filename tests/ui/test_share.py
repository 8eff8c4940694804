"""Issue #10: shareable links, the language of the page, exports and colour-blind-safe scales.

The link's parsing is tested as the pure functions it is (tfviz.ui.share): a good query gives
its values, every bad or hostile one gives the default and a notice, and what the app writes is
what it reads back. Then the app itself through AppTest: opening a link restores the model, the
sequence, the W_o switch, the zeroed heads, the tab and the language; a hostile link opens the
default page with notices; the query follows every change. Then the CSV exports, the charts'
download settings, and the colour scales under simulated colour-vision deficiency.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import APP
from tfviz import get_task, plots
from tfviz.core.config import ModelConfig
from tfviz.core.interventions import NONE, switches
from tfviz.hf import pretrained
from tfviz.plots import export
from tfviz.ui import help as help_texts
from tfviz.ui import kinds, share
from tfviz.ui.i18n import LANGUAGES, translate
from tfviz.ui.labels import describe
from tfviz.ui.switches import EVERY_LAYER, Switches, w_o_label
from tfviz.ui.text import md_escape
from tfviz.ui.widgets import chart_file_name

VIEWS = ("attention", "w_o", "w_o_off", "parts", "train", "analysis", "experiment", "lessons")
STEPS = (1, 2, 3, 4)


def parse_link(**query) -> share.Shared:
    return share.parse_query(query, views=VIEWS, steps=STEPS)


def reasons(shared: share.Shared) -> list[tuple[str, str]]:
    return [(n.param, n.reason) for n in shared.notices]


# ---- parsing: good links --------------------------------------------------------------------


def test_a_good_link_gives_every_value_and_no_notice():
    shared = parse_link(
        model="bundled:sum",
        sequence="31415926",
        w_o_mode="rank:3",
        w_o_scope="1",
        ablate="L0H1,L1H3,L0H1",
        view="lessons",
        step="3",
        lang="zh",
    )
    assert shared.notices == ()
    assert (shared.model, shared.sequence) == ("bundled:sum", "31415926")
    # A head named twice is zeroed once.
    assert shared.switches == Switches("rank:3", 1, ("L0H1", "L1H3"))
    assert (shared.view, shared.step, shared.lang) == ("lessons", 3, "zh")
    assert parse_link() == share.Shared()  # no query: every default
    # A language written by its own name (as a person might type it) is read too.
    assert parse_link(lang="中文").lang == "zh" and parse_link(lang="English").lang == "en"


@pytest.mark.parametrize(
    "iv",
    [NONE, switches("identity"), switches("zero", 1, [(0, 2)]), switches("rank:5", 0)],
    ids=["learned", "identity", "zero-in-L1-with-a-head", "rank-in-L0"],
)
def test_what_the_app_writes_it_reads_back(iv):
    query = share.query_of(
        model="bundled:reverse",
        sequence="a b&c=d?#é",
        sentence_b=None,
        interventions=iv,
        view="lessons",
        step=2,
        lang="zh",
    )
    # Through a real query string, as the browser sends it.
    from urllib.parse import parse_qs, urlencode

    shared = share.parse_query(parse_qs(urlencode(query)), views=VIEWS, steps=STEPS)
    assert shared.notices == ()
    assert (shared.model, shared.sequence, shared.view, shared.step, shared.lang) == (
        "bundled:reverse",
        "a b&c=d?#é",
        "lessons",
        2,
        "zh",
    )
    # A link without switches names none: the sidebar's defaults.
    assert (shared.switches or Switches()).interventions == iv
    if iv == NONE:  # defaults stay out of the link
        assert set(query) == {"model", "sequence", "view", "step", "lang"}
    english = share.query_of(
        model="m", sequence=None, sentence_b=None, interventions=iv, view=None, step=None
    )
    assert "lang" not in english and "sequence" not in english


def test_the_step_is_written_only_for_the_lessons_tab():
    common = dict(model="m", sequence="s", sentence_b=None, interventions=NONE, step=3)
    assert "step" not in share.query_of(view="attention", **common)
    assert share.query_of(view="lessons", **common)["step"] == "3"


# ---- parsing: bad and hostile links ---------------------------------------------------------

HUGE = "9" * 100_000


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"w_o_mode": "rank:0"}, ("w_o_mode", "bad_mode")),
        ({"w_o_mode": "rank:abc"}, ("w_o_mode", "bad_mode")),
        ({"w_o_mode": "rank:-2"}, ("w_o_mode", "bad_mode")),
        ({"w_o_mode": "rank:٣"}, ("w_o_mode", "bad_mode")),  # an Arabic-Indic digit
        ({"w_o_mode": "rank:" + HUGE[:90]}, None),  # long but valid: the model refuses it
        ({"w_o_mode": "rank:" + HUGE}, ("w_o_mode", "too_long")),
        ({"w_o_mode": "<script>alert(1)</script>"}, ("w_o_mode", "bad_mode")),
        ({"w_o_mode": "Identity"}, ("w_o_mode", "bad_mode")),
        ({"w_o_scope": "one"}, ("w_o_scope", "bad_layer")),
        ({"w_o_scope": "-1"}, ("w_o_scope", "bad_layer")),
        ({"w_o_scope": "²"}, ("w_o_scope", "bad_layer")),
        ({"ablate": "H3"}, ("ablate", "bad_head")),
        ({"ablate": "L-1H0"}, ("ablate", "bad_head")),
        ({"ablate": "L0H+1"}, None),  # int() reads "+1": head 1, written back as L0H1
        ({"ablate": "<b>L0H1</b>"}, ("ablate", "bad_head")),
        ({"ablate": "L0H1;rm -rf /"}, ("ablate", "bad_head")),
        ({"view": "../../etc/passwd"}, ("view", "unknown_view")),
        ({"view": "Attention"}, ("view", "unknown_view")),  # labels are not module names
        ({"view": "注意力"}, ("view", "unknown_view")),
        ({"w_o_mode": "恒等"}, ("w_o_mode", "bad_mode")),
        ({"ablate": "L０H１"}, ("ablate", "bad_head")),  # full-width digits
        ({"step": "5"}, ("step", "bad_step")),
        ({"step": "1.5"}, ("step", "bad_step")),
        ({"step": "０"}, ("step", "bad_step")),  # a full-width zero
        ({"lang": "fr"}, ("lang", "unknown_lang")),
        ({"lang": "français"}, ("lang", "unknown_lang")),
        ({"lang": "ZH"}, ("lang", "unknown_lang")),
        ({"model": ["bundled:sum", "bundled:sort"]}, ("model", "repeated")),
        ({"model": "x" * 101}, ("model", "too_long")),
        ({"sequence": HUGE}, ("sequence", "too_long")),
        ({"sequence": "abc\x00def"}, ("sequence", "control")),
        ({"sequence": "abc\u202edef"}, ("sequence", "control")),  # right-to-left override
        ({"view": "w_o\n"}, ("view", "control")),
    ],
)
def test_a_bad_value_gives_the_default_and_a_notice(query, expected):
    shared = share.parse_query(query, views=VIEWS, steps=STEPS)
    if expected is None:
        assert shared.notices == ()
        return
    assert reasons(shared) == [expected]
    param = expected[0]
    if param in ("w_o_mode", "w_o_scope", "ablate"):  # the switch keeps its default
        kept = {"w_o_mode": "mode", "w_o_scope": "layer", "ablate": "ablate"}[param]
        default = getattr(Switches(), kept)
        assert getattr(shared.switches, kept) == default, f"{param} was kept: {shared.switches}"
    else:
        assert getattr(shared, param) in (None, ()), f"{param} was kept: {getattr(shared, param)!r}"


def test_good_values_survive_beside_bad_ones_and_unknown_keys_get_one_notice():
    shared = parse_link(
        model="bundled:sum", w_o_mode="rank:0", ablate="L0H1,L9", heads="3", utm_source="mail"
    )
    assert shared.model == "bundled:sum" and shared.switches == Switches(ablate=("L0H1",))
    assert reasons(shared) == [
        ("", "unknown_key"),
        ("w_o_mode", "bad_mode"),
        ("ablate", "bad_head"),
    ]
    unknown = shared.notices[0]
    assert unknown.value == "heads, utm_source"
    text = share.notice_text(unknown, lang="en")
    assert "heads, utm_source" in text and "model, sequence" in text  # what a link can set
    assert parse_link(model="bundled:sum").notices == ()


def test_a_link_carries_as_long_a_sentence_as_a_box_takes():
    limit = kinds.MAX_SENTENCE_CHARS
    assert share.MAX_TEXT_CHARS == limit
    longest = "word " * (limit // 5)
    assert len(longest) == limit
    shared = parse_link(sequence=longest, sentence_b=longest)
    assert shared.notices == () and shared.sequence == longest and shared.sentence_b == longest
    assert reasons(parse_link(sequence=longest + "x")) == [("sequence", "too_long")]
    for lang in LANGUAGES:  # said where the student types
        assert f"{limit:,}" in translate(lang, "minilm.box_limit", limit=f"{limit:,}")


def test_the_models_and_the_model_s_sizes_are_checked():
    shared = share.check_model(parse_link(model="bundled:nope"), {"bundled:sum"})
    assert shared.model is None and reasons(shared) == [("model", "unknown_model")]
    shared = share.check_model(parse_link(model="upload:" + "ab" * 32), {"bundled:sum"})
    assert shared.model is None and reasons(shared) == [("model", "upload")]
    assert (
        share.check_model(parse_link(model="bundled:sum"), {"bundled:sum"}).model == "bundled:sum"
    )

    task = get_task("reverse")
    linked = parse_link(
        sequence="not in the alphabet!",
        sentence_b="a second sentence",
        w_o_mode="rank:17",
        w_o_scope="2",
        ablate="L99H99,L1H3,L0H4",
    )
    config = ModelConfig(vocab_size=12, n_out=5, d_model=16, n_heads=4, n_layers=2)
    fitted = share.fit_to_model(linked, config=config, validate=task.validate, sentences=False)
    assert (fitted.sequence, fitted.sentence_b) == (None, None)
    assert fitted.switches == Switches("learned", None, ("L1H3",))
    assert sorted(reasons(fitted)) == sorted(
        [
            ("w_o_mode", "rank_too_large"),
            ("w_o_scope", "bad_layer"),
            ("ablate", "bad_head"),
            ("ablate", "bad_head"),
            ("sequence", "bad_sequence"),
            ("sentence_b", "not_for_model"),
        ]
    )
    bad_sequence = [n for n in fitted.notices if n.reason == "bad_sequence"][0]
    # The task's own reason is passed on, worded in the language the notice is shown in: no
    # English sentence inside a Chinese notice.
    english, chinese = (share.notice_text(bad_sequence, lang) for lang in ("en", "zh"))
    assert str(bad_sequence.detail) in english
    assert "characters" not in chinese and "个字符" in chinese, chinese
    kept = share.fit_to_model(
        parse_link(w_o_mode="rank:16", w_o_scope="1", sequence=task.examples[0]),
        config=config,
        validate=task.validate,
        sentences=False,
    )
    assert kept.notices == () and kept.switches == Switches("rank:16", 1)


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_every_notice_reads_in_both_languages_and_quotes_the_value_safely(lang):
    for reason in share.REASONS:
        notice = share.Notice("sequence", reason, "<script>\x00" + "x" * 500, "why")
        text = share.notice_text(notice, lang=lang)
        assert "⟦" not in text, f"{reason}: missing from the {lang} catalogue"
        assert "\x00" not in text and "x" * share.SHOWN_CHARS not in text
    assert share.shown_value("a\x00b") == "a\ufffdb"


# ---- the app: a link restores the view; a bad link gives notices; the query follows ---------


def open_link(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def open_module(at: AppTest) -> str:
    """The module of the open tab, from the tabs' state (its label in the page's language)."""
    label = at.session_state["view"]
    for lang in LANGUAGES:
        for module in VIEWS:
            if translate(lang, f"app.view.{module}") == label:
                return module
    raise AssertionError(f"no tab is labelled {label!r}")


@pytest.mark.usefixtures("fresh_app")
def test_a_link_restores_model_sequence_switches_tab_and_language():
    at = open_link(
        model="bundled:sum",
        sequence="12345",
        w_o_mode="rank:2",
        w_o_scope="1",
        ablate="L0H1,L1H0",
        view="w_o_off",
        lang="zh",
    )
    assert at.selectbox(key="model").value == "bundled:sum"
    assert at.text_input(key="sequence").value == "12345"
    assert at.radio(key="w_o_mode").value == "rank" and at.number_input(key="w_o_rank").value == 2
    assert at.selectbox(key="w_o_scope").value == 1
    assert at.multiselect(key="ablate").value == ["L0H1", "L1H0"]
    assert open_module(at) == "w_o_off" and at.session_state["view"] == "关闭 W_o：对比"
    assert at.header[0].value == translate("zh", "app.title")
    assert not at.warning  # nothing refused
    # The switched prediction is the one of the linked switches (w_o_off shows both answers).
    switched = translate(
        "zh", "common.describe.layer", mode=translate("zh", "common.w_o.rank", k=2), layer=1
    )
    assert md_escape(switched) in "\n".join(c.value for c in at.caption)
    link = [c.value for c in at.code if c.value.startswith("?")][0]
    for part in ("model=bundled%3Asum", "sequence=12345", "w_o_mode=rank%3A2", "w_o_scope=1"):
        assert part in link
    assert "ablate=L0H1%2CL1H0" in link and "view=w_o_off" in link and "lang=zh" in link


@pytest.mark.usefixtures("fresh_app")
def test_a_link_into_a_lesson_step_opens_it():
    at = open_link(view="lessons", step="2")
    assert open_module(at) == "lessons" and at.selectbox(key="lesson_step").value == 2
    assert at.query_params["step"] == ["2"] or at.query_params["step"] == "2"


@pytest.mark.usefixtures("fresh_app")
def test_a_hostile_link_opens_the_default_page_with_a_notice_for_each_bad_value():
    at = open_link(
        model="<script>alert('x')</script>",
        sequence="A" * 5000,
        w_o_mode="rank:abc",
        w_o_scope="99",
        ablate="L99H99",
        view="nope",
        step="0",
        lang="xx",
    )
    assert at.selectbox(key="model").value == "bundled:reverse"
    assert at.text_input(key="sequence").value == get_task("reverse").examples[0]
    assert at.radio(key="w_o_mode").value == "learned"
    assert (
        at.selectbox(key="w_o_scope").value == EVERY_LAYER
        and at.multiselect(key="ablate").value == []
    )
    assert open_module(at) == "attention"
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 8, warnings
    assert not at.error
    assert any(r"\<script\>" in w for w in warnings)  # quoted, escaped, never rendered
    # The address is rewritten to the page shown: the bad values are gone.
    assert at.query_params["model"] in ("bundled:reverse", ["bundled:reverse"])
    for key in ("w_o_mode", "w_o_scope", "ablate"):
        assert key not in at.query_params
    at.button(key="share_dismiss").click().run()
    assert not at.warning


@pytest.mark.usefixtures("fresh_app")
def test_a_sequence_the_model_refuses_falls_back_to_its_first_example():
    at = open_link(model="bundled:reverse", sequence="<b>0123</b>")
    assert at.text_input(key="sequence").value == get_task("reverse").examples[0]
    assert len(at.warning) == 1 and not at.error


def page_query(at: AppTest) -> dict[str, str]:
    return {k: at.query_params[k] for k in at.query_params}


@pytest.mark.usefixtures("fresh_app")
def test_the_query_follows_every_change():
    at = open_link()
    first = page_query(at)
    assert first["model"] == "bundled:reverse" and first["view"] == "attention"
    at.text_input(key="sequence").set_value("jjiihh").run()
    assert page_query(at)["sequence"] == "jjiihh"
    at.radio(key="w_o_mode").set_value("identity").run()
    at.selectbox(key="w_o_scope").set_value(1).run()
    at.multiselect(key="ablate").set_value(["L0H2"]).run()
    now = page_query(at)
    assert (now["w_o_mode"], now["w_o_scope"], now["ablate"]) == ("identity", "1", "L0H2")
    at.session_state["view"] = translate("en", "app.view.lessons")
    at.run()
    at.button(key="lesson_next").click().run()
    assert (page_query(at)["view"], page_query(at)["step"]) == ("lessons", "2")
    at.radio(key="w_o_mode").set_value("learned").run()
    assert "w_o_mode" not in page_query(at) and "w_o_scope" not in page_query(at)
    at.selectbox(key="model").set_value("bundled:sum").run()
    assert page_query(at)["model"] == "bundled:sum"
    assert page_query(at)["sequence"] == get_task("sum").examples[0]
    assert not at.exception


@pytest.mark.usefixtures("fresh_app")
def test_a_language_switch_keeps_the_open_tab_and_translates_the_page():
    at = open_link(view="train")
    assert open_module(at) == "train"
    at.session_state["lang"] = "zh"  # what choosing 中文 in the picker stores
    at.run()
    assert not at.exception
    assert open_module(at) == "train" and at.session_state["view"] == "训练"
    assert at.header[0].value == translate("zh", "app.title")
    sidebar = "\n".join(t.value for t in at.sidebar.text)
    assert "设备：" in sidebar and "规模：" in sidebar


@pytest.mark.usefixtures("fresh_app")
def test_a_link_to_the_sentence_model_restores_both_sentences():
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    at = open_link(
        model="pretrained:all-MiniLM-L6-v2",
        sequence="The cat sat on the mat.",
        sentence_b="A dog slept.",
    )
    assert at.selectbox(key="model").value == "pretrained:all-MiniLM-L6-v2", "link did not open it"
    assert at.text_input(key="sequence").value == "The cat sat on the mat."
    assert at.text_input(key="sentence_b").value == "A dog slept."
    assert page_query(at)["sentence_b"] == "A dog slept."


@pytest.mark.usefixtures("fresh_app")
def test_a_link_with_a_long_sentence_restores_it_and_the_box_says_the_limit():
    long_sentence = "The cat sat on the mat and looked at the dog. " * 60  # 2,760 characters
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    at = open_link(model="pretrained:all-MiniLM-L6-v2", sequence=long_sentence, sentence_b="A.")
    assert at.selectbox(key="model").value == "pretrained:all-MiniLM-L6-v2", "link did not open it"
    assert not at.warning or all("too_long" not in w.value for w in at.warning)
    assert at.text_input(key="sequence").value == long_sentence
    assert page_query(at)["sequence"] == long_sentence  # and the address keeps it
    limit = f"{kinds.MAX_SENTENCE_CHARS:,}"
    for key in ("sequence", "sentence_b"):
        assert limit in at.text_input(key=key).help
    # One character more than a box takes: refused with a message naming the limit.
    at.text_input(key="sequence").set_value("a" * (kinds.MAX_SENTENCE_CHARS + 1)).run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and limit in errors[0], errors


@pytest.mark.usefixtures("fresh_app")
@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_keys_a_link_cannot_set_get_a_note_and_leave_the_address(lang):
    at = open_link(heads="3", model="bundled:sum", lang=lang, **{"www.evil.example": "1"})
    assert at.selectbox(key="model").value == "bundled:sum"
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1, warnings
    shown = warnings[0].replace("\\", "")
    assert "heads" in shown and "www\u2060.evil.example" in shown  # quoted inert
    kept = page_query(at)
    assert "heads" not in kept and "www.evil.example" not in kept
    assert kept["model"] == "bundled:sum"


# ---- exports --------------------------------------------------------------------------------


@pytest.mark.usefixtures("fresh_app")
def test_every_chart_saves_png_or_svg_named_after_model_and_chart():
    at = open_link(model="bundled:sort", view="w_o")  # plotly charts (Attention's: a canvas)
    configs = [json.loads(c.proto.config) for c in at.get("plotly_chart")]
    assert configs
    for config in configs:
        options = config["toImageButtonOptions"]
        assert options["format"] == "png"
        assert options["filename"].startswith("tfviz_sort_")
    at.segmented_control(key="chart_format").set_value("svg").run()
    configs = [json.loads(c.proto.config) for c in at.get("plotly_chart")]
    assert {c["toImageButtonOptions"]["format"] for c in configs} == {"svg"}


def download_page():
    """The two CSV buttons the Before/after W_o and W_o off views show, on the bundled reverse
    model with W_o switched off."""
    from dataclasses import replace

    from tfviz import get_task
    from tfviz.core.interventions import NONE, switches
    from tfviz.ui.compute import trace_for
    from tfviz.ui.downloads import download_before_after, download_comparison
    from tfviz.ui.kinds import kind_of
    from tfviz.ui.models import BUNDLED_DIR, ModelEntry, file_sha256, load_model
    from tfviz.ui.view import View

    path = str(BUNDLED_DIR / "reverse.safetensors")
    digest = file_sha256(path, 0, 0)
    model, meta, _ = load_model(path, digest, "cpu")
    entry = ModelEntry("bundled:reverse", "reverse", "bundled", path, digest)
    iv = switches("identity")
    task = get_task("reverse")
    kind = kind_of(task)
    view = View(entry=entry, model=model, meta=meta, task=task, interventions=iv, kind=kind)
    text = view.task.examples[0]
    view = replace(
        view, text=text, trace=trace_for(view, text, iv), base=trace_for(view, text, NONE)
    )
    download_before_after(view)
    download_comparison(view)


@pytest.mark.usefixtures("fresh_app")
def test_the_views_csv_buttons_are_labelled_in_the_student_s_language():
    for lang in LANGUAGES:
        at = AppTest.from_function(download_page, default_timeout=60)
        at.session_state["lang"] = lang
        at.run()
        assert not at.exception, at.exception
        buttons = at.get("download_button")
        assert [b.proto.label for b in buttons] == [
            translate(lang, "common.download.before_after"),
            translate(lang, "common.download.comparison"),
        ]


def test_chart_file_names_are_plain_whatever_the_model_is_called():
    assert chart_file_name("attention_grid", "bundled:reverse") == "tfviz_reverse_attention_grid"
    name = chart_file_name("w_o", 'yours:../../"evil"<script>名字')
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
    assert name.startswith("tfviz_") and name.endswith("_w_o")
    assert len(chart_file_name("k", "yours:" + "x" * 500)) <= 80


def rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_before_after_csv_holds_every_layer_token_and_dimension():
    rng = np.random.default_rng(0)
    concat, attn_out = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    table = rows(export.before_after_csv(concat, attn_out, ["a", "b", "c"], n_heads=2))
    assert len(table) == 2 * 3 * 4
    row = table[1 * 12 + 2 * 4 + 3]  # layer 1, token c, dim 3: head 1 (dims 2, 3)
    assert (row["layer"], row["token"], row["dim"], row["head"]) == ("1", "c", "3", "1")
    assert float(row["concat"]) == pytest.approx(concat[1, 2, 3], rel=1e-5)
    assert float(row["attn_out"]) == pytest.approx(attn_out[1, 2, 3], rel=1e-5)
    with pytest.raises(ValueError, match="split into 3 heads"):
        export.before_after_csv(concat, attn_out, ["a", "b", "c"], n_heads=3)
    with pytest.raises(ValueError, match="2 labels"):
        export.before_after_csv(concat, attn_out, ["a", "b"], n_heads=2)
    with pytest.raises(ValueError, match="both be"):
        export.before_after_csv(concat, attn_out[:1], ["a", "b", "c"], n_heads=2)


def test_the_comparison_csv_holds_both_streams_and_their_difference():
    learned = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    switched = learned * 2
    table = rows(export.comparison_csv(learned, switched, ['"q"', "b,c", "d"]))
    assert len(table) == 12
    row = table[4 + 1]  # token 1, dim 1
    assert row["token"] == "b,c"  # quoted by the CSV writer, read back whole
    assert (float(row["learned"]), float(row["switched"]), float(row["difference"])) == (5, 10, 5)
    with pytest.raises(ValueError, match="both residual streams"):
        export.comparison_csv(learned, switched[..., :2], ["a", "b", "c"])


# ---- text in both languages -----------------------------------------------------------------


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_every_w_o_mode_is_named_and_described_in_both_languages(lang):
    for mode in ("learned", "identity", "zero", "block_diagonal", "rank:1", "rank:384"):
        assert "⟦" not in w_o_label(mode, lang=lang)
    assert w_o_label("rank:7", lang=lang) == translate(lang, "common.w_o.rank", k=7)


def test_describe_names_every_switch():
    text = describe(switches("rank:3", 1, [(0, 1), (1, 2)]))
    assert text == "W_o rank 3 (truncated SVD) in layer 1; zeroed L0H1, L1H2"
    assert describe(switches("block_diagonal")).startswith("W_o block-diagonal")
    assert describe(NONE) == "learned W_o"


def test_every_task_is_described_in_both_languages():
    from tfviz.core.tasks import list_tasks
    from tfviz.hf.pretrained import SentenceTask
    from tfviz.ui.i18n import catalogue

    for name in [*list_tasks(), SentenceTask.name]:
        key = f"task.{name.replace(' ', '_')}.description"
        for lang in LANGUAGES:
            assert key in catalogue(lang), (lang, key)
    assert translate("en", "task.sort.description") == get_task("sort").description


def test_help_texts_exist_in_both_languages_and_name_their_papers_in_each():
    for topic in help_texts.TOPICS:
        en, zh = (translate(lang, f"help.{topic}") for lang in ("en", "zh"))
        assert len(en) > 100 and len(zh) > 50
        for name in ("Kobayashi", "Abnar", "Michel", "Elhage"):
            assert (name in en) == (name in zh), (topic, name)
    assert help_texts.HELP["w_o_mixing"] == translate("en", "help.w_o_mixing")
    assert list(help_texts.HELP) == list(help_texts.TOPICS)
    with pytest.raises(KeyError):
        help_texts.HELP["no_such_topic"]


# ---- colour scales under simulated colour-vision deficiency ---------------------------------

# Machado, Oliveira & Fernandes (2009), severity 1.0, applied to linear RGB.
CVD = {
    "normal": np.eye(3),
    "protanopia": np.array(
        [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ]
    ),
    "deuteranopia": np.array(
        [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.011820, 0.042940, 0.968881],
        ]
    ),
    "tritanopia": np.array(
        [
            [1.255528, -0.076749, -0.178779],
            [-0.078411, 0.930809, 0.147602],
            [0.004733, 0.691367, 0.303900],
        ]
    ),
}


def rgb(colour: str) -> np.ndarray:
    if colour.startswith("#"):
        return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)
    return np.array([float(v) for v in colour[colour.index("(") + 1 : -1].split(",")])


def colours_at(scale: list, xs: np.ndarray) -> np.ndarray:
    stops = np.array([s for s, _ in scale])
    values = np.array([rgb(c) for _, c in scale])
    return np.stack([np.interp(xs, stops, values[:, i]) for i in range(3)], axis=-1)


def lab(colours: np.ndarray, kind: str) -> np.ndarray:
    """CIELAB of sRGB colours (0..255) as seen with a colour-vision deficiency."""
    c = colours / 255
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    linear = np.clip(linear @ CVD[kind].T, 0, 1)
    xyz = (
        linear
        @ np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]).T
    )
    f = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(f > 0.008856, np.cbrt(f), 7.787 * f + 16 / 116)
    return np.stack(
        [116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=-1
    )


@pytest.mark.parametrize("kind", list(CVD))
def test_the_sequential_scale_gets_darker_steadily_in_every_kind_of_vision(kind):
    colours = lab(colours_at(plots.SEQUENTIAL_SCALE, np.linspace(0, 1, 101)), kind)
    lightness = colours[:, 0]
    assert lightness[0] > 99 and lightness[-1] < 25  # white for 0, dark for the top
    assert (np.diff(lightness) < 0).all(), "lightness must fall all the way: darker = more"


@pytest.mark.parametrize("kind", list(CVD))
def test_the_diverging_scale_keeps_the_sign_readable_in_every_kind_of_vision(kind):
    xs = np.linspace(0.05, 0.5, 10)  # distance from the centre, as a share of the range
    positive = lab(colours_at(plots.DIVERGING_SCALE, 0.5 + xs), kind)
    negative = lab(colours_at(plots.DIVERGING_SCALE, 0.5 - xs), kind)
    difference = np.linalg.norm(positive - negative, axis=1)  # CIE76 colour difference
    # From a fifth of the range on, +x and -x differ clearly (a just-noticeable step is ~2.3).
    assert (difference[xs >= 0.2] > 15).all(), difference
    centre = lab(colours_at(plots.DIVERGING_SCALE, np.array([0.5])), kind)[0]
    assert centre[0] > 95  # zero is (nearly) white


def test_every_heatmap_uses_the_accessible_scales():
    rng = np.random.default_rng(0)
    labels = list("abc")
    figures = [
        plots.attention_grid(rng.dirichlet(np.ones(3), size=(2, 2, 3)), labels),
        plots.attention_map(rng.dirichlet(np.ones(3), size=3), labels),
        plots.activation_map(rng.normal(size=(3, 4)), labels, n_heads=2),
        plots.w_o_matrix(rng.normal(size=(4, 4)), 2),
        plots.head_score_map(rng.normal(size=(2, 2))),
        plots.head_shares_map(rng.dirichlet(np.ones(2), size=4)),
        plots.dependency_map(np.abs(rng.normal(size=(4, 2)))),
    ]
    sequential = [list(s) for s in plotly_scale(plots.SEQUENTIAL_SCALE)]
    diverging = [list(s) for s in plotly_scale(plots.DIVERGING_SCALE)]
    for fig in figures:
        scale = [list(s) for s in fig.layout.coloraxis.colorscale]
        assert scale in (sequential, diverging), fig.layout.title.text


def plotly_scale(scale: list) -> tuple:
    import plotly.graph_objects as go

    return go.Figure(layout=dict(coloraxis=dict(colorscale=scale))).layout.coloraxis.colorscale
