"""The "W_o off: compare" view: the switched model beside the learned one.

Whatever the sidebar switched (W_o off, zero, block-diagonal or rank-k, in every layer or one;
heads zeroed before W_o) is set against the learned model: the prediction, the task metric on
random examples, the attention of the layers a switch can reach, the residual stream and its
drift per layer. For the pretrained sentence encoder the prediction and metric give way to the
similarity of sentences A and B, learned and switched, and a many-headed model shows one later
layer's attention at a time.
"""

from __future__ import annotations

import functools

import numpy as np
import streamlit as st

from tfviz import plots
from tfviz.core.trace import drift_per_layer
from tfviz.ui import state
from tfviz.ui.downloads import download_comparison
from tfviz.ui.heads import (
    MAX_GRID_HEADS,
    default_scale,
    grid_columns,
    head_columns,
    weight_scale,
    weight_scale_caption,
)
from tfviz.ui.i18n import t
from tfviz.ui.labels import describe
from tfviz.ui.standalone import download_button
from tfviz.ui.text import md_escape
from tfviz.ui.view import View, per_model
from tfviz.ui.widgets import chart, plot_words

# Its widgets whose options depend on the model: forgotten when the model changes.
PER_MODEL_KEYS = per_model("compare_layer")


def render(view: View) -> None:
    iv, base, sw = view.interventions, view.base, view.trace
    if iv.is_default:
        st.info(t("w_o_off.nothing_switched"))
        return
    view.kind.compare_switched(view)  # the answers, or what stands for them
    shown_layers = later_attention(view)
    names = (t("w_o_off.learned"), t("w_o_off.switched"))
    chart(
        plots.residual_pair(
            base.resid_out, sw.resid_out, base.labels, names=names, words=plot_words()
        ),
        key="residual_pair",
    )
    both = np.stack([base.resid_out, sw.resid_out])
    limit, clipped = plots.colour_limit(both)
    if clipped:  # say why most cells are pale and what the ringed ones are
        st.caption(
            t(
                "w_o_off.residual_clipped",
                limit=f"{limit:.2g}",
                percentile=f"{plots.ROBUST_PERCENTILE:g}",
                n=int((np.abs(both) > limit).sum()),
                top=f"{float(np.abs(both).max()):.3g}",
            )
        )
    left, _ = st.columns(2)
    with left:
        chart(plots.drift_bars(drift_per_layer(base, sw), words=plot_words()), key="drift")
        st.caption(t("w_o_off.drift_caption"))
    download_comparison(view)
    download_button(
        view,
        t("standalone.title.w_o_off", model=view.entry.name, switched=describe(iv)),
        # Drawn on click (a keystroke pays nothing); the words now, in the page's language.
        functools.partial(
            exported_figures,
            base,
            sw,
            shown_layers,
            names,
            captions=(t("w_o_off.later_caption"), t("w_o_off.drift_caption")),
            words=plot_words(),
        ),
        key="w_o_off",
    )


def exported_figures(base, sw, layers: list[int], names, captions, words) -> list:
    """The web page's charts, as the view draws them: the attention of the layers shown above
    the first switch (learned, then switched), the residual stream side by side, the drift."""
    attention_caption, drift_caption = captions
    out = []
    if layers:
        for name, trace in zip(names, (base, sw), strict=True):
            grid = plots.attention_grid(
                trace.shown(trace.attn[layers]), trace.labels, layers, title=name, words=words
            )
            out.append((attention_caption, grid))
    pair = plots.residual_pair(base.resid_out, sw.resid_out, base.labels, names=names, words=words)
    out.append(("", pair))
    out.append((drift_caption, plots.drift_bars(drift_per_layer(base, sw), words=words)))
    return out


def later_attention(view: View) -> list[int]:
    """Attention of the layers above the first switch, learned above switched; returns the
    layers drawn (the web page holds the same)."""
    base, sw = view.base, view.trace
    later = view.interventions.downstream_layers(sw.n_layers)
    if later:
        st.caption(t("w_o_off.later_caption"))
        scale = weight_scale("compare_weight_scale", default_scale(view))
        if len(later) * sw.n_heads > MAX_GRID_HEADS:  # too many squares: one layer at a time
            if state.COMPARE_LAYER.get() not in (None, *later):
                state.COMPARE_LAYER.pop()  # another switch: that layer is not above
            layer = st.selectbox(
                t("w_o_off.later_layer"),
                later,
                format_func=lambda x: f"L{x}",
                key=state.COMPARE_LAYER.name,
                width=200,
            )
            # The Attention view's readable layout: the heads row by row (stacked on a phone).
            for name, trace, key in (
                (t("w_o_off.learned"), base, "compare_attention_base"),
                (t("w_o_off.switched"), sw, "compare_attention_switched"),
            ):
                st.markdown(f"**{md_escape(name)}**")
                head_columns(
                    trace.shown(trace.attn[layer]), trace.labels, layer, key=key, scale=scale
                )
                weight_scale_caption(
                    scale, trace.shown(trace.attn[layer])
                )  # a fitted range is each one's
            return [layer]
        # One above the other, each a grid of heads (stacked on a phone): side by side the
        # cells are too small to label.
        for name, trace, key in (
            (t("w_o_off.learned"), base, "compare_attention_base"),
            (t("w_o_off.switched"), sw, "compare_attention_switched"),
        ):
            st.markdown(f"**{md_escape(name)}**")
            grid_columns(trace.shown(trace.attn[later]), trace.labels, later, key, scale)
            weight_scale_caption(scale, trace.shown(trace.attn[later]))
        return list(later)
    st.caption(t("w_o_off.last_layer"))
    return []
