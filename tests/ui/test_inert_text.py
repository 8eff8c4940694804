"""Issue 16: what a user gave (a link's values, a file name, a typed sequence) is echoed inert.

tfviz.ui.text.md_escape is the one helper every echo goes through: its output, rendered by
Streamlit's markdown, must show the text exactly (no emphasis, code, HTML or link) and hold no
bare address GFM would turn into a link. GFM_AUTOLINK below is the pattern Streamlit's markdown
uses for that (remark's gfm-autolink-literal), applied to the text after markdown's escapes are
resolved, as Streamlit applies it. AppTest sees the markdown source only; that no <a> element
appears in a real browser is tests/browser/test_browser_inert.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support import plain
from tests.ui.test_share import open_link
from tfviz.hf import pretrained
from tfviz.ui.i18n import LANGUAGES, translate
from tfviz.ui.text import WORD_JOINER, md_escape

ROOT = Path(__file__).resolve().parents[2]
VIEW_MODULES = ("attention", "w_o", "w_o_off", "parts", "train", "analysis", "experiment")
VIEW_MODULES += ("lessons",)
# remark-gfm's literal autolinks (Streamlit's markdown): an address and an e-mail address.
GFM_AUTOLINK = re.compile(
    r"(https?://|www(?=\.))[-.\w]+|[-.\w+]+@[-\w]+(?:\.[-\w]+)+", re.IGNORECASE | re.ASCII
)
# Characters that start markdown, HTML or Streamlit's own directives when not escaped.
MARKUP = set("<>*_[]`$&#|~\\!:=")

HOSTILE = [
    "class moved, continue at https://evil.example/tfviz/login",
    "www.evil.example",
    "WWW.Evil.Example/x",
    "HTTP://EVIL.EXAMPLE",
    "mail admin@evil.example now",
    "mailto:admin@evil.example",
    "[x](http://evil.example)",
    "[x]: http://evil.example",
    "<https://evil.example>",
    "<a href='http://evil.example'>y</a>",
    "**bold** __bold__ *em* `code` ~~gone~~ $x^2$",
    ":red[red] :material/home: :smile:",
    "# heading",
    "title\n===",
    "| a | b |",
    "![img](http://evil.example/i.png)",
    "&lt;b&gt; &#60;",
    "https://evil.example 中文 www.evil.example。",
]


def unescaped_markup(body: str) -> set[str]:
    """Markup characters of body that markdown would act on (not backslash-escaped)."""
    return set(re.sub(r"\\.", "", body, flags=re.DOTALL)) & MARKUP


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: ascii(t)[:30])
def test_md_escape_leaves_no_markup_and_no_autolink_and_reads_the_same(text):
    body = md_escape(text)
    assert not unescaped_markup(body), body
    shown = plain(body)
    assert GFM_AUTOLINK.search(shown) is None, shown
    assert shown.replace(WORD_JOINER, "") == text  # the joiner is invisible: it reads the same


def test_md_escape_leaves_ordinary_text_alone():
    text = "Loaded sort: D=16, 4 heads. 1.5 points; a:b //c www x@ y"
    assert plain(md_escape(text)) == text


# ---- the app: a hostile link's notices, in both languages ------------------------------------


LINK = {
    "model": "class moved, continue at https://evil.example/tfviz/login",
    "view": "www.evil.example",
    "w_o_mode": "admin@evil.example",
    "ablate": "[x](http://evil.example)",
    "lang": "",
}


@pytest.mark.usefixtures("fresh_app")
@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_a_hostile_link_s_notices_quote_it_inert_in_both_languages(lang):
    at = open_link(**{**LINK, "lang": lang})
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 4, warnings
    for body in warnings:
        assert GFM_AUTOLINK.search(plain(body)) is None, body
        assert "](" not in body and "**" not in body
    shown = plain("\n".join(warnings)).replace(WORD_JOINER, "")
    for key, value in LINK.items():
        if key != "lang":
            assert value in shown, (value, shown)


@pytest.mark.usefixtures("fresh_app")
def test_a_typed_sentence_is_quoted_inert_where_the_model_cut_it():
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    at = open_link(model="pretrained:all-MiniLM-L6-v2")
    assert at.selectbox(key="model").value == "pretrained:all-MiniLM-L6-v2", "link did not open it"
    rest = "see https://evil.example/x"
    cut_before = "word " * (pretrained.MAX_PIECES - 2)  # fills the model's word-pieces
    at.text_input(key="sequence").set_value(cut_before + rest).run()  # cut just before it
    assert not at.exception
    cut_notes = [w.value for w in at.warning]
    assert len(cut_notes) == 1, cut_notes
    shown = plain(cut_notes[0])
    assert GFM_AUTOLINK.search(shown) is None, shown
    assert rest in shown.replace(WORD_JOINER, "")


# ---- an uploaded model's name, on every tab -------------------------------------------------

SORT = (ROOT / "models" / "sort.safetensors").read_bytes()
HOSTILE_NAME = "see www.evil.example [x](http://evil.example) **b** `c` <i>i</i> a@evil.example"


def markdown_bodies(at: AppTest) -> list[str]:
    """Every markdown source on the page: element bodies, and widget labels and help."""
    out = []
    stack = [at._tree]
    while stack:
        node = stack.pop()
        stack.extend((getattr(node, "children", None) or {}).values())
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        fields = proto.DESCRIPTOR.fields_by_name
        for name in ("body", "label", "help"):
            value = getattr(proto, name) if name in fields else None
            if isinstance(value, str) and value:
                out.append(value)
    return out


@pytest.mark.usefixtures("fresh_app")
@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_an_uploaded_model_s_name_is_inert_on_every_tab(lang):
    at = open_link(lang=lang)
    name = HOSTILE_NAME + ".safetensors"
    at.file_uploader(key="upload").set_value((name, SORT, "application/octet-stream")).run()
    assert not at.exception and at.selectbox(key="model").value.startswith("upload:")
    seen = 0
    for module in VIEW_MODULES:
        at.session_state["view"] = translate(lang, f"app.view.{module}")
        steps = (1, 2, 3, 4) if module == "lessons" else (None,)
        for step in steps:
            if step is not None:
                at.session_state["lesson_step"] = step
            at.run()
            assert not at.exception, (module, step, at.exception)
            for body in markdown_bodies(at):
                shown = plain(body)
                assert GFM_AUTOLINK.search(shown) is None, (module, step, body)
                if "evil" in shown:  # the name, quoted: none of its markup left active
                    seen += 1
                    active = [m for m in ("[x](", "**b**", "`c`", "<i>") if m in body]
                    assert not active, (module, step, body)
    assert seen >= 2  # at least the upload's message and one view quote the name
