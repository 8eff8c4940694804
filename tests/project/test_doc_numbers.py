"""The figures docs/language.md, docs/decoders.md (each with its Chinese), README.md,
docs/deploy.md and docs/docker.md quote, computed here from the data they describe: the bundled
language models' folders and weights, the corpus and its manifest, tfviz's own limits and
tables, the atlas's rows and plan, the Train form's sizes, the Dockerfile. Each must appear in
its doc written as the doc writes it (in both languages where the Chinese quotes it), so a doc
whose figure drifts from its data fails here. (docs/claims*.md: test_claims_numbers.py and
test_language_atlas_rows.py.)

Not checked here: figures no kept data holds (runs made by hand and not kept, a one-off
measurement): the docs say where each came from and when. Timings are bench/'s; where a doc
quotes a bench figure, it is checked to be bench/'s own (README.md's current figures, or the runs
behind them in HISTORY.md)."""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tfviz.training import corpus, language

ROOT = Path(__file__).resolve().parents[2]
LANGS = ("en", "zh")
RECIPES = language.LANGUAGE_RECIPES
WORD_EN = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
WORD_ZH = {2: "两", 3: "三", 4: "四"}
ORDINAL_EN = {1: "first", 2: "second", 3: "third", 6: "sixth", 10: "tenth"}
ORDINAL_ZH = {1: "第一个", 2: "第二个", 3: "第三个"}
# The Chinese titles docs/language.zh.md gives the validation plays (manifest titles -> Chinese).
ZH_TITLES = {
    "Cymbeline": "辛白林",
    "Julius Caesar": "裘力斯·凯撒",
    "Othello": "奥瑟罗",
    "The Tempest": "暴风雨",
}


