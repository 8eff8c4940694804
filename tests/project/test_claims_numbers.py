"""docs/claims.md and claims.zh.md quote the bundled toy atlas's numbers by hand (sections 2 and 3):
each quoted figure is computed here from models/atlas/runs.jsonl and must appear, so written the
same way, in both languages. (The language atlas's section is written from its rows: see
tests/experiments/test_language_atlas_rows.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tfviz.experiments import atlas_stats
from tfviz.experiments.atlas_store import BUNDLED, read_rows

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def results():
    return atlas_stats.analyse(read_rows(BUNDLED))


@pytest.fixture(scope="module", params=["claims.md", "claims.zh.md"])
def doc(request):
    return (DOCS / request.param).read_text(encoding="utf-8")


def _signed(x: float, digits: int) -> str:
    return f"{x:+.{digits}f}".replace("-", "−")


def _mean(values) -> float:
    return sum(values) / len(values)


def quoted(results) -> list[str]:
    """Every figure the hand-written sections quote, formatted as they write it."""
    trained = [r for r in results.values() if r.trained]
    outside = [
        r
        for r in trained
        if (c := r.comparisons.get(("identity", "steps"))) is not None
        and c.interval is not None
        and not c.interval.low <= 0 <= c.interval.high
    ]
    figures = [
        f"{len(results)} ",  # cells
        f"{len(trained)} ",  # trained cells
        f"m = {atlas_stats.family_size(results, 'identity')}",
        f"{sum(r.cell.ffn for r in trained)} ",  # trained cells with a feed-forward net
    ]
    assert len(outside) == 6  # "six cells" / "六个格子"
    # "the three such cells that did not train" / "三个没有学会的这类格子": the mechanism hint's
    hint = atlas_stats.mechanism_hint(results)
    assert len(hint.cells) == 3
    assert all(  # "In `sum` neither the arm without W_o nor the mechanism arm differs"
        c.interval.low <= 0 <= c.interval.high
        for (arm, measure), c in results["sum/L1/noffn/H4/D64/post"].comparisons.items()
        if measure != "steps" and arm in ("identity", "identity_readout")
    )
    # The frozen arm: no cell differs after correction; its largest difference as quoted.
    assert atlas_stats.verdict_counts(results, "frozen")["unclear"] == len(trained)
    frozen = atlas_stats.largest_difference(results, "frozen")
    assert frozen.cell == "histogram/L1/noffn/H4/D64/post"
    figures += [
        f"{-frozen.difference:.0f} ",  # steps sooner with the learned W_o
        f"[{_signed(frozen.interval.low, 0)}, {_signed(frozen.interval.high, 0)}]",
        f"Holm p = {frozen.p_holm:.2f}",
    ]
    slow = results["max_position/L2/ffn/H4/D64/post"].comparisons[("identity", "steps")]
    figures += [
        f"{_mean(slow.learned):.0f}",
        f"{_mean(slow.other):.0f}",
        f"+{slow.difference:.0f}, [+{slow.interval.low:.0f}, +{slow.interval.high:.0f}]",
        f"Holm p = {slow.p_holm:.2f}",
    ]
    block = results["reverse/L2/ffn/H4/D64/post"].comparisons[("block_diagonal", "steps")]
    figures += [
        f"{block.difference:.0f}",
        f"[+{block.interval.low:.0f}, +{block.interval.high:.0f}]",
        f"Holm p = {block.p_holm:.3f}",
    ]

    def comp(cell, arm, measure):
        return results[cell].comparisons[(arm, measure)]

    diff = "difference/L1/noffn/H4/D64/post"
    rev = "reverse/L1/noffn/H4/D64/post"
    c = comp(diff, "identity", "final_loss")
    figures += [
        f"{_mean(c.learned):.2f}",
        f"{_mean(c.other):.2f}",
        _signed(c.difference, 2),
        f"[{_signed(c.interval.low, 2)}, {_signed(c.interval.high, 2)}]",
    ]
    c = comp(diff, "identity", "metric")
    figures += [f"{_mean(c.learned):.2f}", f"{_mean(c.other):.2f}"]
    c = comp(rev, "identity", "metric")
    figures += [
        f"{_mean(c.learned):.3f}",
        f"{_mean(c.other):.3f}",
        _signed(c.difference, 3),
        f"[{_signed(c.interval.low, 3)}, {_signed(c.interval.high, 3)}]",
    ]
    for cell in (diff, rev):  # the readout arm's accuracy: 0.45 and 0.46
        figures.append(f"{_mean(comp(cell, 'identity_readout', 'metric').other):.2f}")
    c = comp(rev, "identity_readout", "final_loss")
    figures.append(
        f"{_signed(c.difference, 3)}, [{_signed(c.interval.low, 3)}, {_signed(c.interval.high, 3)}]"
    )
    c = comp(diff, "identity_readout", "final_loss")
    figures.append(
        f"{_signed(c.difference, 2)}, [{_signed(c.interval.low, 2)}, {_signed(c.interval.high, 2)}]"
    )
    c = comp("difference/L1/ffn/H4/D64/post", "identity", "final_loss")
    figures += [
        f"{_mean(c.other):.3f}",
        f"{_mean(c.learned):.3f}",
        f"{_signed(c.difference, 2)}, "
        f"[{_signed(c.interval.low, 2)}, {_signed(c.interval.high, 2)}]",
    ]
    c = comp("difference/L1/ffn/H4/D64/post", "identity", "metric")
    figures += [f"{_mean(c.other):.2f}", f"{_mean(c.learned):.2f}"]
    c = comp("reverse/L1/ffn/H4/D64/post", "identity", "metric")
    figures += [f"{_mean(c.other):.2f}", f"{_mean(c.learned):.2f}"]
    return figures


def test_every_figure_the_claims_quote_from_the_toy_atlas_is_its_rows(results, doc):
    # the docs write a minus sign as "−" in intervals and "-" in a few plain differences; the
    # Chinese text separates with "，" and says "Holm 校正后 p"
    text = doc.replace("，", ", ").replace("Holm 校正后 p", "Holm p")
    missing = [f for f in quoted(results) if f not in text and f.replace("−", "-") not in text]
    assert not missing, f"figures not in the doc as the rows give them: {missing}"


WORDS = {2: ("two", "两"), 3: ("three", "三"), 4: ("four", "四"), 5: ("five", "五")}


def test_the_count_of_unread_cells_with_the_mechanism_run_is_the_rows(results, doc):
    n = len(atlas_stats.mechanism_hint(results).cells)
    en, zh = WORDS[n]
    assert (
        f"in the {en} such cells that" in doc.replace("\n", " ")
        or f"来自{zh}个没有学会的这类格子" in doc
    )


def test_a_changed_figure_would_be_caught(results, doc):
    # the check above can fail: a figure one unit off is not in the doc
    slow = results["max_position/L2/ffn/H4/D64/post"].comparisons[("identity", "steps")]
    assert f"Holm p = {slow.p_holm + 0.01:.2f}" not in doc


def test_the_worked_example_is_read_as_the_lesson_reads_it(doc):
    """Section 1: rows of W read concat, columns build outputs (the lesson's W, ARTICLE_W_O); the
    two entries the lesson changed, and the figures of the printed W, are what the doc says."""
    import numpy as np

    from tfviz.lessons import ARTICLE_W_O, ARTICLE_Z0, ARTICLE_Z1, two_head_example

    lesson = np.array(ARTICLE_W_O)
    printed = lesson.copy()
    printed[0, 2] = printed[3, 1] = 0.0  # the article's matrix: the two entries the lesson changed
    changed = [tuple(int(i) for i in ij) for ij in np.argwhere(lesson != printed)]
    assert changed == [(0, 2), (3, 1)]
    concat = np.array([*ARTICLE_Z0, *ARTICLE_Z1])
    out = concat @ printed  # attn_out[d] = sum_j concat[j] W[j, d]
    assert out[1] == pytest.approx(0.1) and out[2] == pytest.approx(0.4)
    assert two_head_example().output[0] == pytest.approx(1.8) == out[0]
    assert printed[1] @ concat == pytest.approx(0.2)  # the article's 0.2: W's row 1, not column 1
    text = " ".join(doc.split())
    if "第 0 行" in text:  # Chinese
        assert "第 0 行第 2 列 0 → 0.4，第 3 行第 1 列 0 → 0.3" in text
        assert "第 0 列不变" in text
    else:
        assert "(row 0, column 2: 0 → 0.4; row 3, column 1: 0 → 0.3)" in text
        assert "column 0 is unchanged" in text
    assert "1.0 · 0.1 = 0.1" in text and "2.0 · 0.2 = 0.4" in text
    assert "1.0 · 0.8 + 2.0 · 0.5 = 1.8" in text


def test_what_more_steps_made_of_the_untrained_cells_is_the_longer_rows(results, doc):
    """Section 2's account of the cells that did not train, given 4,000 steps (the learned W_o,
    2 seeds, where no seed had learned) or 3,000 (every arm, where some had)."""
    from tfviz.experiments.atlas_store import LONGER

    rows = read_rows(LONGER)
    # the first look: the learned W_o alone, seeds 0 and 1
    never = {
        k: r for k, r in rows.items() if k.endswith(("/learned/s0/b4000", "/learned/s1/b4000"))
    }
    states = atlas_stats.longer(results, never)
    untrained = [k for k, r in results.items() if not r.trained]
    nobody = [k for k in untrained if results[k].learned_reached == 0]
    some = [k for k in untrained if results[k].learned_reached > 0]
    counts = atlas_stats.longer_counts({k: states[k] for k in nobody})
    assert (len(nobody), len(some)) == (14, 11)
    assert (counts["trains"], counts["partly"], counts["none"]) == (4, 1, 9)
    assert {k for k in nobody if states[k].state == "none"} >= {
        c for c in nobody if c.startswith("reverse/L1/")
    }
    steps = sorted(
        r["steps_to_target"] for r in never.values() if r["cell"] == "difference/L1/ffn/H4/D64/post"
    )
    text = " ".join(doc.split())
    assert steps == [1750, 2100] and "1,750" in text and "2,100" in text
    n_runs = len(read_rows(BUNDLED))
    assert f"{n_runs:,}" in text  # "56 cells, 1,155 runs"
    for n in (14, 4, 9, 11):
        assert f" {n} " in text or f"{n} 个" in text


def test_the_cells_read_at_3000_steps_are_quoted_as_their_rows_give(results, doc):
    from tfviz.experiments.atlas_store import LONGER

    states = atlas_stats.longer(results, read_rows(LONGER))
    some = [k for k, r in results.items() if not r.trained and r.learned_reached > 0]
    read = {k: states[k].result for k in some if states[k].state == "read"}
    still = {k: states[k] for k in some if states[k].state == "partly"}
    assert (len(read), len(still)) == (8, 3)
    every = {k: x.result for k, x in states.items() if x.state == "read"}
    assert atlas_stats.family_size(every, "identity") == 12  # "m = 12"
    text = " ".join(doc.split()).replace("，", ", ").replace("Holm 校正后 p", "Holm p")
    differs = {k: r for k, r in every.items() if r.verdict("identity") != "unclear"}
    assert list(differs) == ["difference/L2/ffn/H1/D64/post"]
    for arm in ("identity", "frozen"):  # the one cell that differs: the learned W_o slower
        c = differs["difference/L2/ffn/H1/D64/post"].comparisons[(arm, "steps")]
        assert c.verdict == "hurts" and f"{c.difference:.0f}" in text
        assert f"[+{c.interval.low:.0f}, +{c.interval.high:.0f}]" in text
        assert f"Holm p = {c.p_holm:.2g}" in text
    for cell in ("difference/L2/ffn/H4/D64/post", "max_position/L2/ffn/H1/D64/post"):
        c = read[cell].comparisons[("identity", "steps")]
        assert f"+{c.difference:.0f}" in text
        assert f"[+{c.interval.low:.0f}, +{c.interval.high:.0f}]" in text
    assert sorted(f"{x.reached} " for x in still.values()) == ["1 ", "2 ", "4 "]
