"""Things the views name the same way everywhere, in the student's language: the switches,
a task, a task metric and its change."""

from __future__ import annotations

from tfviz.core.interventions import Interventions, head_name
from tfviz.core.metrics import metric
from tfviz.ui.i18n import catalogue, current, t
from tfviz.ui.switches import w_o_label


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


def first_upper(text: str) -> str:
    """text with its first letter in upper case and the rest as written ("MAE", "dL/dξ")."""
    return text[:1].upper() + text[1:]


def metric_name(
    key: str, lang: str | None = None, *, short: bool = False, capital: bool = False
) -> str:
    """A task metric's name (tfviz.core.metrics: the catalogue key of its name) as a sentence
    says it ("token accuracy"); short: its short name where the catalogue has one, for a table's
    column ("MAE"); capital: with a capital first letter, to begin a label ("Token accuracy")."""
    lang = lang or current()
    m = metric(key)
    name_key = m.short_key if short and m.short_key in catalogue(lang) else m.name_key
    name = t(name_key, lang=lang)
    return first_upper(name) if capital else name


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


def component_label(name: str) -> str:
    """A part of the logit lens (a row of LogitLens, a name of DirectContributions.ranked) in the
    session's language; a layer (L3), a head (L3H5) and a layer's b_o read the same in every
    language."""
    from tfviz.analysis import lens  # here: the first page imports no tfviz.analysis

    parts = {
        lens.EMBED: "analysis.lens.embed",
        lens.EARLIER: "analysis.lens.part.earlier",
        lens.OUTPUT_BIAS: "analysis.lens.part.output_bias",
        lens.NORM_BIAS: "analysis.lens.part.norm_bias",
        lens.HEAD_NORM_BIAS: "analysis.lens.part.head_norm_bias",
        lens.HEAD_DENSE_BIAS: "analysis.lens.part.head_dense_bias",
    }
    if name in parts:
        return t(parts[name])
    layer, _, part = name.partition(" ")
    if part == lens.MLP:
        return t("analysis.lens.part.mlp", layer=layer)
    return name
