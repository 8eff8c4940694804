"""The language atlas in words, from its rows: a section of models/atlas/README.md and the
sections of docs/claims.md and docs/claims.zh.md between LANGUAGE_MARKERS, written by
`python -m tfviz.cli.atlas report`. Every number is computed here from models/atlas/language.jsonl
by tfviz.experiments.atlas_stats.analyse_language; tests/experiments/test_language_atlas_rows.py
checks that
the shipped files say what this writes.
"""

from __future__ import annotations

import numpy as np

from tfviz.analysis.induction import HEAD_FORMED
from tfviz.core import modes
from tfviz.experiments import atlas_stats
from tfviz.experiments.atlas_cells import LANGUAGE_ARMS, LanguageCell
from tfviz.experiments.atlas_store import made_by

LANGUAGE_MARKERS = ("<!-- language-atlas: begin (written by python -m tfviz.cli.atlas report) -->",
                    "<!-- language-atlas: end -->")  # fmt: skip
# A head counts as an induction head from this score on, as in the lessons and Analysis.
INDUCTION_LINE = HEAD_FORMED
AGAINST = tuple(a for a in LANGUAGE_ARMS if a != "learned")

LEARNED, NONE, BLOCK = modes.LEARNED, modes.IDENTITY, modes.BLOCK_DIAGONAL
WORDS = {
    "en": {
        "arm": {NONE: "no W_o", BLOCK: "a block-diagonal W_o",
                "frozen": "a W_o frozen at its random start", "gated": "a gated W_o"},
        "short": {LEARNED: "learned", NONE: "none", BLOCK: "block-diag.",
                  "frozen": "frozen", "gated": "gated"},
        "yes": "yes", "no": "no",
    },
    "zh": {
        "arm": {NONE: "去掉 W_o", BLOCK: "块对角的 W_o",
                "frozen": "冻结在随机初值的 W_o", "gated": "带门控的 W_o"},
        "short": {LEARNED: "学到的", NONE: "去掉", BLOCK: "块对角",
                  "frozen": "冻结", "gated": "门控"},
        "yes": "有", "no": "无",
    },
}  # fmt: skip


def _n(x: float) -> str:
    return f"{x:+.3f}".replace("-", "−")


def _iv(c: atlas_stats.Comparison) -> str:
    iv = c.interval
    return f"{_n(c.difference)} [{_n(iv.low)}, {_n(iv.high)}]" if iv else _n(c.difference)


def _p(c: atlas_stats.Comparison) -> str:
    return "–" if c.p_holm is None else f"{c.p_holm:.2g}"


def _arch(cell: LanguageCell, lang: str) -> str:
    w = WORDS[lang]
    ffn = w["yes"] if cell.ffn else w["no"]
    if lang == "zh":
        return f"{cell.n_layers} 层，前馈网络{ffn}，{cell.n_heads} 头，D {cell.d_model}"
    return f"{cell.n_layers} layers, FFN {ffn}, {cell.n_heads} heads, D {cell.d_model}"


def counts(results: dict, arm: str, measure: str = atlas_stats.LANGUAGE_HEADLINE) -> dict:
    """Cells where the learned W_o does better than arm (helps), worse (hurts) or is not told
    apart (unclear), and m, Holm's family size; cells without the arm's runs yet (a sweep still
    filling the file) are not counted. The page's sentences count with it too."""
    found = atlas_stats.verdict_counts(results, arm, measure)
    out = {v: found[v] for v in ("helps", "hurts", "unclear")}
    return out | {"m": atlas_stats.family_size(results, arm, measure)}


def best_induction(rows: dict) -> dict[str, float]:
    """arm -> the highest best-head induction score of any of its runs."""
    best: dict[str, float] = {}
    for r in rows.values():
        best[r["arm"]] = max(best.get(r["arm"], 0.0), float(r["induction"]["score"]))
    return best


def recipe_of(rows: dict) -> dict:
    r = next(iter(rows.values()))
    seeds = max(int(x["seed"]) for x in rows.values()) + 1
    return r["recipe"] | {"steps": r["steps"], "seeds": seeds, "windows": r["valid_windows"]}


