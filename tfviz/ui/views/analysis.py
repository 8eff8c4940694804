"""The Analysis view: methods that look past the raw attention weights, with W_o in the picture.

One section at a time (norm-based attention, rollout, head importance, ablation before vs after
W_o, OV circuits, W_o's head mixing, induction heads, the logit lens with direct contributions),
each citing its paper and folding away its explanation (tfviz.ui.help). The numbers come from
tfviz.analysis, cached per model digest and switch.
Head importance and ablation before vs after W_o score a task's answers, so they say why they are
not shown for the pretrained sentence encoder; the other methods work on it. The logit lens
needs a vocabulary head (a decoder or a masked LM): for any other model the library's refusal
says why, in one line.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import streamlit as st

import tfviz.analysis as analysis
from tfviz import plots
from tfviz.analysis.lens import LAST_LAYER
from tfviz.core.interventions import head_name
from tfviz.core.tasks import InputError
from tfviz.ui import compute, state
from tfviz.ui.compute import ANALYSIS_N, WEIGHT_PARTS
from tfviz.ui.heads import block_columns, grid_columns, head_columns, many_heads
from tfviz.ui.help import HELP
from tfviz.ui.i18n import current, t, why
from tfviz.ui.induction import induction_section
from tfviz.ui.labels import (
    component_label,
    describe,
    first_upper,
    metric_delta,
    metric_name,
    metric_text,
)
from tfviz.ui.lens import lens_chart
from tfviz.ui.text import md_escape
from tfviz.ui.view import View, toy_only
from tfviz.ui.widgets import (
    canvas_charts,
    chart,
    index_picker,
    number_table,
    plot_words,
    what_is_this,
)

# A head score -> the catalogue key of its name ({metric}: the task metric's name).
SCORE_NAMES = {
    "loss": "analysis.score.loss",
    "metric": "analysis.score.metric",
    "gradient": "analysis.score.gradient",
}


def flow_for(view: View) -> dict[str, np.ndarray]:
    return compute.cached_flow(
        view.entry.digest,
        view.task.name,
        view.text,
        view.interventions,
        _model=view.model,
        _task=view.task,
    )


def weight_views_for(view: View, part: str) -> dict:
    # From the weights alone: computed once per server and switch (MiniLM's 72 heads too),
    # usually ahead of the click (warm_weight_views).
    cache = compute.weight_views_cache(view.entry.digest, _model=view.model)
    key = (view.interventions.w_o, part)
    if cache.known(key):
        return cache(key)
    with st.spinner(t("analysis.weights_spinner")):
        return cache(key)


def warm_weight_views(view: View) -> None:
    """Have the weights-only sections' numbers for the sidebar's switch computed in the
    background while the student reads the section on screen (known ones are skipped)."""
    cache = compute.weight_views_cache(view.entry.digest, _model=view.model)
    cache.warm((view.interventions.w_o, part) for part in WEIGHT_PARTS)


# ---- the view ------------------------------------------------------------------------------


def render(view: View) -> None:
    sections = list(SECTIONS)  # the English names: the widget's stable values
    lang = current()  # for format_func, which Streamlit may call outside this run
    section = st.segmented_control(
        t("analysis.method"),
        sections,
        default=sections[0],
        required=True,
        key="analysis_section",
        format_func=lambda name: t(SECTIONS[name][2], lang=lang),
        help=t("analysis.method_help"),
    )
    draw, needs_text, _ = SECTIONS[section or sections[0]]
    if needs_text and view.trace is None:
        st.info(t("analysis.needs_sequence"))
        warm_weight_views(view)
        return
    note = st.empty()  # one slot, switched or not, so the charts after it keep their places
    if not view.interventions.is_default:
        note.caption(md_escape(t("analysis.switched", what=describe(view.interventions))))
    draw(view)
    # After the section's own numbers: on a fresh server the background work does not compete
    # with the page the student is waiting for.
    warm_weight_views(view)


# ---- the sections --------------------------------------------------------------------------


def norm_attention_section(view: View) -> None:
    tr = view.trace
    layer = index_picker(t("analysis.layer"), tr.n_layers, "norm_layer", "L")
    flow = flow_for(view)
    st.caption(t("analysis.norm.caption"))
    norms, summed = flow["norm"][layer], flow["norm_summed"][layer]
    if many_heads(tr.n_layers, tr.n_heads):
        # MiniLM's 12 heads and their total in one row: ~6 px a word-piece, labels in a pile.
        # Laid out as the Attention tab lays a layer out, one colour scale for the layer.
        st.markdown(f"**{md_escape(t('analysis.norm.raw_title', layer=layer))}**")
        head_columns(tr.shown(tr.attn[layer]), tr.labels, layer, key="raw_attention_layer")
        st.markdown(f"**{md_escape(t('analysis.norm.title', layer=layer))}**")
        top = max(float(norms.max(initial=0.0)), float(summed.max(initial=0.0)))
        block_columns(
            tr.n_heads,
            lambda heads, last, scale: plots.norm_attention_column(
                norms,
                summed,
                tr.labels,
                layer,
                heads,
                last,
                top,
                show_scale=scale,
                words=plot_words(),
            ),
            key="norm_attention",
        )
    else:
        # A toy model's few heads laid out the same way, the layer's first head opening the
        # grid (in one row, a phone left each head about 70 px).
        st.markdown(f"**{md_escape(t('analysis.norm.raw_title', layer=layer))}**")
        grid_columns(
            tr.shown(tr.attn[layer : layer + 1]), tr.labels, [layer], "raw_attention_layer"
        )
        st.markdown(f"**{md_escape(t('analysis.norm.title', layer=layer))}**")
        top = max(float(norms.max(initial=0.0)), float(summed.max(initial=0.0)))
        words = plot_words()
        block_columns(
            tr.n_heads,
            lambda heads, last, scale: plots.norm_attention_column(
                norms, summed, tr.labels, layer, heads, last, top, show_scale=scale, words=words
            ),
            key="norm_attention",
        )
    what_is_this("norm_attention", "norm_attention_summed")


def rollout_section(view: View) -> None:
    flow = flow_for(view)
    st.caption(t("analysis.rollout.caption"))
    chart(
        plots.rollout_grid(
            flow["rollout_raw"], flow["rollout_norm"], view.trace.labels, words=plot_words()
        ),
        key="rollout",
    )
    what_is_this("attention_rollout")


def on_text(view: View) -> dict:
    """The keywords that run an analysis on a decoder's typed text ({} for a toy model: its
    fresh examples), as the model's kind says."""
    return view.kind.analysis_inputs(view)


