"""Help text and messages quote the labels the student sees, in the language shown (issue 20).

A text that names a widget's label or option ("set W_o to “off (identity)”") takes it from the
same catalogue key the widget uses, as a {@key} reference (tfviz.ui.i18n expands it), so the
help cannot drift from the screen: in Chinese it says 关闭（恒等映射） because the radio does.
Checked three ways: a table of (message key, label key) pairs, each message showing its label's
text in both languages; every quoted phrase of either catalogue (“…”, 「…」, '…', "…") is a
reference, a placeholder, symbols, or a cited paper's title; and no text names the project's
seed files ("seed 000", 种子文章) instead of the articles.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tfviz.ui import i18n

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "app.py", *sorted((ROOT / "tfviz").rglob("*.py"))]

W_O_OPTIONS = [  # the sidebar's W_o radio (tfviz/ui/switches.py)
    "common.w_o.learned",
    "common.w_o.identity",
    "common.w_o.zero",
    "common.w_o.block_diagonal",
    "switch.rank_k",
]
QUOTES = [  # (message key, label key it quotes): the label's text must be in the message
    *(("switch.w_o_help", label) for label in W_O_OPTIONS),
    *(("w_o_off.nothing_switched", label) for label in W_O_OPTIONS[1:]),
    ("parts.modes.intro", "common.w_o.identity"),
    ("lessons.s4.intro", "lessons.s4.mode.identity"),
    ("lessons.s4.intro", "lessons.s4.mode.zero"),
    ("lessons.s4.mode.identity", "common.w_o.identity"),
    ("lessons.s4.mode.zero", "common.w_o.zero"),
    *(
        ("train.retrain.start_help", f"train.retrain.start.{start}")
        for start in ("identity", "zero", "random", "learned")
    ),
    ("train.w_o_help", "train.w_o.identity"),
    ("experiment.against_help", "experiment.against.identity"),
    ("experiment.against_help", "experiment.against.block_diagonal"),
    ("experiment.done", "experiment.source.rerun"),
    ("experiment.what", "app.view.experiment"),
    ("analysis.importance.rank_help", "analysis.importance.keep"),
    ("help.head_importance", "analysis.importance.keep"),
    ("lessons.s1.w_label", "lessons.s1.edit_w"),
    ("parts.predict.pick_first", "parts.predict.yes"),
    ("parts.predict.pick_first", "parts.predict.no"),
    ("train.timeline.none", "train.section.train"),
    ("train.timeline.none_bundled", "train.section.train"),
    ("train.timeline.none_upload", "train.section.train"),
    ("share.notice.training_lost", "app.view.train"),
    ("share.notice.training_running", "app.view.train"),
    ("sidebar.model_help", "app.view.train"),
]
# Quoted text that is not a label: the titles of the papers the help texts cite.
PAPER_TITLES = {
    "Quantifying Attention Flow in Transformers",
    "Are Sixteen Heads Really Better than One?",
    "Attention is Not Only a Weight: Analyzing Transformers with Vector Norms",
    "A Mathematical Framework for Transformer Circuits",
}
QUOTED = re.compile(
    r"“(?P<a>[^”]*)”|「(?P<b>[^」]*)」|\"(?P<c>[^\"]*)\""
    r"|(?<![\w}’'])'(?P<d>[^']+)'(?![\w])"  # '…', not an apostrophe (head {head}'s, others')
)
REFERENCE_ONLY = re.compile(r"\{@[\w.]+\}")
PLACEHOLDER_ONLY = re.compile(r"\{[\w:,.]*\}")
SEED_FILES = re.compile(r"\bseed (file|article|0\d\d)|种子 ?0\d\d|种子文章", re.IGNORECASE)


def raw(lang: str) -> dict[str, str]:
    return json.loads((i18n.LOCALES / f"{lang}.json").read_text(encoding="utf-8"))


def used_in_code(key: str) -> bool:
    """A label key is a widget's if some module names it (or its prefix, for f"{prefix}.{x}")."""
    prefix = key.rsplit(".", 1)[0] + "."
    return any(
        f'"{key}"' in text or f'"{prefix}' in text or f'f"{prefix}{{' in text
        for text in (path.read_text(encoding="utf-8") for path in SOURCES)
    )


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
@pytest.mark.parametrize(("message", "label"), QUOTES, ids=lambda pair: pair)
def test_a_message_quotes_the_label_as_the_widget_shows_it(lang, message, label):
    shown = i18n.catalogue(lang)
    assert shown[label] in shown[message], (lang, message, shown[message], shown[label])
    assert f"{{@{label}}}" in raw(lang)[message], f"{lang}: {message} copies {label}'s text"


def test_the_quoted_label_keys_are_widget_keys():
    unused = sorted({label for _, label in QUOTES if not used_in_code(label)})
    assert not unused, f"no module shows these keys: {unused}"


def quoted_literals(texts: dict[str, str]) -> list[str]:
    """Quoted phrases that are not a {@key} reference, a placeholder, symbols or a paper title."""
    problems = []
    for key, text in texts.items():
        for match in QUOTED.finditer(text):
            phrase = next(group for group in match.groups() if group is not None)
            if (
                REFERENCE_ONLY.fullmatch(phrase)
                or PLACEHOLDER_ONLY.fullmatch(phrase)
                or not re.search(r"[^\W\d_]", phrase)
                or phrase in PAPER_TITLES
            ):
                continue
            problems.append(f"{key}: {match.group(0)}")
    return problems


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_every_quoted_phrase_is_a_reference_to_a_label(lang):
    problems = quoted_literals(raw(lang))
    assert not problems, f"{lang}: quoted text written out instead of {{@key}}:\n" + "\n".join(
        problems
    )


