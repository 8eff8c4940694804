"""The Chinese catalogue holds to the glossary: one rendering per term (issue 20).

tfviz/ui/locales/glossary.json lists each term with its English pattern, its chosen Chinese
rendering and the renderings rejected for it. Wherever the English text of a key uses the term,
the Chinese text of that key must use the chosen rendering; no Chinese text may use a rejected
one. Keys a rule does not fit are listed in the glossary with the reason.
"""

from __future__ import annotations

import json
import re

import pytest

from tfviz.ui import i18n

GLOSSARY = i18n.LOCALES / "glossary.json"
# Placeholders ({token}, {value}) and `code` are not words of the language: left out of both texts.
NOT_WORDS = re.compile(r"\{[^{}]*\}|`[^`]*`")


def terms() -> list[dict]:
    return json.loads(GLOSSARY.read_text(encoding="utf-8"))["terms"]


def words(text: str) -> str:
    return NOT_WORDS.sub(" ", text)


def violations(term: dict, en: dict[str, str], zh: dict[str, str]) -> list[str]:
    found = []
    for key, english in en.items():
        if key in term["except"]:
            continue
        chinese = words(zh[key])
        if re.search(term["en"], words(english), re.IGNORECASE) and term["zh"] not in chinese:
            found.append(
                f"{key}: the English says {term['term']!r}, the Chinese lacks {term['zh']!r}"
            )
        for rejected in term["rejected"]:
            if match := re.search(rejected, chinese):
                found.append(f"{key}: rejected rendering {match.group(0)!r} ({rejected})")
    return found


def test_the_glossary_is_well_formed():
    entries = terms()
    assert len(entries) >= 15
    en = i18n.catalogue("en")
    for term in entries:
        assert set(term) == {"term", "en", "zh", "rejected", "except"}, term
        assert term["zh"] and re.compile(term["en"]) and all(map(re.compile, term["rejected"]))
        assert not set(term["except"]) - set(en), f"{term['term']}: unknown keys in except"
        # A term the English no longer uses is a stale entry.
        assert any(re.search(term["en"], words(t), re.IGNORECASE) for t in en.values()), term


@pytest.mark.parametrize("term", terms(), ids=lambda t: t["term"])
def test_the_chinese_catalogue_uses_one_rendering_per_term(term):
    problems = violations(term, i18n.catalogue("en"), i18n.catalogue("zh"))
    assert not problems, "\n".join(problems)


def test_the_glossary_check_fails_on_a_rejected_or_missing_rendering():
    term = next(t for t in terms() if t["term"] == "learned W_o")
    en = {"a": "the learned W_o", "b": "nothing"}
    assert violations(term, en, {"a": "学到的 W_o", "b": "无"}) == []
    assert violations(term, en, {"a": "学习所得的 W_o", "b": "无"})  # rejected, and not chosen
    assert violations(term, en, {"a": "学到的 W_o", "b": "学习到的 W_o"})  # rejected elsewhere
    seeds = next(t for t in terms() if t["term"] == "random seed")
    assert violations(seeds, {"k": "mean over seeds"}, {"k": "各种子的平均值"})
    assert violations(seeds, {"k": "mean over seeds"}, {"k": "各随机种子的平均值"}) == []


def test_claims_zh_uses_no_rejected_rendering():
    """docs/claims.zh.md explains the app to the same students: the same words."""
    doc = (i18n.LOCALES.parents[2] / "docs" / "claims.zh.md").read_text(encoding="utf-8")
    text = re.sub(r"`[^`]*`", " ", doc)  # code: test names, file names
    problems = [
        f"{term['term']}: {match.group(0)!r}"
        for term in terms()
        if term["term"] not in ("query, key, value (of attention)",)  # English gloss in brackets
        for rejected in term["rejected"]
        for match in re.finditer(rejected, text)
    ]
    assert not problems, problems