def read(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8")


def flat(rel: str) -> str:
    """The doc as one line: English lines joined by a space, Chinese lines (which wrap without
    one) joined by nothing, so a figure split over two lines is still found."""
    lines = [line.strip() for line in read(rel).splitlines()]
    return "".join(lines) if ".zh." in rel else " ".join(" ".join(lines).split())


def row(rel: str, first: str) -> list[str]:
    """The cells of the table row of rel whose first cell is first."""
    for line in read(rel).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first:
            return cells
    raise AssertionError(f"{rel} has no table row starting {first!r}")


def missing(text: str, figures: list[str]) -> list[str]:
    """The figures not in text (a minus written "-" or "−" alike)."""
    return [f for f in figures if f not in text and f.replace("-", "−") not in text]


def constant(rel: str, name: str):
    """A module-level constant of a source file, read without importing it (the UI's modules
    import streamlit)."""
    for node in ast.parse(read(rel)).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return ast.literal_eval(node.value)
    raise AssertionError(f"{rel} has no constant {name}")


def exponent(x: float) -> str:
    """1e-3 as the docs write it (not Python's 1e-03)."""
    return f"{x:.0e}".replace("e-0", "e-")


def folder(name: str) -> tuple[dict, dict]:
    raw = json.loads((ROOT / "models" / "language" / name / "config.json").read_text())
    return raw["tfviz_config"], raw["record"]


# ------------------------------------------------------------------------------------------------
# docs/language.md and docs/language.zh.md
# ------------------------------------------------------------------------------------------------

LANGUAGE_DOCS = {"en": "docs/language.md", "zh": "docs/language.zh.md"}
TRIED_FIRST = {"en": "positions", "zh": "位置编码（可学习的位置编码或旋转位置编码）"}
BUNDLED_ROW = {"en": "rotary (the bundled recipe)", "zh": "旋转（内置的配方）"}
TRIED_WINDOWS = 400  # "the validation loss on the split's first 400 windows"
TRIED_LETTERS = 64  # "the scores on 32 sequences of 64 random letters repeated once"


@pytest.fixture(scope="module", params=LANGS)
def lang(request):
    return request.param


@pytest.fixture(scope="module")
def corpus_data():
    manifest = corpus.load_manifest(corpus.CORPUS_DIR)
    texts = {split: corpus.load_split(corpus.CORPUS_DIR, split) for split in ("train", "valid")}
    return manifest, texts


@pytest.fixture(scope="module")
def remeasured() -> tuple[str, str, str, int]:
    """The bundled two-layer model as the table of recipes tried measures every row: the loss on
    the validation split's first TRIED_WINDOWS windows, the probe on TRIED_LETTERS random
    letters (its best induction score and in-context drop), and the probe's sequences."""
    from tfviz import hf
    from tfviz.analysis.induction import measure_induction

    loaded = hf.open_folder(ROOT / "models" / "language" / "shakespeare-2l-attn")
    valid = language.bundled_corpus()[2]
    loss = language.validation_loss(loaded.model, valid, max_windows=TRIED_WINDOWS)
    vocab = language.CharVocabulary("".join(sorted(loaded.tokenizer.alphabet)))
    probe = language.induction_probe(vocab, 2 * TRIED_LETTERS)
    assert probe.shape[1] == 2 * TRIED_LETTERS
    scores = measure_induction(loaded.model, probe)
    return f"{loss:.2f}", f"{scores.best()[2]:.3f}", f"{scores.in_context_drop:.2f}", len(probe)


@pytest.mark.parametrize("name", list(RECIPES))
def test_each_bundled_language_models_row_is_its_folder(lang, name):
    """The first table: sizes, training and figures, from the folder's config.json."""
    cfg, rec = folder(name)
    doc = LANGUAGE_DOCS[lang]
    what, training, loss, score, drop = row(doc, f"`{name}`")[1:]
    assert [loss, score, drop] == [
        f"{rec['valid_loss']:.3f}",
        f"{rec['induction_best']['score']:.3f}",
        f"{rec['in_context_drop']:.2f}",
    ], (doc, name)
    n_layers, heads, d, context = cfg["n_layers"], cfg["n_heads"], cfg["d_model"], cfg["max_len"]
    assert context == rec["context"]
    steps, batch, seconds = f"{rec['steps_done']:,}", rec["batch_size"], f"{rec['seconds']:.0f}"
    if lang == "en":
        layers = (f"{n_layers} layers", f"{WORD_EN[n_layers]} layers")
        said = [f"{heads} heads", f"D {d}", f"context {context}"]
        said.append("rotary positions" if cfg["positions"] == "rotary" else "learned positions")
        no_ffn = "no feed-forward net" in what
        assert training == f"{steps} steps x {batch} windows, {seconds} s"
    else:
        layers = (f"{n_layers} 层", f"{WORD_ZH.get(n_layers)}层")
        said = [f"{heads} 个头", f"D {d}", f"上下文 {context}"]
        said.append("旋转位置编码" if cfg["positions"] == "rotary" else "可学习的位置编码")
        no_ffn = "没有前馈网络" in what
        assert training == f"{steps} 步 × 每步 {batch} 个窗口，{seconds} 秒"
    assert any(x in what for x in layers), (doc, name, layers)
    assert not missing(what, said), (doc, name, missing(what, said))
    assert no_ffn == (not cfg["ffn"]), (doc, name)


def test_the_corpus_figures_are_the_corpus(lang, corpus_data):
    manifest, texts = corpus_data
    n_train, n_valid = len(texts["train"]), len(texts["valid"])
    assert (n_train, n_valid) == (manifest["train"]["chars"], manifest["valid"]["chars"])
    documents = [*manifest["train"]["documents"], *manifest["valid"]["documents"]]
    files = sorted(d["file"] for d in documents)
    held = [files.index(d["file"]) for d in manifest["valid"]["documents"]]
    first, step = held[0], held[1] - held[0]
    assert held == [i for i in range(len(files)) if i % step == first]  # "every tenth ..."
    titles = [d["title"] for d in manifest["valid"]["documents"]]
    mapped = {m["char"]: m["to"] for split in ("train", "valid") for m in manifest[split]["mapped"]}
    assert (mapped["{"], mapped["/"], mapped["*"], mapped["@"]) == ("[", ",", "", "")
    package, version = manifest["source_package"].split("==")
    n_alphabet = len(manifest["alphabet"])
    text = flat(LANGUAGE_DOCS[lang])
    if lang == "en":
        figures = [
            f"{n_train:,} characters train, {n_valid:,} validate",
            f"an alphabet of {n_alphabet} characters",
            f"texts of {len(documents)} plays and poems",
            f"every {ORDINAL_EN[step]} from the {ORDINAL_EN[first + 1]} ({', '.join(titles)})",
            f"ours is {WORD_EN[len(titles)]} plays the model never saw",
            "(`{` to `[`, `/` to `,`; `*` and `@` dropped",
        ]
    else:
        figures = [
            f"训练集 {n_train:,} 个字符",
            f"验证集 {n_valid:,} 个字符",
            f"字母表共 {n_alphabet} 个字符",
            f"{len(documents)} 部戏剧和诗作",
            f"从第 {first + 1} 个起每隔 {step} 个",
            "".join(f"《{ZH_TITLES[t]}》" for t in titles),
            f"从没见过的{WORD_ZH[len(titles)]}部剧本",
            "`{` 换成 `[`，`/` 换成 `,`，删掉 `*` 和 `@`",
        ]
    figures.append(f"`{package}` {version}")
    assert not missing(text, figures)


def test_the_training_recipe_is_the_codes(lang, monkeypatch):
    """AdamW's betas, weight decay, warm-up, decay and clipping as train_language_model passes
    them to the loop, and GPT-2's initialisation as init_language_weights draws it."""
    from tfviz.core.model import Encoder
    from tfviz.training.train import learning_rate

    seen = {}

    def fit(model, params, task, rng, steps, batch_size, lr, schedule, clip, *rest, **kw):
        seen.update(kw, schedule=schedule, clip=clip)
        return [0.0] * steps

    monkeypatch.setattr(language, "fit_params", fit)
    vocab = language.corpus_vocabulary()
    small = language.language_config(vocab, context=8, n_layers=1, n_heads=2, d_model=16)
    language.train_language_model(np.arange(200) % vocab.size, small, steps=2)
    (b1, b2), clip = seen["betas"], seen["clip"]
    assert seen["schedule"] == "cosine"
    (decay,) = {r["weight_decay"] for r in RECIPES.values()}
    steps = 1000
    warm = next(s for s in range(steps) if learning_rate(s, steps, 1.0, "cosine") >= 1.0) + 1
    assert learning_rate(steps - 1, steps, 1.0, "cosine") == pytest.approx(0.1, abs=1e-4)
    config = language.language_config(vocab, context=8, n_layers=2, d_model=128)
    model = language.init_language_weights(Encoder(config))
    attn = model.layers[0].attn
    with torch.no_grad():
        assert float(attn.W_q.weight.std()) == pytest.approx(0.02, rel=0.03)  # N(0, 0.02)
        residual = 0.02 / math.sqrt(2 * config.n_layers)  # N(0, 0.02/√(2L))
        assert float(attn.W_o.weight.std()) == pytest.approx(residual, rel=0.03)
    pct = f"{100 * warm / steps:g}%"
    if lang == "en":
        figures = [
            f"betas {b1} and {b2}",
            f"weight decay {decay} on matrices",
            f"first {pct} of steps",
            "decay to a tenth of the learning rate",
            f"gradients clipped at {clip:g}",
        ]
    else:
        figures = [
            f"betas {b1} 和 {b2}",
            f"权重衰减 {decay}",
            f"前 {pct} 的步数",
            "学习率的十分之一",
            f"梯度裁剪到 {clip:g}",
        ]
    figures += ["N(0, 0.02)", "N(0, 0.02/√(2L))"]
    assert not missing(flat(LANGUAGE_DOCS[lang]), figures)


def test_the_probe_is_as_described(lang):
    from tfviz.analysis import induction

    token_ids = list(range(10))
    short = induction.probe(token_ids, 64)
    assert tuple(short.shape) == (induction.PROBE_SEQS, 64)  # a copy of context/2, repeated
    cap = induction.probe(token_ids, 1024).shape[1] // 2  # ... but at most this many
    text = flat(LANGUAGE_DOCS[lang])
    if lang == "en":
        assert not missing(text, [f"{len(short)} sequences of random letters"])
        assert f"n = min(context/2, {cap})" in text
    else:
        assert f"{len(short)} 条随机字母序列" in text
        assert re.search(rf"一半.{{0,4}}{cap}|min\(上下文/2, {cap}\)", text), cap


def test_the_characters_a_run_sees_are_its_recipes(lang):
    """3,000 steps of the two-layer recipe are 25 million characters, the longer run's 8,000 are
    65 million, and a 30,000-step run takes about an hour at the bundled run's pace."""
    recipe = RECIPES["shakespeare-2l-attn"]
    per_step = recipe["batch_size"] * recipe["context"]
    _, rec = folder("shakespeare-2l-attn")
    hour = rec["seconds"] / rec["steps_done"] * 30_000 / 3600
    assert 0.75 <= hour <= 1.5, hour  # "about an hour"
    text = flat(LANGUAGE_DOCS[lang])
    figures = ["--steps 30000"]
    bundled, longer = (round(steps * per_step / 1e6) for steps in (recipe["steps"], 8000))
    if lang == "en":
        figures += [
            f"{recipe['steps']:,} steps here are {bundled} million characters",
            f"stopped at 8,000 ({longer} million characters)",
            "about an hour of one core",
        ]
    else:
        figures += [
            f"{recipe['steps']:,} 步只有 {bundled * 100:,} 万个字符",
            f"在 8,000 步（{longer * 100:,} 万个字符）",
            "大约一小时",
        ]
    assert not missing(text, figures)


def test_nanogpts_figure_and_setting_beside_the_bundled_models(lang):
    from tests.training.test_language_models import NANOGPT_LOSS

    recipe = RECIPES["shakespeare-char"]
    _, rec = folder("shakespeare-char")
    assert rec["valid_loss"] < NANOGPT_LOSS
    batch, context, loss = recipe["batch_size"], recipe["context"], f"{rec['valid_loss']:.3f}"
    if lang == "en":
        figures = [
            f"a validation loss of {NANOGPT_LOSS} at its CPU setting",
            f"batch {batch}, context {context})",
            f"trained for {recipe['steps']:,} steps, as bundled, it reaches {loss}, under",
        ]
    else:
        figures = [
            f"验证损失是 {NANOGPT_LOSS}",
            f"批大小 {batch}、上下文 {context}",
            f"训练 {recipe['steps']:,} 步",
            f"后是 {loss}，低于 nanoGPT 的数字",
        ]
    assert not missing(flat(LANGUAGE_DOCS[lang]), figures)


def tried_rows(lang: str) -> list[list[str]]:
    """The rows of the table of induction recipes tried."""
    lines = read(LANGUAGE_DOCS[lang]).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {TRIED_FIRST[lang]} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_the_bundled_recipes_row_of_the_recipes_tried_is_the_bundled_model(lang, remeasured):
    """The row marked as the bundled recipe, re-measured from the bundled weights as the table
    measures every row: the loss on the validation split's first 400 windows, the probe on 64
    random letters."""
    *figures, n = remeasured
    recipe = RECIPES["shakespeare-2l-attn"]
    steps, repeat, tokens, *quoted = row(LANGUAGE_DOCS[lang], BUNDLED_ROW[lang])[1:]
    assert steps == f"{recipe['steps']:,}"
    assert quoted == figures
    text = flat(LANGUAGE_DOCS[lang])
    h, d = recipe["n_heads"], recipe["d_model"]
    b, ctx, lr, seed = (
        recipe["batch_size"],
        recipe["context"],
        exponent(recipe["lr"]),
        recipe["seed"],
    )
    if lang == "en":
        said = [
            f"Two layers, {h} heads, D {d}, batch {b}, context {ctx}, AdamW (lr {lr} unless said), "
            f"seed {seed},",
            f"the validation loss on the split's first {TRIED_WINDOWS} windows",
            f"the scores on {n} sequences of {TRIED_LETTERS} random letters repeated once",
        ]
    else:
        said = [
            f"两层、{h} 个头、D {d}、批大小 {b}、上下文 {ctx}",
            f"学习率 {lr}",
            f"随机种子 {seed}",
            f"验证集的前 {TRIED_WINDOWS} 个窗口",
            f"{n} 条各 {TRIED_LETTERS} 个随机字母",
        ]
    assert recipe["n_layers"] == 2 and not recipe["ffn"] and recipe["positions"] == "rotary"
    assert not missing(text, said)


def test_the_prose_about_the_recipes_tried_is_their_table(lang):
    """What the prose says of the recipes tried is what their table holds: the range of the
    losses with GPT-2's initialisation at lr 3e-3, the best score, the byte-pair row's characters
    per piece; the bundled model's previous-token score lies in the range quoted."""
    rows = tried_rows(lang)
    assert len(rows) == 9
    chars, bpe = ("characters", "BPE") if lang == "en" else ("字符", "BPE")
    plain = [r for r in rows if r[3] == chars and "lr" not in r[0] and "学习率" not in r[0]]
    losses = [float(r[4]) for r in plain]
    best = max(float(r[5]) for r in rows)
    (pieces,) = [r for r in rows if r[3].startswith(bpe)]
    per_char, per_piece = (float(x) for x in re.findall(r"\d\.\d\d", pieces[4])[:2])
    ratio = f"{per_piece / per_char:.1f}"
    _, rec = folder("shakespeare-2l-attn")
    assert 0.3 <= rec["previous_token_best"] <= 0.5  # "scores 0.3 to 0.5"
    text = flat(LANGUAGE_DOCS[lang])
    lo, hi = f"{min(losses):.2f}", f"{max(losses):.2f}"
    if lang == "en":
        figures = [
            f"({lo} to {hi} nats per character, attention only)",
            f"stayed near {best:.2f}",
            "(scores 0.3 to 0.5",
            f"{ratio} characters a piece",
        ]
    else:
        figures = [f"每字符 {lo} 到 {hi} 奈特", f"{best:.2f} 左右", "分数 0.3 到 0.5"]
        figures.append(f"平均每个子词 {ratio} 个字符")
    assert not missing(text, figures)


def test_predicting_from_the_current_character_alone_is_the_corpus(lang):
    """The loss a model reaches from the current character alone: the training split's
    character pairs (add-one counts), read on the validation split; the stuck model's 2.41 of the
    table is beside it."""
    vocab, train, valid, _ = language.bundled_corpus()
    V = vocab.size
    pairs = np.bincount(train[:-1].astype(np.int64) * V + train[1:], minlength=V * V)
    counts = pairs.reshape(V, V) + 1.0
    p = counts / counts.sum(1, keepdims=True)
    bigram = float(-np.mean(np.log(p[valid[:-1], valid[1:]])))
    (stuck,) = [r for r in tried_rows(lang) if "torch" in r[0]]
    assert float(stuck[4]) < bigram  # the stuck model did a little better
    text = flat(LANGUAGE_DOCS[lang])
    if lang == "en":
        figures = [
            f"stopped at {stuck[4]} nats, little better than the {bigram:.2f} of predicting from "
            "the current character alone"
        ]
    else:
        figures = [f"停在 {stuck[4]} 奈特", f"来预测的 {bigram:.2f} 奈特"]
    assert not missing(text, figures)


def test_the_bench_figures_quoted_are_the_benchs(lang):
    """The training-speed bench (English only) and the copy-task bench, as bench/README.md and
    bench/HISTORY.md give them; the bench's tfviz loss is the bundled model's own."""
    bench = " ".join(bench_text().split())
    text = flat(LANGUAGE_DOCS[lang])
    _, rec = folder("shakespeare-char")
    if lang == "en":
        speed = ["0.965", "0.854", f"{rec['valid_loss']:.4f}", "1.7811"]
        assert not missing(bench, speed)
        assert not missing(text, [f"{speed[2]} and {speed[3]} nats", *speed])
    table = {r[0]: r[1:] for r in (line.strip("| ").split(" | ") for line in bench_rows())}
    start, end = table["0"], table["3,000"]
    assert start[0] == start[2]  # the two start from the same score
    low, high = re.search(r"best previous-token score (\d\.\d\d)-(\d\.\d\d)", bench).groups()
    assert "64 random letters, a span of 4 to 32" in bench and "AdamW at 1e-3, batch 32" in bench
    if lang == "en":
        figures = [
            f"from {start[0]} to {end[0]} (plain) and {end[2]} (tfviz)",
            f"from 0 to {end[1]} nats for both",
            f"stayed at {low} to {high}",
            "64 random letters in which a span of 4 to 32",
            "(lr 1e-3, batch 32,",
        ]
    else:
        figures = [
            f"从 {start[0]} 升到 {end[0]}（普通模型）和 {end[2]}（tfviz）",
            f"都从 0 升到 {end[1]} 奈特",
            f"一直是 {low} 到 {high}",
            "64 个随机字母",
            "4 到 32 个字母",
            "学习率 1e-3，批量 32",
        ]
    assert end[1] == end[3]  # "+0.36 nats for both"
    assert not missing(text, figures)


def bench_text() -> str:
    """bench/'s figures: README.md's current ones and HISTORY.md's runs behind them."""
    return read("bench/README.md") + "\n" + read("bench/HISTORY.md")


def bench_rows() -> list[str]:
    """The rows of the bench's copy-task table (step, plain score, plain drop, tfviz score, tfviz
    drop)."""
    lines = bench_text().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| step | plain: best"))
    out = []
    for line in lines[head + 2 :]:
        if not line.startswith("|"):
            break
        out.append(line.strip())
    return out


# ------------------------------------------------------------------------------------------------
# docs/decoders.md and docs/decoders.zh.md
# ------------------------------------------------------------------------------------------------

DECODER_DOCS = {"en": "docs/decoders.md", "zh": "docs/decoders.zh.md"}


def test_the_limits_are_tfviz_s(lang):
    from tfviz.core.config import LIMITS
    from tfviz.hf.decoder_weights import MAX_DECODER_PARAMS

    p, d, layers, heads = (
        MAX_DECODER_PARAMS,
        *(LIMITS[k] for k in ("d_model", "n_layers", "n_heads")),
    )
    ff, vocab, positions = LIMITS["d_ff"], LIMITS["vocab_size"], LIMITS["max_len"]
    assert p % 10**8 == 0  # a whole number of millions, and of 亿
    if lang == "en":
        figures = [
            f"at most {p // 10**6:,} million parameters, D at most {d:,}, {layers} layers, "
            f"{heads} heads, d_ff {ff:,} and {vocab:,} vocabulary entries",
            f"tfviz reads at most {positions:,} positions",
            f"reads its first {positions:,}",
        ]
    else:
        figures = [
            f"最多 {p // 10**8} 亿个参数",
            f"D 最多 {d:,}",
            f"最多 {layers} 层、{heads} 个头",
            f"d_ff 最多 {ff:,}",
            f"词表最多 {vocab:,} 项",
            f"tfviz 最多读 {positions:,} 个位置",
            f"只读前 {positions:,} 个",
        ]
    assert not missing(flat(DECODER_DOCS[lang]), figures)


def test_the_next_tokens_and_the_continuation_are_tfviz_s(lang):
    from tfviz.hf.causal_lm import MAX_NEW_TOKENS, TOP_K

    n, k = MAX_NEW_TOKENS, TOP_K
    if lang == "en":
        figures = [
            f"(up to {n} tokens)",
            f"appends up to {n} tokens",
            f"the {WORD_EN[k]} likeliest tokens after the last word-piece",
            f"the {k} likeliest next tokens",
        ]
    else:
        figures = [f"（最多 {n} 个词元）", f"最多续写 {n} 个词元", f"最可能的 {k} 个词元"]
    assert not missing(flat(DECODER_DOCS[lang]), figures)


def test_an_even_causal_heads_column_totals_are_the_masks(lang):
    """Zero queries and keys: every score is 0, so the causal mask alone spreads each row
    evenly over positions 0 to i; the columns' totals are the doc's."""
    from tfviz import ModelConfig
    from tfviz.core.model import Encoder

    T = 8
    config = ModelConfig(
        vocab_size=4, n_out=4, d_model=8, n_heads=2, d_ff=8, n_layers=1, max_len=T,
        causal=True, dropout=0.0, pool="none", norm="pre",
    )  # fmt: skip
    model = Encoder(config).eval()
    with torch.no_grad():
        for p in (model.layers[0].attn.W_q, model.layers[0].attn.W_k):
            p.weight.zero_()
            p.bias.zero_()
        attn = model(torch.zeros(1, T, dtype=torch.long), None, trace=True).trace.layers[0].attn
    weights = attn[0, 0]
    assert float(weights[0, 0]) == 1.0  # row 0 reads only itself
    totals = weights.sum(0)
    assert float(totals[0]) == pytest.approx(sum(1 / (i + 1) for i in range(T)))
    first, last = f"{float(totals[0]):.2f}", f"{float(totals[-1]):.3f}"
    if lang == "en":
        figures = [
            f"over {T} tokens, an even head gives column 0 a total of 1 + 1/2 + ... + 1/{T} = "
            f"{first} and column {T - 1} a total of {last}"
        ]
    else:
        # (the Chinese writes the ellipsis as one character)
        figures = [f"{T} 个词元时", "1 + 1/2 + ", f"1/{T} = {first}，给第 {T - 1} 列的是 {last}"]
    assert not missing(flat(DECODER_DOCS[lang]), figures)


def test_grouped_query_attention_and_rotary_figures_are_the_benchs_real_sizes(lang):
    """The sizes bench/hf_decoders.py builds its random models at (the real models' config.json),
    and the query heads each key/value head serves as tfviz.ModelConfig.kv_head assigns them."""
    from bench.hf_decoders import NAMED, SIZES
    from tfviz import ModelConfig

    def groups(kind: str) -> tuple[dict, ModelConfig, list[str]]:
        s = SIZES[kind]
        c = ModelConfig(
            vocab_size=4, n_out=4, d_model=s["hidden"], n_heads=s["heads"],
            n_kv_heads=s["kv_heads"], d_ff=8, n_layers=1, max_len=8, causal=True,
        )  # fmt: skip
        spans = []
        for g in range(c.kv_heads):
            heads = [h for h in range(c.n_heads) if c.kv_head(h) == g]
            assert heads == list(range(heads[0], heads[-1] + 1))  # consecutive
            spans.append(f"{heads[0]} to {heads[-1]}")
        return s, c, spans

    small, small_c, small_spans = groups("llama")
    qwen, _, qwen_spans = groups("qwen2")
    smol, q = NAMED["llama"], NAMED["qwen2"]
    kv_width = small_c.kv_heads * small_c.d_k
    theta_s, theta_q = f"{small['rope_theta']:,.0f}", f"{qwen['rope_theta']:,.0f}"
    if lang == "en":
        # "heads 0 to 2 share the first, 3 to 5 the second, 6 to 8 the third"
        shared = ", ".join(
            f"{span}{' share' if i == 0 else ''} the {ORDINAL_EN[i + 1]}"
            for i, span in enumerate(small_spans)
        )
        figures = [
            f"{smol} has {small['heads']} query heads and {small['kv_heads']} key/value heads: "
            f"heads {shared}",
            f"{q} has {qwen['heads']} and {qwen['kv_heads']}: heads {' and '.join(qwen_spans)}",
            f"({smol}: {kv_width} against W_q's {small['hidden']})",
            f"({theta_s} in {smol}, {theta_q} in {q})",
        ]
    else:
        zh = [s.replace(" to ", " 到 ") for s in small_spans]
        shared = "，".join(f"{span} 共用{ORDINAL_ZH[i + 1]}" for i, span in enumerate(zh))
        qwen_zh = " 与头 ".join(s.replace(" to ", " 到 ") for s in qwen_spans)
        figures = [
            f"{smol} 有 {small['heads']} 个查询头、{small['kv_heads']} 个键/值头：头 {shared}",
            f"{q} 有 {qwen['heads']} 个和 {qwen['kv_heads']} 个：头 {qwen_zh}",
            f"{smol} 是 {kv_width} 个，W_q 是 {small['hidden']} 个",
            f"{smol} 为 {theta_s}，{q} 为 {theta_q}",
        ]
    assert not missing(flat(DECODER_DOCS[lang]), figures)


def test_a_traces_memory_is_what_a_traced_pass_allocates(lang):
    """A traced pass's stacked sites (tfviz.core.model.STACKED: the attention weights and four
    (T, D) sites; z is a view of concat) for a SmolLM-135M-sized model at 256 tokens, measured
    on two of its layers and scaled to its 30; and the memory kept for the next trace."""
    from bench.hf_decoders import NAMED, SIZES
    from tfviz import ModelConfig
    from tfviz.core.buffers import FREE_BYTES
    from tfviz.core.model import Encoder

    s, T, L = SIZES["llama"], 256, 2
    config = ModelConfig(
        vocab_size=4, n_out=4, d_model=s["hidden"], n_heads=s["heads"], n_kv_heads=s["kv_heads"],
        d_ff=8, n_layers=L, max_len=T, causal=True, ffn=False, positions="rotary", norm="pre",
        dropout=0.0, pool="none",
    )  # fmt: skip
    with torch.no_grad():
        stacked = Encoder(config).eval()(torch.zeros(1, T, dtype=torch.long), None, trace=True)
    sites = stacked.trace.stacked
    total = sum(t.nbytes for t in sites.values())
    mib = total / L * s["layers"] / 2**20
    share = {0.5: ("half", "一半")}[sites["attn"].nbytes / total]
    name, kept = NAMED["llama"], FREE_BYTES >> 20
    if lang == "en":
        figures = [
            f"({mib:.0f} MiB for a {name}-sized model at {T} tokens, {share[0]} of it attention "
            "weights)",
            f"up to {kept} MiB of it",
        ]
    else:
        figures = [
            f"{name} 大小的模型在 {T} 个词元上要 {mib:.0f} MiB，其中{share[1]}是注意力权重",
            f"最多留 {kept} MiB",
        ]
    assert not missing(flat(DECODER_DOCS[lang]), figures)


def tolerance(rel: str, test: str | None = None) -> str:
    """The atol a test file's TOL sets, or that the named test asserts with."""
    source = read(rel)
    if test is None:
        return re.search(r"^TOL = ([0-9.e-]+)", source, re.M).group(1)
    body = source.split(f"\ndef {test}(", 1)[1].split("\ndef ", 1)[0]
    (atol,) = set(re.findall(r"atol=([0-9.e-]+)", body))
    return atol


def test_the_agreement_quoted_is_the_tests(lang):
    checks = "tests/hf/test_hf_decoders.py"
    tol = tolerance(checks)
    alone = tolerance(checks, "test_a_left_padded_sequence_reads_as_it_does_alone")
    identities = tolerance(checks, "test_the_w_o_identities_hold_for_every_family")
    if lang == "en":
        figures = [
            f"agree to {tol} on a left-padded batch",
            f"test_a_left_padded_sequence_reads_as_it_does_alone`: equal to {alone})",
            f"equal `attn_out` to {identities}",
        ]
    else:
        figures = [
            f"相差不超过 {tol}",
            f"test_a_left_padded_sequence_reads_as_it_does_alone`：相差不超过 {alone}）",
            f"`attn_out` 相差不超过 {identities}",
        ]
    assert not missing(flat(DECODER_DOCS[lang]), figures)


# ------------------------------------------------------------------------------------------------
# README.md
# ------------------------------------------------------------------------------------------------


def test_the_readme_quotes_the_bundled_language_models_and_minilm():
    from tfviz.hf import pretrained

    readme = flat("README.md")
    char, char_rec = folder("shakespeare-char")
    attn, _ = folder("shakespeare-2l-attn")
    n_plays = len(corpus.load_manifest(corpus.CORPUS_DIR)["valid"]["documents"])
    bert = json.loads((pretrained.model_dir() / "config.json").read_text())
    assert not attn["ffn"]
    figures = [
        f"`shakespeare-char` (nanoGPT's CPU setting, {char['n_layers']} layers, trained "
        f"{char_rec['steps_done']:,} steps: {char_rec['valid_loss']:.3f} nats per character on "
        f"{WORD_EN[n_plays]} plays it never saw)",
        f"`shakespeare-2l-attn` ({WORD_EN[attn['n_layers']]} attention-only layers",
        f"MiniLM's {bert['num_hidden_layers']} x {bert['num_attention_heads']}",
        f"BertModel to {tolerance('tests/hf/test_pretrained.py')}",
        f"transformers to {tolerance('tests/hf/test_hf_decoders.py')} "
        "(`tests/hf/test_hf_decoders.py`)",
    ]
    assert not missing(readme, figures)


def test_the_readme_quotes_the_atlas_as_its_rows_and_plan_give_it():
    from tfviz.cli.atlas import duration
    from tfviz.core.tasks import ATLAS_TASKS
    from tfviz.experiments import atlas, atlas_stats
    from tfviz.experiments.atlas_cells import LANGUAGE_ARMS, LANGUAGE_FORMAT, MAIN_ARMS
    from tfviz.experiments.atlas_store import BUNDLED, LANGUAGE, LONGER, read_rows

    rows = list(read_rows(BUNDLED).values())
    # Trained: the learned arm reached its target in every seed (its rows alone say so).
    results = atlas_stats.analyse([r for r in rows if r["arm"] == "learned"])
    trained = [k for k, r in results.items() if r.trained]
    seeds = {r["seed"] for r in rows}
    without = {(r["cell"], r["seed"]) for r in rows if r["arm"] == "identity"}
    assert all((k, s) in without for k in trained for s in seeds)  # m = the trained cells
    core, full = atlas.plan("core"), atlas.plan("full")
    assert len(rows) == len(core)  # the bundled rows are the core grid's runs
    first = [r for r in rows if r["arm"] != "frozen"]
    hours = sum(r["seconds"] for r in first) / 3600
    estimate = atlas.estimate_seconds(full)
    assert 45 * 60 <= estimate / 20 <= 90 * 60  # "so about an hour on a 20-core cluster"
    g, gf = atlas.GRIDS["core"], atlas.GRIDS["full"]
    (budget,) = {r["budget"] for r in rows}
    longer = {r["budget"] for r in read_rows(LONGER).values()}
    lang_rows = list(read_rows(LANGUAGE, LANGUAGE_FORMAT).values())
    shape = [
        re.match(r"language/L(\d+)/(\w+)/H(\d+)/D(\d+)", r["cell"]).groups() for r in lang_rows
    ]
    (lang_layers,) = {s[0] for s in shape}
    lang_heads = sorted({int(s[2]) for s in shape})
    lang_d = sorted({int(s[3]) for s in shape})
    assert {s[1] for s in shape} == {"ffn", "noffn"}
    (lang_steps,) = {r["steps"] for r in lang_rows}
    assert {r["arm"] for r in lang_rows} == set(LANGUAGE_ARMS)
    figures = [
        f"of {len(results)} cells, {len(trained)} learned their task",
        f"corrected for the {len(trained)} comparisons",
        f"at most {budget:,} steps) until its metric",
        f"(bundled: {len(ATLAS_TASKS)} tasks x layers {'/'.join(map(str, g['layers']))} x FFN "
        f"on/off x heads {'/'.join(map(str, sorted(g['heads'])))}, {len(MAIN_ARMS) + 1} arms",
        f"{len(seeds)} seeds) is {len(core):,} runs; its first {len(first)} (without the frozen "
        f"arm) took {hours:.1f} h of one core",
        "The **full** grid adds heads "
        + " and ".join(str(h) for h in gf["heads"] if h not in g["heads"])
        + ", pre-norm and D="
        + "/".join(str(d) for d in gf["d_model"] if d not in g["d_model"])
        + f": {len(full):,} runs, which `--plan` estimates at about {duration(estimate)} of one "
        "core",
        f"({lang_layers} layers, attention alone or with a feed-forward net, "
        f"{' or '.join(map(str, lang_heads))} heads, D {' or '.join(map(str, lang_d))}), "
        f"{len({r['seed'] for r in lang_rows})} seeds, a fixed budget of {lang_steps:,} steps",
        f"with {WORD_EN[len(LANGUAGE_ARMS)]} arms",
        f"given more (`--untrained`): {max(longer):,} steps with the learned W_o alone where no "
        f"seed learned, {min(longer):,} with every arm",
    ]
    assert not missing(flat("README.md"), figures)


def test_the_readme_quotes_the_tasks_defaults_and_limits_as_the_code_has_them():
    from tfviz import settings
    from tfviz.core.tasks import TASKS
    from tfviz.training.recipes import CLASS_SIZES

    readme = flat("README.md")
    for name, task in TASKS.items():
        a = task.alphabet
        if a == "0123456789":
            said = "digits"
        elif a == "()":
            said = "`(` and `)`"
        else:
            assert a == "".join(chr(ord(a[0]) + i) for i in range(len(a)))  # a run of letters
            said = f"letters {a[0]}-{a[-1]}"
        assert row("README.md", f"`{name}`")[1] == said, name
    (low,), (high,) = {t.min_len for t in TASKS.values()}, {t.max_len for t in TASKS.values()}
    c = CLASS_SIZES
    hostile = {}
    for node in ast.parse(read("tests/hf/test_hostile_folders.py")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in (
            "FOLDERS",
            "ZIPS",
        ):
            assert all(isinstance(e, ast.Call) for e in node.value.elts)  # one case each
            hostile[node.targets[0].id] = len(node.value.elts)
    script = (ROOT / "tfviz" / "plots" / "standalone.js").stat().st_size
    quoted = int(re.search(r"on a canvas, in ~(\d+) kB", readme).group(1))
    assert abs(quoted * 1000 - script) <= 0.1 * script, (quoted, script)
    figures = [
        f"Every task accepts every length from {low} to {high}.",
        f"one model size for every task (D={c['d_model']}, {c['n_heads']} heads, "
        f"{c['n_layers']} layers, d_ff={c['d_ff']})",
        f"`TFVIZ_MAX_UPLOAD_MB` (default {settings.DEFAULT_UPLOAD_MB};",
        f"`TFVIZ_DRAIN_SECONDS` (default {settings.DEFAULT_DRAIN_SECONDS}:",
        f"tries {hostile['FOLDERS']} hostile folders and {hostile['ZIPS']} zips",
        f"(more than {constant('tfviz/ui/views/attention.py', 'LONG_PIECES')} word-pieces) shows "
        f"a window of {constant('tfviz/ui/views/attention.py', 'WINDOW')}",
        f"the task accuracy on {constant('tfviz/ui/compute.py', 'ACCURACY_N')} random examples",
    ]
    assert not missing(readme, figures)


def test_the_bundled_models_metrics_are_on_as_many_examples_as_the_readme_says():
    from tfviz import load_checkpoint
    from tfviz.training.recipes import RECIPES as TOY

    (n,) = {load_checkpoint(ROOT / "models" / f"{m}.safetensors")[1].metrics["n"] for m in TOY}
    assert f"accuracy each reaches on {n:,} fresh examples" in flat("README.md")


# ------------------------------------------------------------------------------------------------
# docs/deploy.md and docs/docker.md (English only)
# ------------------------------------------------------------------------------------------------


def test_the_deploy_sizes_are_the_train_forms_largest_model():
    """The largest model the Train form offers (its widest choices, on the task with the most
    parameters; the language-model form's largest is smaller), the bundled size, the uploads a
    session holds, the shared volume's size."""
    from tfviz import settings
    from tfviz.core.tasks import TASKS
    from tfviz.serve import work

    form = read("tfviz/ui/views/train/new_model.py")
    boxes = dict(re.findall(r'size_box\(\w+, "train\.(\w+)", (\[[^\]]*\])', form))
    widest = {k: max(ast.literal_eval(v)) for k, v in boxes.items()}
    sizes = dict(
        d_model=widest["d_model"], n_heads=widest["heads"], n_layers=widest["layers"],
        d_ff=widest["d_ff"],
    )  # fmt: skip
    largest = max(t.model_config(**sizes).n_params for t in TASKS.values())
    lm = language.language_config(
        language.corpus_vocabulary(), max(work.LM_CONTEXTS), n_layers=work.LM_LAYERS[1],
        n_heads=1, d_model=max(work.LM_D_MODELS), ffn=True, positions="learned",
    ).n_params  # fmt: skip
    assert lm < largest
    params, mb = f"{largest / 1e6:.1f}", largest * 4 / 1e6
    bundled = (ROOT / "models" / "reverse.safetensors").stat().st_size / 1e6
    uploads = constant("tfviz/ui/uploads.py", "MAX_UPLOADS")
    storage = re.search(r"storage:\s*(\S+)", read("deploy/k8s/pvc.yaml")).group(1)
    figures = [
        f"about {params} M parameters, {mb:.1f} MB as float32",
        f"400 students x 3 models x {mb:.1f} MB is {400 * 3 * mb / 1000:.0f} GB at worst",
        f"A bundled-size model is {bundled:.1f} MB",
        f"{params} M x 4 bytes x 4 = {largest * 16 / 1e6:.0f} MB",
        f"Each session may also hold {uploads} uploaded models of up to "
        f"{settings.DEFAULT_UPLOAD_MB} MB",
        f"(`ReadWriteMany`, {storage})",
    ]
    assert not missing(flat("docs/deploy.md"), figures)


def test_the_docker_doc_quotes_the_dockerfile():
    dockerfile = read("Dockerfile")
    health = re.search(r"^HEALTHCHECK (.*)$", dockerfile, re.M).group(1)
    interval, start, retries = (
        int(re.search(rf"--{k}=(\d+)", health).group(1))
        for k in ("interval", "start-period", "retries")
    )
    (user,) = re.findall(r"^USER (\d+)", dockerfile, re.M)
    (port,) = re.findall(r"^EXPOSE (\d+)", dockerfile, re.M)
    figures = [
        f"every {interval} s it asks",
        f"fails {WORD_EN[retries]} checks in a row",
        f"allows {start} s for startup",
        f"the unprivileged user {user}",
        f"make sure user {user} can write",
        f"docker run -p {port}:{port} tfviz",
    ]
    assert not missing(flat("docs/docker.md"), figures)


def test_a_figure_off_by_one_would_be_caught():
    """The checks above can fail: the corpus's size one character off is in neither doc."""
    manifest = corpus.load_manifest(corpus.CORPUS_DIR)
    for rel in LANGUAGE_DOCS.values():
        assert f"{manifest['train']['chars'] + 1:,}" not in read(rel)
