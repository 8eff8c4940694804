"""The Chinese as a bilingual reviewer reads it (issue 31): the catalogue, the docs and the pages.

A review graded zh.json A- and found classes of problems; each class is a rule here, so that a
new text cannot bring one back:
- wrong or unidiomatic variants (作业系统 for the job system, 词片, 开关后 beside 切换后, 第一猜测,
  被追踪, 忘掉, 目录键, H for an entropy), in zh.json and every docs/*.zh.md;
- punctuation: no bracket inside a bracket (后归一化（Post-Norm）（BERT）), no sentence with two
  colons, also once a job's message is filled into the sentence that reports it; in zh.json and
  every docs/*.zh.md, no ... or lone … in Chinese (……), no half-width brackets around Chinese
  text, no ASCII x for × (6 x 12);
- before and after W_o name a place in the computation, never a time (W_o 前/后置零);
- MAE, logits, softmax and RMSNorm are glossed once where a teacher meets them;
- spacing: a Latin word or number stands one space apart from Han characters, in the catalogue
  and once placeholders are filled (tfviz.words.fill_spaced);
- the glossary (tests/project/test_glossary.py) has an entry for every term the lessons use, and the
  Chinese docs use each term the English docs use in its one rendering;
- no English is left in a Chinese page: every tab of the app, and a server folder's models, read
  through AppTest, other than technical names (LATIN_KEPT) and what is data (the typed sequence,
  its pieces, model names).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.project.test_glossary import LATIN_KEPT, latin_words, terms, words_only
from tfviz.core import tasks
from tfviz.training.corpus import CORPUS_DIR, load_manifest
from tfviz.ui import i18n
from tfviz.words import fill_spaced, placeholders

ROOT = Path(__file__).resolve().parents[2]
ZH_DOCS = sorted((ROOT / "docs").glob("*.zh.md"))

# ---- wrong variants -------------------------------------------------------------------------

WRONG = {
    r"作业": "作业 reads as homework: a background job is 任务 or 后台任务",
    r"词片": "readers know 子词 for a word-piece",
    r"开关后": "the switched state is 切换后 everywhere",
    r"(?<!排名)第一猜测": "the top guess is 排名第一的猜测",
    r"被追踪": "sentence A is the one the views show inside the model, not one that is tracked",
    r"忘掉": "a teacher clears the tally (清空), the server does not forget",
    r"目录键": "目录 is a table of contents: the catalogue's keys are 界面文字表中的键",
    r"exp\(H\)|熵 ?H\b": "H is the number of heads: the entropy is written out",
    r"）（": "two brackets in a row: fold the second into the first",
}


def wrong_variants(text: str) -> list[str]:
    return [
        f"{match.group(0)!r}: {why}"
        for pattern, why in WRONG.items()
        for match in re.finditer(pattern, text)
    ]


def nested_brackets(text: str) -> bool:
    """Whether a full-width bracket opens inside another (（a（b）c）): ASCII parentheses are
    formulas' and may nest."""
    depth = 0
    for ch in text:
        depth += ch == "（"
        if depth > 1:
            return True
        depth -= ch == "）"
    return False


def colon_heavy(text: str) -> list[str]:
    """The sentences of text with two full-width colons or more; a bold lead-in (**问题：**)
    and code do not count."""
    text = re.sub(r"`[^`]*`|\*\*[^*]*：\*\*", " ", text)
    return [s for s in re.split(r"[。；？！\n]", text) if s.count("：") >= 2]