def importance_section(view: View) -> None:
    if not view.kind.measures_heads and toy_only(view, t("analysis.importance.what")):
        return
    entry, task, w_o = view.entry, view.task, view.interventions.w_o
    with st.spinner(t("analysis.importance.spinner", n=ANALYSIS_N)):
        imp = compute.cached_importance(
            entry.digest, task.name, w_o, _model=view.model, **on_text(view)
        )
    metric = metric_name(imp.metric, short=True)
    lang = current()  # for format_func, which Streamlit may call outside this run
    names = {kind: t(key, metric=metric, lang=lang) for kind, key in SCORE_NAMES.items()}
    importance_caption(view, imp, metric)
    kind = st.radio(
        t("analysis.importance.rank"),
        list(SCORE_NAMES),
        format_func=names.get,
        key="importance_rank",
        horizontal=True,
        help=t("analysis.importance.rank_help"),
    )
    left, right = st.columns(2)
    with left:
        head_scores(imp, kind, names[kind], metric)
    with right:
        keep_top_k(view, imp, kind, metric)
    what_is_this("head_importance", "accuracy_keeping_top_k")


def importance_caption(view: View, imp: analysis.HeadImportance, metric: str) -> None:
    """What the scores were measured on, and the loss and metric with every head kept."""
    st.caption(
        md_escape(
            t(
                view.kind.importance_caption,
                n=imp.n,
                loss=f"{imp.base_loss:.4g}",
                metric=metric,
                value=metric_text(imp.metric, imp.base_metric),
            )
        )
    )


