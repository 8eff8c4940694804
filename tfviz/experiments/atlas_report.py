"""models/atlas/README.md, written from the bundled rows: `python -m tfviz.cli.atlas report`.

Every number in it is computed from models/atlas/runs.jsonl (the toy atlas) and
models/atlas/language.jsonl (the language atlas, tfviz.experiments.language_report, which also
writes its sections of docs/claims.md and claims.zh.md) by tfviz.experiments.atlas_stats.
tests/experiments/test_atlas.py and tests/experiments/test_language_atlas_rows.py check the shipped
files are what this
writes.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from tfviz.core import modes
from tfviz.experiments import atlas, atlas_stats, language_report
from tfviz.experiments.atlas_cells import LANGUAGE_FORMAT
from tfviz.experiments.atlas_store import (
    BUNDLED,
    LANGUAGE,
    LANGUAGE_LR,
    LONGER,
    made_by,
    read_made,
    read_rows,
)

DOCS = BUNDLED.parents[2] / "docs"

VERDICT_WORDS = {
    "helps": "W_o helps",
    "hurts": "W_o costs",
    "unclear": "not told apart",
    "not_trained": "not trained",
    "missing": "no runs",
}
ARM_WORDS = {
    modes.IDENTITY: "no W_o (identity)",
    modes.BLOCK_DIAGONAL: "a block-diagonal W_o",
    "frozen": "a W_o frozen at its random start",
    "identity_readout": "no W_o with its own readout (the mechanism run)",
}


def _num(x: float) -> str:
    return f"{x:.3g}"


def _interval(c: atlas_stats.Comparison) -> str:
    iv = c.interval
    return "" if iv is None else f"{_num(c.difference)} [{_num(iv.low)}, {_num(iv.high)}]"


def _p(c: atlas_stats.Comparison) -> str:
    return "" if c.p_holm is None else f"{c.p_holm:.3g}"


def write(
    path: Path = BUNDLED.parent / "README.md",
    rows_path: Path = BUNDLED,
    language_path: Path = LANGUAGE,
    docs: Path | None = DOCS,
) -> Path:
    """The README from both atlases' rows; with docs, also the language atlas's sections of
    docs/claims.md and docs/claims.zh.md (language_report.replace_section)."""
    path.write_text(readme(rows_path, language_path), encoding="utf-8")
    language = read_rows(language_path, LANGUAGE_FORMAT)
    if docs is not None and language:
        for name, lang in (("claims.md", "en"), ("claims.zh.md", "zh")):
            doc = docs / name
            probe = read_rows(language_path.with_name(LANGUAGE_LR.name), LANGUAGE_FORMAT)
            section = language_report.claims_section(language, lang, probe)
            doc.write_text(
                language_report.replace_section(doc.read_text("utf-8"), section), "utf-8"
            )
    return path


def readme(
    rows_path: Path = BUNDLED, language_path: Path = LANGUAGE, longer_path: Path = LONGER
) -> str:
    """The whole README: the toy atlas (render), its untrained cells given more steps
    (longer_section), then the language atlas's section."""
    rows = read_rows(rows_path)
    language = language_report.readme_section(
        read_rows(language_path, LANGUAGE_FORMAT),
        read_made(language_path),
        read_rows(language_path.with_name(LANGUAGE_LR.name), LANGUAGE_FORMAT),
    )
    made = ["", made_by(read_made(rows_path))]
    results = atlas_stats.analyse(rows)
    more = longer_section(results, read_rows(longer_path), read_made(longer_path))
    text = render(rows, results) + "\n".join([*made, "", *more, *language])
    return text.rstrip("\n") + "\n"


LONGER_WORDS = {
    "read": "learned in every seed: read at this budget",
    "trains": "learned in every seed (the learned W_o alone ran)",
    "partly": "learned in some seeds",
    "none": "learned in no seed",
    "pending": "not run yet",
}


