"""Things the views name the same way everywhere, in the student's language: the switches,
a refused input, a task metric and its change."""

from __future__ import annotations

from tfviz.core.interventions import Interventions, head_name
from tfviz.core.tasks import InputError
from tfviz.ui.i18n import catalogue, current, t
from tfviz.ui.switches import w_o_label

# A task's metric key (tfviz.core.metrics) -> catalogue key of its name.
METRIC_NAMES = {
    "token_accuracy": "sidebar.metric.token_accuracy",
    "sequence_accuracy": "sidebar.metric.sequence_accuracy",
    "accuracy": "sidebar.metric.accuracy",
    "mae": "sidebar.metric.mae",
    "loss": "sidebar.metric.loss",
}


def task_label(name: str, lang: str | None = None) -> str:
    """A task's name as the student reads it (task.<name>.name: 数字求和（sum）, 句子嵌入); the
    library's names are identifiers. A task the catalogue does not know yet keeps its own name."""
    key = f"task.{name.replace(' ', '_')}.name"
    return t(key, lang=lang) if key in catalogue(lang or current()) else name


def task_short(name: str, lang: str | None = None) -> str:
    """A task's short name (task.<name>.short: 求和, sum), for a chart's row labels on a phone,
    where 数字求和（sum） would take the columns' room; task_label where there is none."""
    key = f"task.{name}.short"
    return t(key, lang=lang) if key in catalogue(lang or current()) else task_label(name, lang)


def layout_word(field: str, value) -> str:
    """A config's norm ("post") or embed ("token") in the student's words, from
    sidebar.<field>.<value>; a value the catalogue does not know is shown as it is (a
    checkpoint's record is data)."""
    key = f"sidebar.{field}.{value}"
    return t(key) if key in catalogue(current()) else str(value)


def describe(iv: Interventions) -> str:
    """The sidebar's switches in words, e.g. "W_o off (identity) in layer 1; zeroed L0H2"."""
    parts = []
    if isinstance(iv.w_o, str):
        if iv.w_o != "learned":
            parts.append(t("common.describe.all_layers", mode=w_o_label(iv.w_o)))
    else:
        parts += [
            t("common.describe.layer", mode=w_o_label(mode), layer=layer) for layer, mode in iv.w_o
        ]
    if iv.ablate_heads:
        heads = ", ".join(head_name(lay, h) for lay, h in iv.ablate_heads)
        parts.append(t("common.describe.zeroed", heads=heads))
    return t("common.describe.separator").join(parts) or t("common.describe.learned")


def refusal(error: ValueError | str, lang: str | None = None) -> str:
    """Why an input was refused, in the page's language (or lang): a library InputError through
    the catalogue by its code and values ("input.<code>"); any other error in its own words."""
    if isinstance(error, InputError):
        values = dict(error.values)
        if "task" in values:
            values["task"] = task_label(str(values["task"]), lang)
        return t(f"input.{error.code}", lang=lang, **values)
    return str(error)


def metric_text(metric: str, value: float) -> str:
    """A task metric as shown: MAE to 3 decimals, accuracies as a percentage."""
    return f"{value:.3f}" if metric == "mae" else f"{100 * value:.1f}%"


def metric_delta(metric: str, diff: float) -> str:
    """A change of a task metric: MAE signed to 3 decimals, accuracies in percentage points."""
    if metric == "mae":
        return f"{diff:+.3f}"
    return t("common.points", diff=f"{100 * diff:+.1f}")


def size_text(c) -> str:
    """A model's sizes as the sidebar says them (a ModelConfig): an attention-only model has no
    d_ff to name."""
    if not c.ffn:
        return t(
            "sidebar.size_attention_only", d_model=c.d_model, heads=c.n_heads, layers=c.n_layers
        )
    return t("sidebar.size", d_model=c.d_model, heads=c.n_heads, layers=c.n_layers, d_ff=c.d_ff)