def head_scores(imp: analysis.HeadImportance, kind: str, name: str, metric: str) -> None:
    """The heads' scores of the kind picked as a layer x head map (name: the score's name), and
    every score of every head as a table."""
    shown = {"loss": imp.loss_change, "metric": imp.metric_change, "gradient": imp.gradient}[kind]
    chart(
        plots.head_score_map(shown, title=first_upper(name), value=name, words=plot_words()),
        key="importance_map",
    )
    L, H = imp.loss_change.shape
    columns = {
        "head": t("analysis.col.head"),
        "loss": t("analysis.col.loss_change"),
        "metric": t("analysis.col.metric_change", metric=metric),
        "gradient": t("analysis.col.gradient"),
    }
    number_table(
        [
            {
                columns["head"]: head_name(lay, h),
                columns["loss"]: float(imp.loss_change[lay, h]),
                columns["metric"]: float(imp.metric_change[lay, h]),
                columns["gradient"]: float(imp.gradient[lay, h]),
            }
            for lay in range(L)
            for h in range(H)
        ],
        key="importance_table",
    )


def keep_top_k(view: View, imp: analysis.HeadImportance, kind: str, metric: str) -> None:
    """The task metric with only the k heads that score highest kept, k on a slider (all of
    them at first), the heads kept named, and the curve over every k."""
    with st.spinner(t("analysis.importance.curve_spinner")):
        curve = compute.cached_top_k_curve(
            view.entry.digest,
            view.task.name,
            view.interventions.w_o,
            kind,
            _model=view.model,
            **on_text(view),
        )
    L, H = imp.loss_change.shape
    n_heads = L * H
    if state.IMPORTANCE_K.get(0) > n_heads:
        state.IMPORTANCE_K.pop()  # a bigger model was shown before
    k = st.slider(
        t("analysis.importance.keep"),
        0,
        n_heads,
        value=n_heads,
        key=state.IMPORTANCE_K.name,
        help=HELP["accuracy_keeping_top_k"],
    )
    st.metric(
        t("analysis.importance.keeping", metric=first_upper(metric), k=k, n=n_heads),
        metric_text(imp.metric, float(curve[k])),
        delta=None if k == n_heads else metric_delta(imp.metric, float(curve[k] - curve[-1])),
        delta_color="inverse" if imp.metric == "mae" else "normal",
        help=t("analysis.importance.keeping_help"),
    )
    kept = analysis.top_k_heads(imp.scores(kind), k)
    heads = ", ".join(head_name(a, b) for a, b in kept) or t("analysis.importance.none")
    st.caption(md_escape(t("analysis.importance.kept", heads=heads)))
    chart(plots.keep_top_k_plot(curve, k, metric, words=plot_words()), key="keep_top_k")