def claims_section(rows: dict, lang: str = "en", probe: dict | None = None) -> str:
    """docs/claims(.zh).md's account of the language atlas, between LANGUAGE_MARKERS; probe:
    the rows of one cell run again at another learning rate (atlas_store.LANGUAGE_LR)."""
    results = atlas_stats.analyse_language(rows)
    if not results:
        return ""
    rec = recipe_of(rows)
    text = [_recipe_paragraph(rows, results, rec, lang), "", _against_none(results, lang)]
    for arm in AGAINST[1:]:
        text += ["", _against_arm(results, arm, lang)]
    text += ["", reading(results, lang) + lr_probe(results, probe or {}, lang, rec["lr"])]
    text += ["", _induction_heads(best_induction(rows), lang), "", _table(results, lang)]
    return "\n".join(text) + "\n"


def _recipe_paragraph(rows: dict, results: dict, rec: dict, lang: str) -> str:
    """What was trained and how it is read: the cells, arms, recipe and the statistics."""
    learned_loss = [float(r["valid_loss"]) for r in rows.values() if r["arm"] == "learned"]
    chars = rec["windows"] * rec["context"]
    if lang == "zh":
        return (
            f"**在真实文本上：语言图谱。** {len(rows)} 次运行："
            "以内置的莎士比亚语料训练的因果字符模型，"
            "2 层，只有注意力或带前馈网络，4 或 8 个头，D 为 64 或 128（8 个格子），"
            f"每格 {rec['seeds']} 个随机种子，五种做法只在 W_o 上不同（学到的、去掉、块对角、"
            "冻结在随机初值、在 W_o 之前加逐头的 sigmoid 门控，Qiu 等 2025）。"
            f"每次运行固定 {rec['steps']:,} 步（上下文 {rec['context']}，"
            f"批量 {rec['batch_size']}，AdamW，学习率 {rec['lr']}，余弦调度），"
            f"读它在模型从未见过的四部剧本的前 {chars:,} 个字符上的验证损失"
            f"（每字符奈特；学到的 W_o 为 {min(learned_loss):.2f} 到 {max(learned_loss):.2f}）。"
            "每个差值是学到的减去另一种做法，对随机种子取平均，附 Welch 95% 区间；"
            f"p 值在每种做法的 {len(results)} 个格子间做 Holm 校正。"
        )
    return (
        f"**On real text: the language atlas.** {len(rows)} runs: causal character models of the "
        f"bundled Shakespeare corpus, 2 layers, attention alone or with a feed-forward net, 4 or "
        f"8 heads, D 64 or 128 (8 cells), {rec['seeds']} seeds a cell, five arms that differ at "
        f"W_o alone (learned; none; block-diagonal; frozen at its random start; learned after a "
        f"per-head sigmoid gate, Qiu et al. 2025). Every run makes {rec['steps']:,} steps (context "
        f"{rec['context']}, batch {rec['batch_size']}, AdamW at {rec['lr']}, cosine schedule) and "
        f"is read by its validation loss in nats per character on the first {chars:,} "
        f"characters of four plays it never saw ({min(learned_loss):.2f} to "
        f"{max(learned_loss):.2f} with the learned W_o). Each difference is learned minus the "
        f"other arm, mean over seeds, with its Welch 95% interval; p is Holm-adjusted across the "
        f"{len(results)} cells of each arm."
    )


