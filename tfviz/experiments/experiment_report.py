"""The experiment in English: the verdict's sentences, the Markdown table and the shipped
models/experiments/README.md, for the command line (tfviz.cli.experiment) and the repository.

Every sentence is worded from the values tfviz.experiments.verdict and
tfviz.experiments.experiment.compare give (each row's outcome is the one definition of what its
interval allows one to claim); the app words the same values in its own languages through its
catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tfviz.core import modes
from tfviz.core.metrics import compact
from tfviz.core.tasks import list_tasks
from tfviz.experiments.experiment import (
    AGAINST,
    EXPERIMENTS,
    KNOWN_CONDITIONS,
    LABELS,
    QUANTITY_LABELS,
    ExperimentResult,
    Row,
    check_against,
    compare,
    load_precomputed,
)
from tfviz.experiments.verdict import Target, verdict_of
from tfviz.training.checkpoint import write_atomic


@dataclass(frozen=True)
class _Words:
    """How the verdict names the two sides of one comparison."""

    learned: str  # the learned side, starting a sentence
    other: str  # the other side, after "the same as" / "than"
    minus: str  # what the difference is
    runs: str  # the learned side's runs
    count: str  # "{n} seeds with ... and {m} ...", with {learned} and {other} counts


WORDS = {
    modes.IDENTITY: _Words(
        learned="With W_o",
        other="without it",
        minus="with minus without",
        runs="the runs with W_o",
        count="{learned} with W_o and {other} without",
    ),
    modes.BLOCK_DIAGONAL: _Words(
        learned="With the learned W_o",
        other="with a block-diagonal W_o",
        minus="learned minus block-diagonal",
        runs="the runs with the learned W_o",
        count="{learned} with the learned W_o and {other} with a block-diagonal one",
    ),
}


def _row_sentence(row: Row) -> str:
    words = WORDS[row.against]
    name = {
        "final_loss": "final training loss",
        "mean_loss": "the loss averaged over all steps",
    }.get(row.quantity, QUANTITY_LABELS[row.quantity])
    d = row.difference
    if d == 0:
        same = compact(row.mean_learned)
        said = f"{words.learned}, {name} was the same as {words.other} ({same})"
    elif row.against == "identity":  # the seeds' wording, kept: "lower by x" reads as "than none"
        said = f"{words.learned}, {name} was {'lower' if d < 0 else 'higher'} by {compact(abs(d))}"
    else:
        said = (
            f"{words.learned}, {name} was {'lower' if d < 0 else 'higher'} by {compact(abs(d))} "
            f"than {words.other}"
        )
    iv = row.interval
    if row.outcome == "no_interval":
        return said + " (too few runs for a confidence interval, so no conclusion)."
    bounds = f"[{compact(iv.low)}, {compact(iv.high)}]"
    ci = f" ({words.minus}: {compact(d)}, {iv.confidence:.0%} CI {bounds})"
    if row.outcome == "unclear":
        return said + ci + "; the interval includes 0, so this run does not show a difference."
    tail = f"; the interval excludes 0, so in this setting {words.runs} did {row.outcome}"
    return said + ci + tail + " on this measure."


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def verdict(result: ExperimentResult, against: str = "identity") -> str:
    """Sentences stating what the numbers show, no more: one per quantity of the table, worded
    from tfviz.experiments.verdict's values."""
    v = verdict_of(result, against)
    counted = WORDS[against].count.format(learned=_count(v.n_learned, "seed"), other=v.n_against)
    scope = (
        f"Task {v.task}: {counted}, "
        f"{v.steps} steps "
        f"of batch {v.batch_size}, D={v.d_model}, {v.n_layers} "
        f"layers, {v.n_heads} heads" + (" (cancelled before the end)" if v.cancelled else "") + "."
    )
    if not v.comparable:
        return scope + " No finished run of one of the conditions, so nothing can be compared."
    sentences = [_row_sentence(row) for row in v.rows]
    if v.unreached is not None:
        sentences.append(target_note(v.unreached))
    return " ".join(
        [
            scope,
            *sentences,
            "Each interval is a 95% Welch interval on its own; other settings "
            "(sizes, steps, learning rate) may give other results.",
        ]
    )


def target_note(target: Target) -> str:
    """The warning for a target a learned run did not reach: the models did not all learn."""
    return (
        f"Not every run with the learned W_o reached the task's target ({target.metric} "
        f"{target.op} {target.bound}), so these models did not all learn the task: the "
        "comparison says nothing about trained ones (the atlas trains every run to its target)."
    )


