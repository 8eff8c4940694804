"""The Chinese catalogue holds to the glossary: one rendering per term (issue 20).

tfviz/locales/glossary.json lists each term with its English pattern, its chosen Chinese
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


def words_only(text: str) -> str:
    return NOT_WORDS.sub(" ", text)


def violations(term: dict, en: dict[str, str], zh: dict[str, str]) -> list[str]:
    found = []
    for key, english in en.items():
        if key in term["except"]:
            continue
        chinese = words_only(zh[key])
        if re.search(term["en"], words_only(english), re.IGNORECASE) and term["zh"] not in chinese:
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
        assert any(re.search(term["en"], words_only(t), re.IGNORECASE) for t in en.values()), term


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


def test_the_glossary_check_fails_on_a_rejected_rendering_of_a_run_or_the_values():
    run = next(t for t in terms() if t["term"].startswith("run "))
    en = {"k": "{runs} training runs in {cells} cells"}
    assert violations(run, en, {"k": "{cells} 个格子中共 {runs} 次运行"}) == []
    assert violations(run, en, {"k": "{cells} 个格子中共 {runs} 次训练"})  # 次训练 for a run
    # 首次训练 (the first training) and 再次训练 (train again) are not a run
    assert violations(run, {"k": "its recipe"}, {"k": "首次训练配方，再次训练"}) == []
    values = next(t for t in terms() if t["term"].startswith("values "))
    en = {"k": "it still reads its own values"}
    assert violations(values, en, {"k": "它仍然读取自己的值向量"}) == []
    assert violations(values, en, {"k": "它仍然读取自己的值"})
    assert violations(values, {"k": "nothing"}, {"k": "同组的头读同样的键和值"})
    assert violations(values, {"k": "nothing"}, {"k": "差值、数值和均值"}) == []


ZH_DOCS = sorted((i18n.LOCALES.parents[1] / "docs").glob("*.zh.md"))


@pytest.mark.parametrize("path", ZH_DOCS, ids=lambda p: p.name)
def test_the_chinese_docs_use_no_rejected_rendering(path):
    """Every Chinese page of docs/ explains the app to the same students: the same words."""
    assert len(ZH_DOCS) >= 3  # claims, decoders, language
    doc = path.read_text(encoding="utf-8")
    text = re.sub(r"`[^`]*`", " ", doc)  # code: test names, file names
    problems = [
        f"{term['term']}: {match.group(0)!r}"
        for term in terms()
        if term["term"] not in ("query, key, value (of attention)",)  # English gloss in brackets
        for rejected in term["rejected"]
        for match in re.finditer(rejected, text)
    ]
    assert not problems, problems


# Words the Chinese may keep in Latin letters: technical names and formulas, model, tool and
# library names, and the authors and venues the help texts cite.
LATIN_KEPT = set(
    """
    W_o W_O W_q W_V W_X W_OV d_k d_model d_ff concat attn_out z_h b_o alpha_ij xi_h sum_h sqrt exp
    log max float SVD LayerNorm Linear Adam PyTorch Transformer Annotated BERT MiniLM all-MiniLM-L
    CLS SEP UNK MAE Welch tfviz sum_seed safetensors view transpose Unicode PNG SVG HTML CPU PyPI
    Holm
    RoBERTa XLM-R DistilBERT Hugging Face zip
    Michel Kobayashi Elhage Roy Vetterli Abnar Zuidema Olsson NeurIPS EMNLP ACL
    """.split()
)
LATIN_KEYS = {  # keys whose Latin words are values the student types or picks, not words
    "share.notice.bad_mode": "the W_o modes a link's w_o_mode takes (learned, identity, ...)",
    "lang.picker": "the language switch names itself in both languages",
}


def latin_words(text: str) -> list[str]:
    """Latin-letter words of a Chinese text outside `code`, {placeholders} and bracketed
    English glosses (查询（query）), other than the names kept in LATIN_KEPT."""
    text = re.sub(r"`[^`]*`|\{[^{}]*\}|（[A-Za-z][^（）]*）|\([A-Za-z][^()]*\)", " ", text)
    return [w for w in re.findall(r"[A-Za-z][A-Za-z_\-]{2,}", text) if w not in LATIN_KEPT]


def test_the_chinese_catalogue_has_no_english_words():
    """What the screenshots are checked for, for every key: no English outside code, technical
    and model names, citations, and English glosses in brackets."""
    left = {
        key: words
        for key, text in i18n.catalogue("zh").items()
        if key not in LATIN_KEYS and (words := latin_words(text))
    }
    assert not left, left


def test_the_english_word_check_finds_english():
    assert latin_words("保留 head block 的份额") == ["head", "block"]
    assert latin_words("post-norm，token 嵌入") == ["post-norm", "token"]
    assert latin_words("查询（query）词元与 `layer` 列，{value} 和 W_o") == []