def ablation_section(view: View) -> None:
    if not view.kind.measures_heads and toy_only(view, t("analysis.ablation.what")):
        return
    tr, entry, task = view.trace, view.entry, view.task
    a, b = st.columns(2)
    with a:
        layer = index_picker(t("analysis.layer"), tr.n_layers, "ablation_layer", "L")
    with b:
        head = index_picker(t("analysis.head"), tr.n_heads, "ablation_head", "H")
    args = (entry.digest, task.name)
    switch = (view.interventions.w_o, layer, head)
    decoder = on_text(view).get("_task")  # a decoder, measured on its typed text alone
    typed = compute.cached_ablation(*args, view.text, *switch, _model=view.model, _task=decoder)
    zeroed = head_name(layer, head)
    shown = [(a, t("analysis.ablation.typed"), typed)]
    fresh = typed  # a decoder has no fresh examples: its typed text is what it is measured on
    if decoder is None:
        with st.spinner(t("analysis.ablation.spinner", head=zeroed, n=ANALYSIS_N)):
            fresh = compute.cached_ablation(*args, None, *switch, _model=view.model)
        shown.append((b, t("analysis.ablation.fresh", n=ANALYSIS_N), fresh))
    metric = metric_name(typed.metric, short=True, capital=True)
    st.info(md_escape(HELP["compare_ablation_mistake"]))
    for col, what, result in shown:
        with col:
            base = metric_text(result.metric, result.base_metric)
            st.markdown(t("analysis.ablation.on", what=md_escape(what), base=md_escape(base)))
            st.metric(
                t("analysis.ablation.before", metric=metric, head=zeroed),
                metric_text(result.metric, result.metric_before),
            )
            st.metric(
                t("analysis.ablation.after", metric=metric),
                metric_text(result.metric, result.metric_after),
                delta=t(
                    "analysis.ablation.vs_before",
                    diff=metric_delta(result.metric, result.metric_difference),
                ),
                delta_color="off",
            )
            st.caption(
                md_escape(
                    t(
                        "analysis.ablation.loss",
                        before=f"{result.loss_before:.4g}",
                        after=f"{result.loss_after:.4g}",
                        diff=f"{result.loss_difference:+.4g}",
                        changed_before=f"{result.prediction_changed_before:.0%}",
                        changed_after=f"{result.prediction_changed_after:.0%}",
                    )
                )
            )
    share = fresh.removed_share_after  # (H,): share of each head's output removed after W_o
    others = np.delete(share, head)
    st.caption(
        md_escape(
            t(
                "analysis.ablation.share",
                own=f"{share[head]:.0%}",
                head=head,
                others=f"{others.mean() if others.size else 0.0:.0%}",
            )
        )
    )
    chart(
        plots.ablation_change_bars(
            typed.attn_out_change_before[0],
            typed.attn_out_change_after[0],
            tr.labels,
            title=t("analysis.ablation.bars_title", layer=layer),
            words=plot_words(),
        ),
        key="ablation_bars",
    )
    what_is_this("compare_ablation")


def ov_section(view: View) -> None:
    w = weight_views_for(view, "ov")
    sv = w["singular_values"]  # (L, H, d_k)
    L, H, d_k = sv.shape
    st.caption(t("analysis.ov.caption", d_k=d_k))
    left, right = st.columns(2)
    with left:
        chart(
            plots.singular_value_lines(sv, title=t("analysis.ov.title"), words=plot_words()),
            key="ov_singular_values",
        )
    with right:
        columns = {
            "head": t("analysis.col.head"),
            "effective": t("analysis.col.effective_rank"),
            "numerical": t("analysis.col.numerical_rank", rtol=f"{w['rtol']:.0%}"),
        }
        number_table(
            [
                {
                    columns["head"]: head_name(lay, h),
                    columns["effective"]: float(w["effective_rank"][lay, h]),
                    columns["numerical"]: int(w["numerical_rank"][lay, h]),
                    "‖W_OV‖_F": float(w["frobenius"][lay, h]),
                }
                for lay in range(L)
                for h in range(H)
            ],
            key="ov_table",
        )
    comp = w["composition"]
    if comp.q.shape[0] == 0:
        st.info(t("analysis.ov.one_layer"))
    else:
        baseline = f"{comp.baseline:.3f}"
        chart(
            plots.composition_grid(
                comp.q,
                comp.k,
                comp.v,
                comp.baseline,
                title=t("analysis.ov.composition_title", baseline=baseline),
                words=plot_words(),
            ),
            key="composition",
        )
        st.caption(md_escape(t("analysis.ov.composition_caption", baseline=baseline)))
    what_is_this("ov_circuits", "composition_scores")