def _against_none(results: dict, lang: str) -> str:
    """The headline: the learned W_o against none, at the end and half way, and where the
    difference is largest."""
    ident = counts(results, "identity")
    mid = counts(results, "identity", "valid_mid")
    largest = atlas_stats.largest_difference(results, "identity", atlas_stats.LANGUAGE_HEADLINE)
    if lang == "zh":
        line = (
            f"对比去掉 W_o：训练结束时，{len(results)} 个格子中，"
            f"学到的 W_o 在 {ident['helps']} 个格子里验证损失更低，"
            f"在 {ident['hurts']} 个格子里更高，{ident['unclear']} 个格子分不出"
            f"（Holm，m = {ident['m']}）；"
            f"训练到一半时分别为 {mid['helps']}、{mid['hurts']}、{mid['unclear']}。"
        )
        if largest is not None:
            line += (
                f"差值最大的是 {_arch(results[largest.cell].cell, lang)}：{_iv(largest)} 奈特，"
                f"Holm p = {_p(largest)}。"
            )
        return line
    line = (
        f"Against no W_o, at the end of training the learned W_o has the lower validation loss in "
        f"{ident['helps']} of the {len(results)} cells, the higher in {ident['hurts']}, and is "
        f"not told apart in {ident['unclear']} (Holm, m = {ident['m']}); half way through, "
        f"{mid['helps']}, {mid['hurts']} and {mid['unclear']}."
    )
    if largest is not None:
        line += (
            f" The largest difference is in {_arch(results[largest.cell].cell, lang)}: "
            f"{_iv(largest)} nats, Holm p = {_p(largest)}."
        )
    return line


def _against_arm(results: dict, arm: str, lang: str) -> str:
    """The learned W_o against one of the other arms: its verdicts' counts and the cell where
    the difference is largest."""
    w = WORDS[lang]
    c = counts(results, arm)
    big = atlas_stats.largest_difference(results, arm, atlas_stats.LANGUAGE_HEADLINE)
    where = None if big is None else _arch(results[big.cell].cell, lang)
    if lang == "zh":
        line = (
            f"对比{w['arm'][arm]}：学到的 W_o 更好 {c['helps']} 格，更差 {c['hurts']} 格，"
            f"分不出 {c['unclear']} 格"
        )
        if big is not None:
            line += f"（差值最大的是 {where}，{_iv(big)}，Holm p = {_p(big)}）"
        return line + "。"
    line = (
        f"Against {w['arm'][arm]}: the learned W_o does better in {c['helps']} cells, worse "
        f"in {c['hurts']}, not told apart in {c['unclear']}"
    )
    if big is not None:
        line += f" (largest difference: {where}, {_iv(big)}, Holm p = {_p(big)})"
    return line + "."


def _induction_heads(best: dict[str, float], lang: str) -> str:
    """Each arm's best induction score, and the arms with a run that formed an induction head."""
    w = WORDS[lang]
    formed = [a for a in LANGUAGE_ARMS if best.get(a, 0) >= INDUCTION_LINE]
    if lang == "zh":
        ind = "、".join(f"{w['short'][a]} {best.get(a, 0):.3f}" for a in LANGUAGE_ARMS)
        return f"归纳头：各种做法在所有运行中最好的归纳分数分别为{ind}；" + (
            f"达到 {INDUCTION_LINE} 的做法：{'、'.join(w['short'][a] for a in formed)}。"
            if formed
            else f"没有一次运行达到 {INDUCTION_LINE}："
            "在这个预算内，无论有没有 W_o，都没有形成归纳头。"
        )
    ind = ", ".join(f"{w['short'][a]} {best.get(a, 0):.3f}" for a in LANGUAGE_ARMS)
    return f"Induction heads: the best induction score of any run, per arm: {ind}. " + (
        f"Arms with a run at {INDUCTION_LINE} or more: {', '.join(w['short'][a] for a in formed)}."
        if formed
        else f"No run reached {INDUCTION_LINE}: within this budget no induction head formed, "
        "with W_o or without."
    )


