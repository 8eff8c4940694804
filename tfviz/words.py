"""Every word a user reads, in each language: one catalogue, read by the library and the app.

Each language is one flat JSON file in tfviz/locales/ (key -> text), read once per process.
The library returns keys and values (a job's Message, an input's refusal code, a refused file's
code (tfviz.refusal), a chart's axis key); this module words them, in English for logs, the
command line and the tests, or in the page's language for the app (tfviz.ui.i18n adds only
which language a session reads).
tests/project/test_i18n.py checks that both files have the same keys and the same placeholders in
each
string, so a translation can neither lose a sentence nor a number.

Technical names (W_o, W_q, softmax, concat, d_k) are written the same in every language. The
Chinese uses one rendering per term: locales/glossary.json lists each term with its rejected
renderings, and tests/project/test_glossary.py holds zh.json (and docs/claims.zh.md) to it;
tests/project/test_zh_review.py holds the Chinese to its punctuation and spacing (fill_spaced
below).

A text may quote another key's text as {@other.key}: help that names a widget's label or option
then shows that label exactly as the widget does, in the same language, and cannot drift from
it. References are expanded when a catalogue is read, so every caller sees plain text; a
referenced text takes no placeholders of its own. A key missing from the catalogues (a bug the
tests catch) is shown as ⟦key⟧ rather than failing the page, so a student still sees the rest.
"""

from __future__ import annotations

import functools
import json
import re
import string
from pathlib import Path

LANGUAGES = {"en": "English", "zh": "中文"}  # code -> name, each written in its own language
DEFAULT = "en"
LOCALES = Path(__file__).resolve().parent / "locales"
REFERENCE = re.compile(r"\{@([\w.]+)\}")  # {@other.key}: that key's text, in the same language


def missing(key: str) -> str:
    """What a key absent from the catalogue shows as (the browser test looks for it)."""
    return f"⟦{key}⟧"


@functools.cache
def catalogue(lang: str) -> dict[str, str]:
    """key -> text of one language, from locales/<lang>.json (read once per process)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; known: {', '.join(LANGUAGES)}")
    data = json.loads((LOCALES / f"{lang}.json").read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"{lang}.json must be one object of key -> text")
    return {key: expand(data, key) for key in data}


def references(text: str) -> list[str]:
    """The keys a raw catalogue text quotes as {@key}, in order."""
    return REFERENCE.findall(text)


def expand(data: dict[str, str], key: str, seen: tuple[str, ...] = ()) -> str:
    """data[key] with every {@other} replaced by other's (expanded) text; an unknown key shows
    as ⟦other⟧, like a missing key; a reference back to a key being expanded is an error."""
    if key in seen:
        raise ValueError(f"catalogue references loop: {' -> '.join((*seen, key))}")

    def one(match: re.Match) -> str:
        other = match.group(1)
        return expand(data, other, (*seen, key)) if other in data else missing(other)

    return REFERENCE.sub(one, data[key])


def placeholders(text: str) -> set[str]:
    """The {names} a catalogue text takes, e.g. {"value", "n"} for "{value} of {n}"
    ({@key} references are not placeholders: they are expanded when the catalogue is read)."""
    return {
        name
        for _, name, _, _ in string.Formatter().parse(text)
        if name is not None and not name.startswith("@")
    }


def translate(lang: str, key: str, /, **values) -> str:
    """The text of key in lang, its {placeholders} filled from values."""
    text = catalogue(lang).get(key)
    if text is None:
        return missing(key)
    return fill_spaced(text, values) if lang in SPACED_LANGUAGES else text.format(**values)


# Chinese spacing (tests/project/test_zh_review.py holds the catalogue to it): a Latin word or a
# number
# stands one space apart from a Han character, in the catalogue and once its placeholders are
# filled. Placeholders are spaced like words, except those filled with catalogue words or a
# job's message ({metric}, {other}, ...: 准确率, 没有 W_o), which sit against the Han text so that
# Chinese meets Chinese without a gap ("置零后的{metric}变化" -> 置零后的准确率变化). Where such a
# value begins or ends with a Latin letter or digit (MAE, 块对角 W_o), the space is added here.
SPACED_LANGUAGES = {"zh"}
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
LATIN_EDGE = re.compile(r"[A-Za-z0-9]")


def fill_spaced(text: str, values: dict) -> str:
    """text.format(**values), with a space where a value's Latin or digit edge meets a Han
    character of the text around it (the values themselves are never changed)."""
    out = ""
    pending_value_end = ""  # the last character of the value just placed, if any
    for literal, name, spec, conversion in string.Formatter().parse(text):
        if literal:
            if pending_value_end and _meet(pending_value_end, literal[0]):
                out += " "
            out += literal
        pending_value_end = ""
        if name is None:
            continue
        field = name + ("!" + conversion if conversion else "") + (":" + spec if spec else "")
        value = ("{" + field + "}").format(**values)
        if value and out and _meet(out[-1], value[0]):
            out += " "
        out += value
        pending_value_end = value[-1:] if value else ""
    return out


def _meet(left: str, right: str) -> bool:
    """Whether a Han character and a Latin letter or digit touch (either way round)."""
    return bool(
        (HAN.match(left) and LATIN_EDGE.match(right))
        or (LATIN_EDGE.match(left) and HAN.match(right))
    )


def english(key: str, **values) -> str:
    """key's English text; KeyError for a key the catalogue lacks (a bug, not a blank)."""
    return catalogue(DEFAULT)[key].format(**values)