def test_the_quote_scan_catches_a_label_copied_by_hand():
    assert quoted_literals({"a": "set W_o to “off (identity)”"}) == ["a: “off (identity)”"]
    assert quoted_literals({"a": "请先选择“会”或“{@parts.predict.no}”"}) == ["a: “会”"]
    assert quoted_literals({"a": "under 'Train a model'"}) == ["a: 'Train a model'"]
    assert quoted_literals({"a": 'as "Edit W" says'}) == ['a: "Edit W"']
    assert quoted_literals({"a": "「编辑 W」"}) == ["a: 「编辑 W」"]
    fine = "head {head}'s own and the others' ; “{@lessons.s1.edit_w}”, '{name}', '(' and ')'"
    assert quoted_literals({"a": fine}) == []


def test_references_resolve_take_no_placeholders_and_stay_out_of_raw_read_keys():
    for lang in i18n.LANGUAGES:
        texts, shown = raw(lang), i18n.catalogue(lang)
        for key, text in texts.items():
            for other in i18n.references(text):
                assert other in texts, f"{lang}: {key} references unknown {other}"
                assert not i18n.placeholders(texts[other]), f"{lang}: {other} takes values"
            # tfviz.plots and tfviz.messages read these keys from en.json as plain JSON.
            if key.startswith(("chart.", "jobs.message.")):
                assert not i18n.references(text), f"{lang}: {key} is read raw"
            assert "⟦" not in shown[key], f"{lang}: {key} shows a missing key"
    assert i18n.expand({"a": "x {@b}", "b": "y {@c}", "c": "z"}, "a") == "x y z"
    assert i18n.expand({"a": "x {@gone}"}, "a") == "x ⟦gone⟧"
    with pytest.raises(ValueError, match="loop"):
        i18n.expand({"a": "{@b}", "b": "{@a}"}, "a")


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_no_text_names_a_seed_file(lang):
    named = {k: t for k, t in i18n.catalogue(lang).items() if SEED_FILES.search(t)}
    assert not named, f"{lang}: name the articles ({{@article.concat}}...), not seed files: {named}"
    assert SEED_FILES.search("as seed 000 asks") and SEED_FILES.search("种子文章 002 的回归任务")


def test_claims_zh_names_tabs_by_their_chinese_labels():
    """docs/claims.zh.md is read beside the Chinese UI: a tab is named as the student sees it,
    with the English label in brackets (*分析*（Analysis）), never by its English label alone."""
    doc = (ROOT / "docs" / "claims.zh.md").read_text(encoding="utf-8")
    en, zh = i18n.catalogue("en"), i18n.catalogue("zh")
    named = 0
    for key in (k for k in en if k.startswith("app.view.")):
        english, chinese = en[key], zh[key]
        bare = doc.replace(f"{chinese}*（{english}）", "").replace(f"{chinese}**（{english}）", "")
        assert f"*{english}*" not in bare and f"**{english}" not in bare, (key, english)
        named += doc.count(f"{chinese}*（{english}）") + doc.count(f"{chinese}**（{english}）")
    assert named >= 6, "the scan found too few tab names: is it broken?"


@pytest.mark.usefixtures("fresh_app")
def test_the_chinese_sidebar_names_the_model_s_layout_in_chinese():
    """The sidebar's model facts fill {norm} and {embed} from sidebar.norm.* / sidebar.embed.*,
    not with the config's own "post" and "token"."""
    from tests.conftest import start_app

    at = start_app(lang="zh")
    facts = " ".join(e.value for e in at.sidebar.text)
    assert i18n.translate("zh", "sidebar.norm.post") in facts, facts
    assert i18n.translate("zh", "sidebar.embed.token") in facts, facts
    assert "post-norm" not in facts and "token" not in facts, facts


@pytest.mark.usefixtures("fresh_app")
def test_lesson_step_4_shows_the_verdict_in_chinese_only():
    """The findings are worded by the catalogue; the library's English verdict is not shown."""
    from tests.conftest import start_app

    at = start_app(i18n.translate("zh", "app.view.lessons"), lang="zh")
    at.selectbox(key="lesson_step").set_value(4).run()
    assert not at.exception, at.exception
    labels = [e.label for e in at.expander]
    assert labels and all(re.search(r"[\u4e00-\u9fff]", label) for label in labels), labels
    text = " ".join(m.value for m in at.markdown)
    english = re.findall(r"\b[A-Za-z]{2,},? [A-Za-z]{2,},? [A-Za-z]{2,}\b", text)
    assert not english, english  # experiment_report.verdict's sentences were shown here


# Markdown a text would need drawn: code spans, bold, links.
MARKDOWN = re.compile(r"`|\*\*|\]\(")


def test_a_text_shown_escaped_holds_no_markdown_in_either_language():
    """A catalogue text the page shows through md_escape (user words filled into it: a token, a
    model's name) is drawn as typed, so markdown in it shows as its marks: the Chinese verdict of
    W_o's freedom read `W_v` with its backticks. Every such key, in both catalogues, holds none."""
    keys = set()
    for path in sorted((ROOT / "tfviz" / "ui").rglob("*.py")):
        keys |= set(re.findall(r'md_escape\(\s*t\(\s*"([^"]+)"', path.read_text()))
    assert len(keys) > 30  # the scan finds the escaped texts (42 when written)
    marked = [
        (lang, key)
        for lang in ("en", "zh")
        for key in sorted(keys)
        if MARKDOWN.search(i18n.catalogue(lang).get(key, ""))
    ]
    assert not marked, marked