def reading(results: dict, lang: str) -> str:
    """What article 000's claim (without W_o training is slower and ends worse) becomes on text:
    the cells where no W_o ended measurably worse and those where it ended better, by name, and
    the caveat of one recipe for every cell. Worded from the verdicts alone."""
    head = atlas_stats.LANGUAGE_HEADLINE
    by = {
        v: [r.cell for r in results.values() if r.verdict(NONE, head) == v]
        for v in ("helps", "hurts")
    }
    helps, hurts = (
        ("；" if lang == "zh" else "; ").join(_arch(c, lang) for c in by[v])
        for v in ("helps", "hurts")
    )
    n = len(results)
    if lang == "zh":
        k, j = len(by["helps"]), len(by["hurts"])
        lead = "**文章的论断在文本上变成了什么。** "
        if k and j:
            said = (
                f"{lead}取决于架构：去掉 W_o 在 {k} 个格子里训练结束时明显更差（{helps}），"
                f"在 {j} 个格子里反而明显更好（{hurts}）。"
            )
        elif k:
            said = (
                f"{lead}在 {n} 个格子中的 {k} 个里，去掉 W_o 在训练结束时明显更差（{helps}），"
                "与文章一致；其余格子分不出。"
            )
        elif j:
            said = f"{lead}没有一个格子显示去掉 W_o 更差；在 {j} 个格子里反而明显更好（{hurts}）。"
        else:
            said = f"{lead}{n} 个格子中没有一个能把去掉 W_o 与学到的 W_o 区分开。"
        return (
            said
            + mixing(results, by, lang)
            + (
                "所有格子用同一个配方（同一学习率、同样的步数），比较的是这个配方下的各种做法，"
                "而不是每种做法各自最好的设置。"
            )
        )
    if by["helps"] and by["hurts"]:
        said = (
            f"**What article 000's claim becomes on text.** It depends on the architecture: "
            f"without W_o, training ended measurably worse in {len(by['helps'])} cells "
            f"({helps}) and measurably better in {len(by['hurts'])} ({hurts})."
        )
    elif by["helps"]:
        said = (
            f"**What article 000's claim becomes on text.** In {len(by['helps'])} of the {n} "
            f"cells, training without W_o ended measurably worse ({helps}), as the article "
            f"says; the others are not told apart."
        )
    elif by["hurts"]:
        said = (
            f"**What article 000's claim becomes on text.** In no cell did training without "
            f"W_o end worse; in {len(by['hurts'])} it ended measurably better ({hurts})."
        )
    else:
        said = (
            f"**What article 000's claim becomes on text.** In none of the {n} cells is the "
            f"model without W_o told apart from the learned one."
        )
    return (
        said
        + mixing(results, by, lang)
        + (
            " Every cell trains with one recipe (one learning rate, one budget of steps): "
            "the arms are compared under it, not each at its own best settings."
        )
    )


def mixing(results: dict, by: dict, lang: str) -> str:
    """Whether what the learned W_o adds over none is its mixing of heads: said only where it
    helps somewhere and neither a block-diagonal W_o (it mixes no heads, and the value map could
    absorb it: no function the model without W_o lacks) nor a frozen random one does worse than
    the learned W_o in any cell."""
    found = {arm: counts(results, arm) for arm in (BLOCK, "frozen")}
    if not by["helps"] or any(c["helps"] for c in found.values()):
        return ""
    block, frozen = found[BLOCK]["hurts"], found["frozen"]["hurts"]
    if lang == "zh":
        return (
            "但对块对角的 W_o（它不混合任何头，而且值映射可以把它吸收进去："
            "它没有给去掉 W_o 的模型增加任何函数），"
            f"学到的 W_o 在没有一个格子里更好（在 {block} 个格子里更差）；"
            f"对冻结在随机初值的 W_o 也没有一个格子更好（{frozen} 个格子更差）。"
            "所以在这些运行里，学到的 W_o 比去掉它多出来的，并不是它对各头的混合："
            "每个头一个映射、或者一个固定的随机混合，都一样好。"
        )
    return (
        f" Yet against a block-diagonal W_o, which mixes no heads (and which the value map could "
        f"absorb: it gives the model without W_o no function it lacks), the learned W_o does "
        f"better in no cell (worse in {block}), and against a W_o frozen at random in no cell "
        f"(worse in {frozen}). So in these runs what the learned W_o adds over none is not its "
        f"mixing of the heads: a map of each head's own, or a fixed random mix, does as well."
    )