def mixing_section(view: View) -> None:
    w = weight_views_for(view, "mixing")
    shares, mixing = w["shares"], w["mixing"]  # (L, D, H), (L,)
    layer = index_picker(t("analysis.layer"), len(mixing), "mixing_layer", "L")
    cols = st.columns(len(mixing))
    for lay, col in enumerate(cols):
        col.metric(
            t("analysis.mixing.number", layer=lay),
            f"{mixing[lay]:.2f}",
            help=t("analysis.mixing.number_help"),
        )
    chart(
        plots.head_shares_map(
            shares[layer], title=t("analysis.mixing.title", layer=layer), words=plot_words()
        ),
        key="w_o_shares",
    )
    st.caption(t("analysis.mixing.axes"))  # rows = output dims: the other way from lesson 1
    st.caption(t("analysis.mixing.caption"))
    what_is_this("w_o_mixing")


def lens_section(view: View) -> None:
    st.caption(t("analysis.lens.caption"))
    T = len(view.trace.labels)
    positions = tuple(range(max(0, T - compute.LENS_MAX_POSITIONS), T))
    try:
        lens = compute.cached_lens(view, positions)
    except analysis.LensRefused as refused:
        st.info(why(refused))
        return
    switched = not view.interventions.is_default
    shown = (("learned", lens.learned),) + ((("switched", lens.switched),) if switched else ())
    for name, one in shown:
        lens_chart(one, t(f"analysis.lens.title_{name}"), f"lens_{name}")
    if len(positions) < T:
        st.caption(t("analysis.lens.last_positions", n=len(positions), total=T))
    contributions_part(view)


def contributions_part(view: View) -> None:
    try:
        both = compute.cached_contributions(view)
    except (analysis.LensRefused, InputError) as refused:  # InputError: a masked LM's text
        st.info(why(refused))  # without exactly one mask
        return
    c = both.learned
    title = t("analysis.lens.contrib_title", token=c.target_token, position=c.position)
    st.markdown(f"**{md_escape(title)}**")
    if c.scope == LAST_LAYER:
        st.caption(t("analysis.lens.last_layer_only"))
    left, right = st.columns(2)
    switched = not view.interventions.is_default
    for col, name, one in ((left, "learned", c), (right, "switched", both.switched)):
        if name == "switched" and not switched:
            continue
        with col:
            heads = np.nan_to_num(one.heads)
            figure = plots.head_score_map(
                heads,
                title=t(f"analysis.lens.heads_{name}"),
                value=t("analysis.lens.contribution"),
                words=plot_words(),
            )
            canvas_charts([figure], f"contrib_{name}", columns=1)
            gap = abs(one.total - one.logit)
            st.markdown(
                md_escape(
                    t(
                        "analysis.lens.sum_check",
                        total=f"{one.total:.4f}",
                        logit=f"{one.logit:.4f}",
                        gap=f"{gap:.1e}",
                    )
                )
            )
    columns = (t("analysis.lens.component"), t("analysis.lens.contribution"))
    number_table(
        [{columns[0]: component_label(name), columns[1]: value} for name, value in c.ranked[:12]],
        key="contrib_ranked",
    )
    st.caption(t("analysis.lens.ranked_caption"))


# The picker's value (the English name, stable across languages): (draw, needs a valid typed
# sequence, catalogue key of the name shown).
SECTIONS: dict[str, tuple[Callable[[View], None], bool, str]] = {
    "Norm-based attention": (norm_attention_section, True, "analysis.section.norm"),
    "Attention rollout": (rollout_section, True, "analysis.section.rollout"),
    "Head importance": (importance_section, False, "analysis.section.importance"),
    "Ablate before vs after W_o": (ablation_section, True, "analysis.section.ablation"),
    "OV circuits": (ov_section, False, "analysis.section.ov"),
    "How W_o mixes heads": (mixing_section, False, "analysis.section.mixing"),
    "Induction heads": (induction_section, False, "analysis.section.induction"),
    "Logit lens": (lens_section, True, "analysis.section.lens"),
}