def format_table(result: ExperimentResult, against: str = "identity") -> str:
    """The comparison of the learned W_o with against as a Markdown table."""
    lines = [
        f"| quantity | {LABELS['learned']} (mean ± std) | {LABELS[check_against(against)]} "
        "(mean ± std) | difference | 95% CI |",
        "|---|---|---|---|---|",
    ]
    for row in compare(result, against=against):
        iv = row.interval
        ci = "n/a" if iv is None else f"[{compact(iv.low)}, {compact(iv.high)}]"
        lines.append(
            f"| {row.label} | {compact(row.mean_learned)} ± {compact(row.std_learned)} | "
            f"{compact(row.mean_against)} ± {compact(row.std_against)} | "
            f"{compact(row.difference)} | {ci} |"
        )
    return "\n".join(lines)


def write_readme(folder: Path = EXPERIMENTS) -> Path:
    """Rewrite folder/README.md from every task's shipped JSON."""
    folder = Path(folder)
    results = {task: load_precomputed(task, folder) for task in list_tasks()}
    parts = [
        "# W_o on or off, or block-diagonal: what training measured",
        "",
        "Generated by `python -m tfviz.cli.experiment --all` (code: `tfviz/experiments/experiment.py`). "  # noqa: E501 (the shipped README's line)
        "For each",
        "task, every seed is trained once with the learned W_o and once with W_o switched off",
        "(`w_o=\"identity\"`), from the same initial weights and batches; 'difference' is with",
        "minus without, and the interval is Welch's 95% confidence interval for it. The final",
        "metric is measured on fresh examples (tfviz.training.evaluate). Seed 000's claim is that without",  # noqa: E501 (the shipped README's line)
        "W_o training converges more slowly and ends worse; read each row for what it shows.",
        "",
        "The second table of a task compares the learned W_o with a block-diagonal one",
        '(`w_o="block_diagonal"`: each head keeps its own d_k x d_k map, nothing mixes heads),',
        "which tells apart the two things W_o does. Those runs were added by",
        "`python -m tfviz.cli.experiment --all --against block_diagonal --add`: the same seeds and",
        "settings, trained in their own batch; each run is the run `train()` makes alone (to",
        "float precision), so they pair with the learned runs above seed by seed. A block",
        "reads d_k of the D inputs, so it starts drawn for that fan-in (tfviz.core.wo.training_start:",  # noqa: E501 (the shipped README's line)
        "the masked draw times sqrt(H)); masked alone it started every output H times smaller in",
        "variance, and those runs measured the slower start more than the missing mixing.",
        "",
        *_summary(results),
        "",
    ]
    for task, result in results.items():
        if result is None:
            parts += [f"## {task}", "", "Not computed.", ""]
            continue
        s = result.settings
        seconds = {c: sum(r.seconds for r in result.runs_of(c)) for c in KNOWN_CONDITIONS}
        timing = ", ".join(f"{LABELS[c]} {t:.0f} s" for c, t in seconds.items() if t)
        parts += [
            f"## {task}",
            "",
            f"{len(s['seeds'])} seeds per condition, {s['steps']} steps x batch {s['batch_size']}, "
            f"lr {s['lr']} ({s['schedule']}), model {_sizes_text(s['sizes'])}; training and "
            f"evaluation: {timing}.",
            "",
        ]
        for against in result.against:
            parts += [
                f"### {LABELS['learned']} vs {LABELS[against]}",
                "",
                format_table(result, against),
                "",
                verdict(result, against),
                "",
            ]
    path = folder / "README.md"
    write_atomic(path, "\n".join(parts).encode())
    return path


# A row's outcome (tfviz.experiments.experiment.OUTCOMES) in a cell of the README's summary table.
SUMMARY_WORDS = {
    "better": "learned better",
    "worse": "learned worse",
    "unclear": "no difference shown",
    "no_interval": "too few runs",
}


def _summary(results: dict[str, ExperimentResult | None]) -> list[str]:
    """A table of every task's outcome per comparison and quantity (from the intervals)."""
    lines = [
        "In short (each cell: final loss / loss over all steps / metric on fresh data, read off",
        "the 95% intervals below; 'no difference shown' means the interval includes 0):",
        "",
        "| task | learned vs without W_o | learned vs block-diagonal |",
        "|---|---|---|",
    ]
    for task, result in results.items():
        if result is None:
            continue
        cells = [
            " / ".join(SUMMARY_WORDS[r.outcome] for r in compare(result, against=a))
            if a in result.against
            else "not computed"
            for a in AGAINST
        ]
        lines.append(f"| {task} | {cells[0]} | {cells[1]} |")
    return lines


def _sizes_text(sizes: dict) -> str:
    return (
        f"D={sizes['d_model']} H={sizes['n_heads']} L={sizes['n_layers']} d_ff={sizes['d_ff']} "
        f"dropout {sizes['dropout']}"
    )