def lr_probe(results: dict, probe: dict, lang: str, main_lr: float) -> str:
    """The probe's sentence (empty without probe rows): its cell's learned W_o against none at the
    probe's learning rate, beside the same at the atlas's."""
    at = atlas_stats.analyse_language(probe)
    found = [(k, r.comparisons.get((NONE, atlas_stats.LANGUAGE_HEADLINE))) for k, r in at.items()]
    found = [(k, c) for k, c in found if c is not None and c.interval is not None]
    if not found or found[0][0] not in results:
        return ""
    key, c = found[0]
    main = results[key].comparisons[(NONE, atlas_stats.LANGUAGE_HEADLINE)]
    lr = next(iter(probe.values()))["recipe"]["lr"]
    learned, none = np.mean(c.learned), np.mean(c.other)
    where = _arch(results[key].cell, lang)
    if lang == "zh":
        return (
            f"学习率的影响：把 {where} 这个格子改用学习率 {lr} 再训练"
            f"（{len(c.learned)} 个随机种子，数据在 `models/atlas/language_lr.jsonl`），"
            f"学到的 W_o 为 {learned:.3f} 奈特，去掉 W_o 为 {none:.3f}，"
            f"差值 {_iv(c)}（未经校正）；在学习率 {main_lr} 下差值是 {_iv(main)}。"
        )
    return (
        f" How much the recipe decides: the cell {where} trained again at a learning rate of "
        f"{lr} ({len(c.learned)} seeds, rows in `models/atlas/language_lr.jsonl`) ended at "
        f"{learned:.3f} nats with the learned W_o and {none:.3f} without, a difference of "
        f"{_iv(c)} (uncorrected), where at {main_lr} it was {_iv(main)}."
    )


def _table(results: dict, lang: str) -> str:
    """Cells down; the learned arm's mean validation loss, then learned - other per arm."""
    w = WORDS[lang]
    head = atlas_stats.LANGUAGE_HEADLINE
    first = "格子" if lang == "zh" else "cell"
    learned = "学到的 W_o（奈特/字符）" if lang == "zh" else "learned W_o (nats/char)"
    cols = [first, learned] + [
        (f"学到的 − {w['short'][a]}" if lang == "zh" else f"learned − {w['short'][a]}")
        for a in AGAINST
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for res in results.values():
        comps = [res.comparisons.get((a, head)) for a in AGAINST]
        base = next((c for c in comps if c is not None), None)
        mean = "" if base is None else f"{np.mean(base.learned):.3f}"
        cells = [
            ""
            if c is None
            else f"{_iv(c)}, p {_p(c)}"
            + (" ✓" if c.verdict == "helps" else " ✗" if c.verdict == "hurts" else "")
            for c in comps
        ]
        lines.append("| " + " | ".join([_arch(res.cell, lang), mean, *cells]) + " |")
    note = (
        "（✓ 表示学到的 W_o 更好，✗ 表示更差，均为 Holm 校正后 p < 0.05；其余分不出。）"
        if lang == "zh"
        else "(✓: the learned W_o does better, ✗: worse, Holm-adjusted p < 0.05; otherwise not "
        "told apart.)"
    )
    return "\n".join(lines) + "\n\n" + note


def readme_section(rows: dict, made: list[dict] = (), probe: dict | None = None) -> list[str]:
    """models/atlas/README.md's section on the language atlas; made: what made the rows
    (tfviz.experiments.atlas_store.read_made)."""
    if not rows:
        return []
    seconds = [r["seconds"] for r in rows.values()]
    torch_versions = sorted({r["torch_version"] for r in rows.values()})
    return [
        "## The language atlas (language.jsonl)",
        "",
        f"Written from `language.jsonl` ({len(rows)} runs, a run took {np.median(seconds):.1f} s "
        f"(median; {sum(seconds) / 3600:.2f} h of one core in all), torch "
        f"{', '.join(torch_versions)}), made by `python -m tfviz.cli.atlas run --language`.",
        made_by(list(made)),
        "",
        claims_section(rows, "en", probe),
    ]


def replace_section(document: str, section: str) -> str:
    """document with the text between LANGUAGE_MARKERS replaced by section (markers kept)."""
    begin, end = LANGUAGE_MARKERS
    if begin not in document or end not in document:
        raise ValueError("the document has no language-atlas markers")
    before, rest = document.split(begin, 1)
    _, after = rest.split(end, 1)
    return f"{before}{begin}\n{section}{end}{after}"