def longer_section(results: dict, longer_rows: dict, made: list[dict]) -> list[str]:
    """The README's account of the cells that did not train, given more steps (longer.jsonl)."""
    more = atlas_stats.longer(results, longer_rows)
    if not more:
        return []
    lines = [
        "## The cells that did not train, given more steps (longer.jsonl)",
        "",
        textwrap.fill(
            f"{len(more)} cells did not train within their recipe's steps. "
            "`python -m tfviz.cli.atlas run --untrained never --budget 4000 --arms learned "
            "--seeds 2` gave those where no seed learned 4,000 steps with the learned W_o; "
            "`run --untrained partly --budget 3000` gave those where some seeds learned 3,000 "
            "steps with every arm and 5 seeds. A cell whose learned W_o reached the target in "
            "every seed is read at that budget, its p-values Holm-adjusted across the cells so "
            f"read (in steps to the target; m below). {made_by(made)}",
            96,
        ),
        "",
        "| cell | steps | learned reached | state | steps: learned - no W_o | p (Holm) | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    m = atlas_stats.family_size({k: x.result for k, x in more.items() if x.result}, "identity")
    for key, item in more.items():
        c = None if item.result is None else item.result.comparisons.get(("identity", "steps"))
        read = item.state == "read" and c is not None
        reached = f"{item.reached}/{item.seeds}" if item.seeds else ""
        said = [_interval(c), _p(c), VERDICT_WORDS[c.verdict]] if read else ["", "", ""]
        cols = [key, str(item.budget or ""), reached, LONGER_WORDS[item.state], *said]
        lines.append("| " + " | ".join(cols) + " |")
    return [*lines, "", f"Holm's m over the cells read at a longer budget: {m}.", ""]


def render(rows: dict, results: dict) -> str:
    seconds = [r["seconds"] for r in rows.values()]
    lines = [
        "# The W_o atlas: what the bundled runs show",
        "",
        "Written by `python -m tfviz.cli.atlas report` from `runs.jsonl` (one row per run); the",
        "app's *Does W_o matter?* view and lesson step 4 read the same rows.",
        "",
        textwrap.fill(
            f"{len(rows)} runs in {len(results)} cells; a run took {np.median(seconds):.1f} s "
            f"(median; {sum(seconds) / 3600:.2f} h of one core in all), one torch thread each. "
            "Every run trains with its task's first-run recipe (tfviz.training.recipes.CLASS_RECIPES: "  # noqa: E501 (the shipped README's line)
            "D=64, d_ff=128, Adam, cosine schedule, 1,000 steps at most) and stops once its "
            "task's metric on 500 held-out examples, looked at every 50 steps, reaches the "
            "target (tfviz.experiments.atlas.TARGET); seed s of every arm starts from the same weights (W_o "  # noqa: E501 (the shipped README's line)
            "aside) and sees the same batches.",
            96,
        ),
        "",
        "A cell is read only if every learned-W_o run reached the target (otherwise: *not",
        "trained*). Each difference is learned minus other, mean over seeds, with its 95% Welch",
        "interval; p is two-sided Welch, Holm-adjusted across the trained cells compared (per arm",
        "and measure). *Steps*: steps to the target, a run that never reached it counted at the",
        "budget (so a difference there is a bound). *Final loss*: mean training loss of the last",
        "5% of a run's steps. *Metric*: the task's metric on 1,000 fresh examples at the end.",
        "",
        "What a reader can reproduce: `python -m tfviz.cli.atlas` with the same torch gives every",
        "row's settings (cell, arm, seed, budget, recipe) exactly and, on the processor that made",
        "the rows, every number bit for bit. On another processor the float kernels differ (AVX2",
        "against AVX-512, say) and training is chaotic: a run's first steps agree to about 1e-4,",
        "but the step at which it reaches its target can move by a few checks (200 against 250",
        "seen for one run; 3 of 10 re-runs of another matched exactly), so a row is reproduced",
        "within that tolerance and a cell's verdict over its seeds, not its digits",
        "(tests/experiments/test_atlas.py).",
        "",
    ]
    for arm in atlas.AGAINST:
        cells = [r for r in results.values() if (arm, "steps") in r.comparisons]
        if not cells:
            continue
        counts = atlas_stats.verdict_counts(results, arm)
        m = atlas_stats.family_size(results, arm)
        lines += [
            f"## Learned W_o against {ARM_WORDS[arm]}",
            "",
            f"{len(cells)} cells; in steps to the target, W_o helps in {counts['helps']}, costs "
            f"in {counts['hurts']}, is not told apart in {counts['unclear']}, and "
            f"{counts['not_trained']} cells did not train (Holm over m = {m}).",
            "",
            "| task | layers | FFN | heads | learned reached | steps: learned - other | p | "
            "verdict | final loss: learned - other | p | metric: learned - other | p |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for res in cells:
            c = res.cell
            steps, loss, metric = (res.comparisons[(arm, q)] for q in atlas_stats.MEASURES)
            lines.append(
                f"| {c.task} | {c.n_layers} | {'yes' if c.ffn else 'no'} | {c.n_heads} | "
                f"{res.learned_reached}/{res.seeds} | {_interval(steps)} | {_p(steps)} | "
                f"{VERDICT_WORDS[res.verdict(arm)]} | {_interval(loss)} | {_p(loss)} | "
                f"{_interval(metric)} | {_p(metric)} |"
            )
        lines.append("")
    return "\n".join(lines)