def test_the_chinese_catalogue_has_no_wrong_variant_nested_bracket_or_double_colon():
    problems = []
    for key, text in i18n.catalogue("zh").items():
        problems += [f"{key}: {p}" for p in wrong_variants(words_only(text))]
        if nested_brackets(re.sub(r"`[^`]*`", " ", text)):
            problems.append(f"{key}: a bracket inside a bracket: {text[:80]}")
        problems += [f"{key}: two colons in {s!r}" for s in colon_heavy(text)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", ZH_DOCS, ids=lambda p: p.name)
def test_the_chinese_docs_have_no_wrong_variant(doc):
    text = re.sub(r"`[^`]*`", " ", doc.read_text(encoding="utf-8"))
    problems = wrong_variants(text)
    assert not problems, problems


def test_the_checks_find_each_class():
    assert wrong_variants("通过应用的作业系统重新训练") and wrong_variants("前 5 个猜测，开关后")
    assert wrong_variants("第一猜测改变了") and not wrong_variants("排名第一的猜测变了")
    assert wrong_variants("后归一化（Post-Norm）（BERT）")
    assert nested_brackets("（在后归一化（Post-Norm）层中）") and not nested_brackets("（a）（b）")
    assert colon_heavy("重新运行：已取消：已训练 3 步。") and not colon_heavy("**问题：** 是：否")


# ---- before and after W_o: a place in the computation, never a time --------------------------

# Before W_o is its input (concat), after W_o its output (attn_out): 在 W_o 之前/之后 (or 经过 W_o
# 之后), W_o 的输入/输出. A bare W_o 前/后 (W_o 前/后置零) or W_o 之前/之后 standing alone as a
# title (W_o 之前：…) reads as a moment, before or after W_o was there.
TIME_READING = re.compile(
    r"W_o ?[前后](?!馈)|(?<!在 )(?<!于 )(?<!经过 )(?<!任何 )(?<!的 )W_o 之[前后]"
)


def time_readings(text: str) -> list[str]:
    return [m.group(0) for m in TIME_READING.finditer(text.replace("`", ""))]


def test_before_and_after_w_o_are_never_read_as_a_time():
    problems = [
        f"{key}: {found}"
        for key, text in i18n.catalogue("zh").items()
        if (found := time_readings(text))
    ]
    problems += [
        f"{doc.name}: {found}"
        for doc in ZH_DOCS
        if (found := time_readings(doc.read_text(encoding="utf-8")))
    ]
    assert not problems, "\n".join(problems)


def test_the_time_reading_check_finds_one():
    assert time_readings("头的重要性和 W_o 前/后置零的比较") and time_readings("去掉 `W_o` 后")
    assert time_readings("W_o 之前/之后") and time_readings("W_o 之前：各头的拼接")
    assert not time_readings("在 W_o 之前置零，经过 W_o 之后，在任何 W_o 之前；W_o 的输入与输出")


# ---- glosses: a term a teacher may not know is explained once where it is met ----------------

GLOSSES = {  # the term (a regular expression) -> its gloss, in full-width brackets right after it
    "MAE": "平均绝对误差",
    "logits?": "未归一化的对数几率",
    "softmax": "归一化指数函数",
    "RMSNorm": "均方根归一化",
}


def unglossed(text: str) -> list[str]:
    """The terms of GLOSSES that text uses without their gloss right after any use of them
    (MAE（平均绝对误差）, `softmax`（归一化指数函数）)."""
    return [
        term
        for term, gloss in GLOSSES.items()
        if re.search(rf"(?<![A-Za-z_.]){term}(?![A-Za-z_])", text)
        and not re.search(rf"(?<![A-Za-z_.]){term}`?（{gloss}）", text)
    ]


def test_each_term_is_glossed_once_in_the_catalogue_and_in_each_chinese_doc():
    catalogue = "\n".join(i18n.catalogue("zh").values())
    assert all(re.search(term, catalogue) for term in ("MAE", "softmax"))
    problems = [f"zh.json: {t}" for t in unglossed(catalogue)]
    problems += [f"{doc.name}: {t}" for doc in ZH_DOCS for t in unglossed(doc.read_text("utf-8"))]
    assert not problems, problems


def test_the_gloss_check_finds_a_bare_term():
    assert unglossed("在 softmax 之前") == ["softmax"]
    assert unglossed("下一个词元的 logits 相差，logit 的和") == ["logits?"]
    assert unglossed("通过 `softmax`（归一化指数函数），再做 softmax") == []
    assert unglossed("out.logits[0]，没有别的") == []


# ---- punctuation: ellipses, brackets, colons, the times sign --------------------------------

FULL_WIDTH = "，。；：？！、（）“”《》"


def ellipses(text: str) -> list[str]:
    """An ellipsis in Chinese prose is ……: no ASCII ..., and a lone … only in a formula, between
    spaces and Latin ([0, 1, …, 7], [A][B] … [A] → [B])."""
    found = re.findall(r"\.\.\.|…{3,}", text)
    for m in re.finditer(r"(?<!…)…(?!…)", text):
        near = text[m.start() - 1 : m.start()] + text[m.end() : m.end() + 1]
        if m.end() == len(text.rstrip()) or re.search(rf"{HAN}|[{FULL_WIDTH}]", near):
            found.append(text[max(0, m.start() - 6) : m.end() + 6])
    return found


def half_width_brackets(text: str) -> list[str]:
    """Half-width brackets around Chinese text, which takes （）; ( ) stay around formulas and
    code. A bracket quoted as a character ('(') and an interval ((0, 0.1], [0, 1)) are neither."""
    text = re.sub(r"'[()]'|“[()]”|[\[(][-−\d.e ]+,[-−\d.e ]+[\])]", " ", text)
    return re.findall(rf"\([^()]*{HAN}[^()]*\)?|{HAN}[^()]*\)", text)


def ascii_times(text: str) -> list[str]:
    """An ASCII x for the times sign: between two numbers or sizes (6 x 12, D x D, d_k x d_k), or
    before a number (x 1 个或 4 个头), or after one as a ratio (2x). An x that names a variable
    (字符 x 处, x · W, 把 x (T, D)) stays."""
    found = re.findall(r"\d(?:\.\d+)?x\b", text)
    for m in re.finditer(r"(?<![\w.])x(?![\w])", text):
        left, right = text[: m.start()].rstrip(), text[m.end() :].lstrip()
        if re.match(r"\d|[A-Z]\b|d_\w", right) and (
            not left or re.search(rf"(\d|\b[A-Z]|\bd_\w+|{HAN}|[{FULL_WIDTH}])$", left)
        ):
            found.append(text[max(0, m.start() - 8) : m.end() + 8])
    return found


def punctuation_problems(text: str) -> list[str]:
    return (
        [f"ellipsis {e!r}: …… in Chinese" for e in ellipses(text)]
        + [f"half-width brackets around Chinese {b!r}: （）" for b in half_width_brackets(text)]
        + [f"an ASCII x for × in {x!r}" for x in ascii_times(text)]
        + [f"two colons in {s!r}" for s in colon_heavy(text)]
    )


def doc_prose(doc: Path) -> str:
    """A Chinese doc as prose: fenced code blocks and `code` left out, the wrapped lines of a
    paragraph joined (a sentence runs over several), a table's cells apart."""
    text = re.sub(r"```.*?```", "\n", doc.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"\n(?![\n\-|#*>\s])", "", text)
    return re.sub(r"`[^`]*`", " ", text).replace("|", "\n")


def test_the_chinese_catalogue_uses_chinese_punctuation():
    problems = [
        f"{key}: {p}"
        for key, text in i18n.catalogue("zh").items()
        for p in punctuation_problems(words_only(text))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", ZH_DOCS, ids=lambda p: p.name)
def test_the_chinese_docs_use_chinese_punctuation(doc):
    problems = punctuation_problems(doc_prose(doc))
    assert not problems, "\n".join(problems)


def test_the_punctuation_checks_find_each_class():
    assert ellipses("正在开始…") and ellipses("正在加载...") and ellipses("置零……，…")
    assert not ellipses("正在开始……") and not ellipses("[0, 1, …, 7] 和 [A][B] … [A]")
    assert half_width_brackets("余弦(学到的, 切换后)") and half_width_brackets("名字 (类别)")
    assert not half_width_brackets("x 是 (T, d_model)，每个 '(' 都由后面的 ')' 闭合")
    assert not half_width_brackets("必须是 [0, 1) 中的数，或 (0, 0.1] 之内")
    assert ascii_times("D x D 映射") and ascii_times("d_k x d_k") and ascii_times("6 x 12")
    assert ascii_times("2 层 x 1 个或 4 个头") and ascii_times("快 1.9x")
    assert not ascii_times("在字符 x 处，它回头找 x 之前；x · W；把 x (T, D)；D × D")
    assert colon_heavy(doc_prose(ROOT / "docs" / "claims.zh.md") + "甲：乙：丙。") == ["甲：乙：丙"]


# ---- filled messages: what a page shows once a job's message is in its sentence -------------

# The sentences that report a job's end, and the job messages that may fill them.
REPORTS = {
    "experiment.cancelled": "message",
    "train.cancelled": "message",
    "train.retrain.cancelled": "why",
}
HOW_FAR = ("after_steps", "after_steps_not_saved", "no_run_finished", "runs_kept")


def filled_reports() -> list[str]:
    zh = i18n.catalogue("zh")
    sample = {name: "7" for key in zh for name in placeholders(zh[key])}
    sample.update(task=i18n.translate("zh", "task.sum.name"), name="reverse_3f9a")
    endings = [
        i18n.translate("zh", f"jobs.message.{how}", **sample)
        for how in ("cancelled_waiting", "owner_gone_waiting", "shutdown_waiting")
    ]
    for wrapper in ("cancelled", "abandoned"):
        for how in HOW_FAR:
            how_far = i18n.translate("zh", f"jobs.message.{how}", **sample)
            endings.append(i18n.translate("zh", f"jobs.message.{wrapper}", how_far=how_far))
    return [
        i18n.translate("zh", key, **{**sample, field: ending})
        for key, field in REPORTS.items()
        for ending in endings
    ]


def test_a_cancelled_job_s_report_has_one_colon_at_most_and_no_nested_bracket():
    reports = filled_reports()
    assert len(reports) == len(REPORTS) * 11
    bad = [r for r in reports if colon_heavy(r) or nested_brackets(r) or wrong_variants(r)]
    assert not bad, bad


def test_every_task_is_named_in_chinese():
    from tfviz.ui.labels import task_label

    names = [*tasks.ATLAS_TASKS, "sentence embedding", "masked word"]
    for name in names:
        chinese = task_label(name, lang="zh")
        assert chinese != name and re.search(HAN, chinese) and not latin_words(chinese), chinese
        assert task_label(name, lang="en") == name  # English keeps the library's own name
    assert task_label("a new task", lang="zh") == "a new task"


def test_the_norm_kinds_fill_the_sidebar_without_a_second_bracket():
    for kind in ("post", "pre"):
        norm = i18n.translate("zh", f"sidebar.norm.{kind}")
        for key in ("sidebar.pretrained_kind", "folder.pieces"):
            text = i18n.translate("zh", key, norm=norm, pieces=128)
            assert not nested_brackets(text) and "）（" not in text, text
            assert not latin_words(text), text


# ---- spacing ------------------------------------------------------------------------------

HAN = r"[\u3400-\u9fff]"
# Placeholders filled with catalogue words or a job's message (准确率, 没有 W_o): they sit against
# the Han text, and fill_spaced adds the space where the value has a Latin or digit edge.
WORDED = {"what", "metric", "other", "field", "message", "why", "start", "zero"}


def spacing_problems(key: str, zh: str, en: str) -> list[str]:
    text = re.sub(r"`[^`]*`", "`c`", zh)
    bare = re.sub(r"\{[^{}]*\}", "_", text)  # placeholders: checked one by one below
    problems = [
        f"{key}: no space in {m.group(0)!r}"
        for m in re.finditer(rf"{HAN}[A-Za-z0-9`]|[A-Za-z0-9`]{HAN}", bare)
    ]
    problems += [
        f"{key}: a space between Han characters in {m.group(0)!r}"
        for m in re.finditer(rf"{HAN} +{HAN}", bare)
    ]
    for m in re.finditer(r"\{(\w+)[^{}]*\}", text):
        name = m.group(1)
        before, after = text[m.start() - 1 : m.start()], text[m.end() : m.end() + 1]
        # A suffix the English attaches without a space ({steps}{loss}) brings its own.
        suffix = re.search(r"[^\s{]\{" + name + r"\}", en) is not None
        if name in WORDED:
            continue
        if re.match(HAN, after) or (re.match(HAN, before) and not suffix):
            problems.append(f"{key}: {{{name}}} stands against Han text without a space")
    return problems


def test_the_catalogue_spaces_latin_words_numbers_and_placeholders_from_han():
    en, zh = i18n.catalogue("en"), i18n.catalogue("zh")
    problems = [p for key in zh for p in spacing_problems(key, zh[key], en[key])]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", ZH_DOCS, ids=lambda p: p.name)
def test_the_chinese_docs_space_latin_words_and_numbers_from_han(doc):
    text = doc.read_text(encoding="utf-8")
    problems = [p for line in text.splitlines() for p in spacing_problems(doc.name, line, "")]
    assert not problems, problems


def test_the_spacing_check_finds_a_tight_word_or_placeholder():
    assert spacing_problems("k", "保留W_o", "keep W_o")
    assert spacing_problems("k", "共{n}个头", "{n} heads")
    assert spacing_problems("k", "后归一化 层", "post-norm layer")
    assert not spacing_problems("k", "共 {n} 个头，保留 W_o", "{n} heads, W_o")
    assert not spacing_problems("k", "置零后的{metric}变化", "{metric} change")
    assert not spacing_problems("k", "第 {step} 步{loss}", "step {step}{loss}")


def test_a_filled_value_with_a_latin_edge_is_spaced_and_chinese_meets_chinese():
    assert fill_spaced("置零后的{metric}变化", {"metric": "MAE"}) == "置零后的 MAE 变化"
    assert fill_spaced("置零后的{metric}变化", {"metric": "准确率"}) == "置零后的准确率变化"
    assert fill_spaced("比{other}时更好", {"other": "块对角 W_o"}) == "比块对角 W_o 时更好"
    # A value is never changed, and a space the text has is kept.
    assert fill_spaced("词元 {token} 处", {"token": "我 爱"}) == "词元 我 爱 处"
    assert fill_spaced("L{layer}，{n:,} 个", {"layer": 2, "n": 12345}) == "L2，12,345 个"
    assert i18n.translate("zh", "analysis.score.metric", metric="MAE") == "置零后的 MAE 变化"
    assert i18n.translate("en", "analysis.score.metric", metric="MAE") == "MAE change when zeroed"


# ---- the glossary covers the lessons' terms and the docs ------------------------------------

# The technical terms the lessons (lessons.* keys, the Lessons view) use: each needs an entry.
LESSON_TERMS = """
    concat; concatenation; output projection; token; query; learned W_o; identity; block-diagonal;
    feed-forward net; LayerNorm; residual stream; output head; prediction head; forward pass;
    post-norm; learned positions; learning rate; dropout; encoder; random seed; atlas; cells;
    arm; mechanism; bias; float rounding; switched; training slot; fresh examples; recipe;
    mean absolute error; loss; target; steps; linear layer; dimension; zeroed
""".replace("\n", " ")


def test_the_glossary_has_an_entry_for_every_term_the_lessons_use():
    entries = terms()
    missing = [
        term.strip()
        for term in LESSON_TERMS.split(";")
        if not any(re.search(e["en"], term.strip(), re.IGNORECASE) for e in entries)
    ]
    assert not missing, missing
    lessons = " ".join(v for k, v in i18n.catalogue("en").items() if k.startswith("lessons."))
    unused = [
        t.strip() for t in LESSON_TERMS.split(";") if t.strip().lower() not in lessons.lower()
    ]
    # Stale words in the list would make the first check weaker than it says.
    assert len(unused) <= 8, unused


def test_the_chinese_docs_use_the_rendering_of_each_term_the_english_docs_use():
    for doc in ZH_DOCS:
        english = (doc.parent / doc.name.replace(".zh.md", ".md")).read_text(encoding="utf-8")
        chinese = re.sub(r"`[^`]*`", " ", doc.read_text(encoding="utf-8"))
        english = re.sub(r"`[^`]*`", " ", english)
        lacking = [
            f"{t['term']}: {t['zh']}"
            for t in terms()
            if re.search(t["en"], english, re.IGNORECASE) and t["zh"] not in chinese
        ]
        assert not lacking, f"{doc.name} lacks {lacking}"


# ---- the pages ------------------------------------------------------------------------------

# Elements whose value is what the widget holds, not what it shows (its options are shown).
HELD = {"TextInput", "TextArea", "Selectbox", "Radio", "ButtonGroup", "SelectSlider", "Slider",
        "NumberInput", "Multiselect", "Checkbox", "Toggle", "ColorPicker", "DateInput"}  # fmt: skip
NOT_TEXT = {"Html", "Code", "Json"}  # style sheets; the link's query string; data
SHOWN = ("value", "label", "help", "body", "placeholder", "options", "caption")


def shown_texts(node, out: list[str]) -> list[str]:
    """Every string a student can read in an AppTest element tree."""
    kind = type(node).__name__
    if kind not in NOT_TEXT:
        for name in SHOWN:
            if name == "value" and kind in HELD:
                continue
            try:
                value = getattr(node, name)
            except Exception:  # an element without that property raises, not returns None
                continue
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, (list, tuple)):
                out += [v for v in value if isinstance(v, str)]
            elif getattr(value, "columns", None) is not None:  # a table: names and text cells
                out += [str(c) for c in value.columns]
                out += [v for v in value.to_numpy().ravel().tolist() if isinstance(v, str)]
    children = getattr(node, "children", None)
    for child in children.values() if isinstance(children, dict) else ():
        shown_texts(child, out)
    return out


def inert_words(at) -> set[str]:
    """What a page shows as data: the typed sequences, the tasks' alphabets and examples, model
    names, the special tokens' labels, the languages' own names (and the language picker, which
    names itself in both)."""
    found = {tasks.BOS_LABEL, *i18n.LANGUAGES.values(), i18n.translate("en", "lang.picker")}
    picker = at.selectbox(key="model")
    found |= {option.split("（")[0] for option in picker.options}
    for task in tasks.TASKS.values():
        found |= {task.alphabet, *task.examples}
    found.add(load_manifest(CORPUS_DIR)["alphabet"])  # the language models' characters
    found.add(typed(at))
    return {w for text in found for w in re.findall(r"[A-Za-z][A-Za-z_\-]*", text)}


def typed(at) -> str:
    return " ".join(
        str(at.session_state[k])
        for k in ("sequence", "sentence_b", "lesson_line", "lesson_sentence")
        if k in at.session_state
    )


def model_answer(word: str, at) -> bool:
    """Whether word is data the typed text gives: a piece of it (a word-piece, 'cat' of
    'Ġcat'), or a toy model's answer to it (as long as the sequence, in a task's characters)."""
    sequence = str(at.session_state["sequence"]) if "sequence" in at.session_state else ""
    alphabets = [task.alphabet for task in tasks.TASKS.values()]
    if word.lower() in typed(at).lower():
        return True
    return len(word) == len(sequence) and any(set(word) <= set(a) for a in alphabets)


def english_left(at, where: str) -> list[str]:
    inert = inert_words(at) | LATIN_KEPT
    found = []
    for text in shown_texts(at._tree, []):
        plain = re.sub(r"\S*/\S*", " ", text.replace("\\", ""))  # md escapes; paths are names
        left = [w for w in latin_words(plain) if w not in inert and not model_answer(w, at)]
        if left:
            found.append(f"{where}: {left} in {text[:90]!r}")
    return found


def open_zh_tab(at, view: str, **widgets) -> None:
    at.session_state["view"] = i18n.translate("zh", f"app.view.{view}")
    for key, value in widgets.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, at.exception


# Each tab, and the sections a tab opens on another choice: (view, widget values).
PAGES = [
    ("attention", {}),
    ("w_o", {}),
    ("w_o_off", {"w_o_mode": "identity"}),
    *[("parts", {"parts_section": s}) for s in ("modes", "permutation", "pattern", "predict")],
    *[("train", {"train_section": s}) for s in ("train", "language", "retrain", "timeline")],
    *[("analysis", {"analysis_section": s}) for s in ("Norm-based attention", "OV circuits")],
    ("experiment", {}),
    ("experiment", {"latlas_measure": "induction"}),  # the language atlas's score legend
    *[("lessons", {"lesson_step": s}) for s in range(1, 9)],
]


@pytest.mark.usefixtures("fresh_app")
def test_no_english_is_left_in_the_chinese_pages_of_a_toy_model():
    from tests.conftest import start_app

    at = start_app(lang="zh")
    found = english_left(at, "first page")
    for view, widgets in PAGES:
        open_zh_tab(at, view, **widgets)
        found += english_left(at, f"{view} {widgets}")
    sidebar = " ".join(shown_texts(at.sidebar, []))
    assert i18n.translate("zh", "task.reverse.name") in sidebar.replace("\\", "")
    assert not found, "\n".join(dict.fromkeys(found))


@pytest.mark.usefixtures("fresh_app")
def test_no_english_is_left_in_the_chinese_pages_of_a_bundled_language_model():
    """tfviz's own decoder: its sidebar, the next-character table and every view, and the
    Induction heads section (issue 42)."""
    from tests.conftest import start_app

    at = start_app(model="bundled-lm:shakespeare-2l-attn", lang="zh")
    found = english_left(at, "first page")
    for view, widgets in (("attention", {}), ("w_o_off", {"w_o_mode": "identity"}),
                          ("analysis", {"analysis_section": "Induction heads"})):  # fmt: skip
        open_zh_tab(at, view, **widgets)
        found += english_left(at, f"{view} {widgets}")
    assert not found, "\n".join(dict.fromkeys(found))


def test_the_page_check_finds_english():
    class Element:
        def __init__(self, **values):
            self.__dict__.update(values)

    first = Element(value="任务： sentence embedding")
    second = Element(label="后归一化", help="post-norm, word-piece")
    tree = Element(children={0: first, 1: second})
    texts = shown_texts(tree, [])
    assert texts == ["任务： sentence embedding", "后归一化", "post-norm, word-piece"]
    assert [w for t in texts for w in latin_words(t)] == [
        "sentence", "embedding", "post-norm", "word-piece",
    ]  # fmt: skip


@pytest.mark.usefixtures("fresh_app")
def test_no_english_is_left_in_the_chinese_pages_of_a_server_folder_s_models(tmp_path, monkeypatch):
    """A teacher's own BERT (a sentence model) and RoBERTa (with its masked-LM head): the
    sidebar once said 任务： sentence embedding and post-norm in English."""
    pytest.importorskip("transformers")
    from tests.conftest import start_app
    from tests.hf.test_hf_encoders import _build
    from tfviz import settings

    for kind in ("bert-encoder-only", "roberta"):
        _build(kind, tmp_path / "folders" / kind)
    monkeypatch.setenv(settings.PRETRAINED_DIR_ENV, str(tmp_path / "folders"))
    found = []
    for kind in ("bert-encoder-only", "roberta"):
        at = start_app(model=f"folder:{kind}", lang="zh")
        sidebar = " ".join(shown_texts(at.sidebar, [])).replace("\\", "")
        assert i18n.translate("zh", "sidebar.norm.post") in sidebar, sidebar
        found += english_left(at, kind)
        for view in ("w_o", "w_o_off"):
            open_zh_tab(at, view)
            found += english_left(at, f"{kind} {view}")
    assert not found, "\n".join(dict.fromkeys(found))
