"""The Analysis view: methods that look past the raw attention weights, with W_o in the picture.

One section at a time (norm-based attention, rollout, head importance, ablation before vs after
W_o, OV circuits, W_o's head mixing), each citing its paper and folding away its explanation
(tfviz.ui.help). The numbers come from tfviz.analysis, cached per model digest and switch.
Head importance and ablation before vs after W_o score a task's answers, so they say why they are
not shown for the pretrained sentence encoder; the other methods work on it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st

import tfviz.analysis as analysis
from tfviz import get_task, plots
from tfviz.interventions import Interventions
from tfviz.ui.common import (
    View,
    chart,
    describe,
    index_picker,
    md_escape,
    metric_delta,
    metric_text,
    number_table,
    toy_only,
    what_is_this,
)
from tfviz.ui.help import HELP

ANALYSIS_N = 256  # fresh examples behind importance, ablation and the keep-top-k curve
METRIC_NAMES = {"token_accuracy": "token accuracy", "accuracy": "accuracy", "mae": "MAE"}
SCORE_NAMES = {
    "loss": "loss change when zeroed",
    "metric": "{metric} change when zeroed",
    "gradient": "gradient score |dL/dξ| (Michel et al.)",
}


# ---- cached computations -------------------------------------------------------------------


@st.cache_data(show_spinner=False, max_entries=256)
def cached_flow(
    digest: str, task_name: str, text: str, iv: Interventions, _model, _task
) -> dict[str, np.ndarray]:
    """Norm-based attention and attention rollout of one sequence with the switches, as numpy
    (the digest and task name stand for the unhashed model and task)."""
    return analysis.attention_flow(_model, _task, text, interventions=iv)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_importance(digest: str, task_name: str, w_o, _model) -> analysis.HeadImportance:
    """Michel et al.'s head importance on ANALYSIS_N fresh examples, per checkpoint and W_o mode
    (w_o: an Interventions' w_o, a mode or (layer, mode) pairs)."""
    return analysis.head_importance(_model, task_name, n=ANALYSIS_N, w_o=w_o)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_top_k_curve(digest: str, task_name: str, w_o, kind: str, _model) -> np.ndarray:
    """The metric keeping the k heads ranked highest by one score, for every k (computed once)."""
    scores = cached_importance(digest, task_name, w_o, _model=_model).scores(kind)
    return analysis.keep_top_k_curve(_model, task_name, scores, n=ANALYSIS_N, w_o=w_o)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_ablation(
    digest: str,
    task_name: str,
    text: str | None,
    w_o,
    head_layer: int,
    head: int,
    _model,
) -> analysis.AblationComparison:
    """One head zeroed before and after W_o, on the typed text (or ANALYSIS_N fresh examples)."""
    task = get_task(task_name)
    batch = None if text is None else task.batch_from_texts([text])
    return analysis.compare_ablation(
        _model, task, head_layer, head, batch=batch, n=ANALYSIS_N, w_o=w_o
    )


@st.cache_data(show_spinner=False, max_entries=64)
def cached_weight_views(digest: str, w_o, _model) -> dict:
    """OV spectra, composition scores and W_o's head mixing: from the weights alone."""
    ov = analysis.ov_circuits(_model, w_o)
    comp = analysis.composition_scores(_model, w_o)
    mixing = analysis.w_o_mixing(_model, w_o)
    return {  # the (L, H, D, D) circuits themselves are not drawn, so not kept in the cache
        "singular_values": ov.singular_values,
        "effective_rank": ov.effective_rank,
        "numerical_rank": ov.numerical_rank,
        "frobenius": ov.frobenius,
        "rtol": ov.rtol,
        "composition": comp,
        "shares": mixing.shares,
        "mixing": mixing.mixing,
    }


def flow_for(view: View) -> dict[str, np.ndarray]:
    return cached_flow(
        view.entry.digest,
        view.task.name,
        view.text,
        view.interventions,
        _model=view.model,
        _task=view.task,
    )


def weight_views_for(view: View) -> dict:
    # From the weights alone: instant for a toy model, a few seconds once for MiniLM's 72 heads.
    with st.spinner("Computing from the weights (a few seconds the first time for a big model)…"):
        return cached_weight_views(view.entry.digest, view.interventions.w_o, _model=view.model)


# ---- the view ------------------------------------------------------------------------------


def render(view: View) -> None:
    sections = list(SECTIONS)
    section = st.segmented_control(
        "Method",
        sections,
        default=sections[0],
        required=True,
        key="analysis_section",
        help="Each method looks past the raw attention weights, with W_o in the picture.",
    )
    draw, needs_text = SECTIONS[section or sections[0]]
    if needs_text and view.trace is None:
        st.info("Type a valid sequence above to see this view.")
        return
    if not view.interventions.is_default:
        st.caption(
            md_escape(
                f"Sidebar: {describe(view.interventions)}. The W_o switch applies to every method "
                "here; heads zeroed in the sidebar only to norm-based attention and rollout, "
                "which read the traced sequence."
            )
        )
    draw(view)


# ---- the sections --------------------------------------------------------------------------


def norm_attention_section(view: View) -> None:
    tr = view.trace
    layer = index_picker("Layer", tr.n_layers, "norm_layer", "L")
    flow = flow_for(view)
    st.caption(
        "Kobayashi et al., EMNLP 2020. Top: the raw weights α (where each head looks; a row sums "
        "to 1). Below: ‖α f(x)‖, how much each key token really moves into the query through the "
        "head's values and W_o. Same tokens, same layout; the norms share one colour scale, so a "
        "head that writes little looks faint even where it looks hard."
    )
    chart(
        plots.attention_grid(
            tr.attn[layer : layer + 1],
            tr.labels,
            [layer],
            title=f"Raw attention α of L{layer} (last: mean of the heads)",
            with_mean=True,
        ),
        key="raw_attention_layer",
    )
    chart(
        plots.norm_attention_grid(
            flow["norm"][layer],
            flow["norm_summed"][layer],
            tr.labels,
            layer,
            title=f"Norm-based attention ‖α f(x)‖ of L{layer} (last: all heads summed as vectors)",
        ),
        key="norm_attention",
    )
    what_is_this("norm_attention", "norm_attention_summed")


def rollout_section(view: View) -> None:
    flow = flow_for(view)
    st.caption(
        "Abnar & Zuidema, ACL 2020. Row i of a block: how much of token i's representation after "
        "that layer traces back to each input token (rows sum to 1). Left from raw attention, "
        "right from the norm-based weights, which also count what the values and W_o do. An "
        "approximation: the feed-forward nets and LayerNorm are left out."
    )
    chart(
        plots.rollout_grid(flow["rollout_raw"], flow["rollout_norm"], view.trace.labels),
        key="rollout",
    )
    what_is_this("attention_rollout")


def importance_section(view: View) -> None:
    if toy_only(view, "Head importance"):
        return
    entry, task, w_o = view.entry, view.task, view.interventions.w_o
    with st.spinner(f"Zeroing each head in turn on {ANALYSIS_N} random examples…"):
        imp = cached_importance(entry.digest, task.name, w_o, _model=view.model)
    L, H = imp.loss_change.shape
    metric = METRIC_NAMES[imp.metric]
    names = {kind: label.format(metric=metric) for kind, label in SCORE_NAMES.items()}
    st.caption(
        md_escape(
            f"Michel et al., NeurIPS 2019. On {imp.n} fresh examples, with the sidebar's W_o "
            f"switch; heads zeroed in the sidebar are not applied here. With every head: loss "
            f"{imp.base_loss:.4g}, {metric} {metric_text(imp.metric, imp.base_metric)}."
        )
    )
    kind = st.radio(
        "Rank heads by",
        list(SCORE_NAMES),
        format_func=names.get,
        key="importance_rank",
        horizontal=True,
        help="Which score orders the heads for the heatmap and for 'keep the k most important'.",
    )
    shown = {"loss": imp.loss_change, "metric": imp.metric_change, "gradient": imp.gradient}[kind]
    left, right = st.columns(2)
    with left:
        chart(
            plots.head_score_map(shown, title=names[kind].capitalize(), value=names[kind]),
            key="importance_map",
        )
        number_table(
            [
                {
                    "head": f"L{lay}H{h}",
                    "loss change": float(imp.loss_change[lay, h]),
                    f"{metric} change": float(imp.metric_change[lay, h]),
                    "gradient score": float(imp.gradient[lay, h]),
                }
                for lay in range(L)
                for h in range(H)
            ],
            key="importance_table",
        )
    with right:
        with st.spinner("Measuring the metric for every number of heads kept…"):
            curve = cached_top_k_curve(entry.digest, task.name, w_o, kind, _model=view.model)
        n_heads = L * H
        if st.session_state.get("importance_k", 0) > n_heads:
            st.session_state.pop("importance_k")  # a bigger model was shown before
        k = st.slider(
            "Keep the k most important heads",
            0,
            n_heads,
            value=n_heads,
            key="importance_k",
            help=HELP["accuracy_keeping_top_k"],
        )
        st.metric(
            f"{metric.capitalize()} keeping {k} of {n_heads} heads",
            metric_text(imp.metric, float(curve[k])),
            delta=None if k == n_heads else metric_delta(imp.metric, float(curve[k] - curve[-1])),
            delta_color="inverse" if imp.metric == "mae" else "normal",
            help="On the same fresh examples; the others are zeroed before W_o. The change is "
            "against keeping every head.",
        )
        kept = analysis.top_k_heads(imp.scores(kind), k)
        st.caption(md_escape("Kept: " + (", ".join(f"L{a}H{b}" for a, b in kept) or "none")))
        chart(plots.keep_top_k_plot(curve, k, metric), key="keep_top_k")
    what_is_this("head_importance", "accuracy_keeping_top_k")


def ablation_section(view: View) -> None:
    if toy_only(view, "Ablation before vs after W_o"):
        return
    tr, entry, task = view.trace, view.entry, view.task
    a, b = st.columns(2)
    with a:
        layer = index_picker("Layer", tr.n_layers, "ablation_layer", "L")
    with b:
        head = index_picker("Head", tr.n_heads, "ablation_head", "H")
    args = (entry.digest, task.name)
    switch = (view.interventions.w_o, layer, head)
    typed = cached_ablation(*args, view.text, *switch, _model=view.model)
    with st.spinner(f"Zeroing L{layer}H{head} on {ANALYSIS_N} random examples…"):
        fresh = cached_ablation(*args, None, *switch, _model=view.model)
    metric = METRIC_NAMES[typed.metric]
    st.info(md_escape(HELP["compare_ablation_mistake"]))
    for col, what, result in (
        (a, "your sequence", typed),
        (b, f"{ANALYSIS_N} random examples", fresh),
    ):
        with col:
            base = metric_text(result.metric, result.base_metric)
            st.markdown(f"**On {md_escape(what)}** (every head kept: {md_escape(base)})")
            st.metric(
                f"{metric.capitalize()}, L{layer}H{head} zeroed before W_o (right)",
                metric_text(result.metric, result.metric_before),
            )
            st.metric(
                f"{metric.capitalize()}, same dims zeroed after W_o (mistake)",
                metric_text(result.metric, result.metric_after),
                delta=metric_delta(result.metric, result.metric_difference) + " vs before",
                delta_color="off",
            )
            st.caption(
                md_escape(
                    f"Loss {result.loss_before:.4g} (before) vs {result.loss_after:.4g} (after): "
                    f"difference {result.loss_difference:+.4g}. Answers changed: "
                    f"{result.prediction_changed_before:.0%} before, "
                    f"{result.prediction_changed_after:.0%} after."
                )
            )
    share = fresh.removed_share_after  # (H,): share of each head's output removed after W_o
    others = np.delete(share, head)
    st.caption(
        md_escape(
            f"On the random examples, zeroing those dims after W_o removed "
            f"{share[head]:.0%} of head {head}'s own output and on average "
            f"{others.mean() if others.size else 0.0:.0%} of each other head's; zeroing before "
            f"W_o removes all of head {head}'s and none of the others'."
        )
    )
    chart(
        plots.ablation_change_bars(
            typed.attn_out_change_before[0],
            typed.attn_out_change_after[0],
            tr.labels,
            title=f"How far attn_out of L{layer} moved at each token of your sequence",
        ),
        key="ablation_bars",
    )
    what_is_this("compare_ablation")


def ov_section(view: View) -> None:
    w = weight_views_for(view)
    sv = w["singular_values"]  # (L, H, d_k)
    L, H, d_k = sv.shape
    st.caption(
        "Elhage et al. 2021. W_OV = W_V^h W_O^h maps what a token holds to what the head writes "
        f"when it attends to it; its rank is at most d_k = {d_k}. Effective rank: Roy & Vetterli "
        "2007."
    )
    left, right = st.columns(2)
    with left:
        chart(
            plots.singular_value_lines(sv, title="Singular values of each head's OV circuit"),
            key="ov_singular_values",
        )
    with right:
        number_table(
            [
                {
                    "head": f"L{lay}H{h}",
                    "effective rank": float(w["effective_rank"][lay, h]),
                    f"numerical rank (> {w['rtol']:.0%} of largest)": int(
                        w["numerical_rank"][lay, h]
                    ),
                    "‖W_OV‖_F": float(w["frobenius"][lay, h]),
                }
                for lay in range(L)
                for h in range(H)
            ],
            key="ov_table",
        )
    comp = w["composition"]
    if comp.q.shape[0] == 0:
        st.info("This model has one layer: no next layer to compose with.")
    else:
        chart(
            plots.composition_grid(
                comp.q,
                comp.k,
                comp.v,
                comp.baseline,
                title=f"Composition: how much of each head's output the next layer's Q, K, V read "
                f"(random baseline ≈ {comp.baseline:.3f})",
            ),
            key="composition",
        )
        st.caption(
            md_escape(
                f"Rows: the writing head of layer l; columns: the reading head of layer l+1. "
                f"Unrelated random matrices score about {comp.baseline:.3f} (1/√D). Caveat: "
                "LayerNorm's per-token division and the feed-forward net between the layers are "
                "not in these numbers: they describe the weights, not a measurement on data."
            )
        )
    what_is_this("ov_circuits", "composition_scores")


def mixing_section(view: View) -> None:
    w = weight_views_for(view)
    shares, mixing = w["shares"], w["mixing"]  # (L, D, H), (L,)
    layer = index_picker("Layer", len(mixing), "mixing_layer", "L")
    cols = st.columns(len(mixing))
    for lay, col in enumerate(cols):
        col.metric(
            f"Mixing number L{lay}",
            f"{mixing[lay]:.2f}",
            help="0: each output dimension reads one head; 1: every one reads all heads equally.",
        )
    chart(
        plots.head_shares_map(
            shares[layer], title=f"W_o of L{layer}: share of each output dim's weight per head"
        ),
        key="w_o_shares",
    )
    st.caption(
        "A block-diagonal picture (each output dimension reading a single head) would mean no "
        "mixing; colour across a whole row means that output dimension draws on every head."
    )
    what_is_this("w_o_mixing")


# label: (draw, needs a valid typed sequence)
SECTIONS: dict[str, tuple[Callable[[View], None], bool]] = {
    "Norm-based attention": (norm_attention_section, True),
    "Attention rollout": (rollout_section, True),
    "Head importance": (importance_section, False),
    "Ablate before vs after W_o": (ablation_section, True),
    "OV circuits": (ov_section, False),
    "How W_o mixes heads": (mixing_section, False),
}
