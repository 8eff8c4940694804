"""The "W_o off: compare" view: the switched model beside the learned one.

Whatever the sidebar switched (W_o off or zero, in every layer or one; heads zeroed before W_o)
is set against the learned model: the prediction, the task metric on random examples, the
attention of the layers a switch can reach, the residual stream and its drift per layer. For the
pretrained sentence encoder the prediction and metric give way to the similarity of sentences A
and B, learned and switched, and a many-headed model shows one later layer's attention at a time.
"""

from __future__ import annotations

import streamlit as st

from tfviz import plots
from tfviz.interventions import NONE
from tfviz.metrics import headline
from tfviz.snapshot import drift_per_layer
from tfviz.ui.attention import MAX_GRID_HEADS
from tfviz.ui.common import (
    ACCURACY_N,
    View,
    accuracy_for,
    chart,
    describe,
    md_escape,
    metric_delta,
)
from tfviz.ui.sequence import show_similarity
from tfviz.ui.text import changed_tokens, prediction_table


def render(view: View) -> None:
    iv, base, sw = view.interventions, view.base, view.trace
    if iv.is_default:
        st.info(
            "Nothing is switched. In the sidebar, set W_o to 'off (identity)' or 'zero', or zero "
            "some heads, and this tab shows the learned model and the switched one side by side."
        )
        return
    if view.is_sentence:
        st.markdown("**Sentences A and B: learned W_o against switched**")
        show_similarity(view, key="similarity_compare")
        st.caption(
            "What the switch does to the model's output: the sentence embeddings, and whether "
            "the model still finds A and B alike. Below, sentence A inside the model."
        )
    else:
        toy_comparison(view)
    later_attention(view)
    chart(plots.residual_pair(base.resid_out, sw.resid_out, base.labels), key="residual_pair")
    left, _ = st.columns(2)
    with left:
        chart(plots.drift_bars(drift_per_layer(base, sw)), key="drift")
        st.caption(
            "Drift = 1 - mean cosine(learned, switched) of the residual stream: 0 = the same "
            "direction at every token, 1 = unrelated, above 1 = pointing partly the opposite way "
            "(2 = opposite). A switch in one layer moves every layer above it too."
        )


def toy_comparison(view: View) -> None:
    """The answers and the task metric on random examples, learned beside switched."""
    iv, base, sw = view.interventions, view.base, view.trace
    st.caption(md_escape(f"Left: learned W_o. Right: {describe(iv)}."))
    left, right = st.columns(2)
    acc_base = accuracy_for(view, NONE)
    acc_sw = accuracy_for(view, iv)
    metric = view.task.metric
    worse_is_higher = metric == "mae"
    change = metric_delta(metric, acc_sw[metric] - acc_base[metric])
    for col, name, trace, acc, delta in (
        (left, "learned W_o", base, acc_base, None),
        (right, "switched", sw, acc_sw, change),
    ):
        with col:
            st.markdown(f"**{md_escape(name)}**")
            st.code(
                prediction_table(
                    [("right answer", trace.answer), ("model", trace.prediction)], trace.answer
                ),
                language=None,
            )
            label, value = headline(view.task.metric, acc)
            st.metric(
                f"{label.capitalize()} on {ACCURACY_N} random examples",
                value,
                delta=delta,
                delta_color="inverse" if worse_is_higher else "normal",
            )
    changed = changed_tokens(base.prediction, sw.prediction)
    st.caption(
        md_escape(
            f"The switch changed {len(changed)} of {len(base.prediction)} answer tokens"
            + (f" (positions {', '.join(str(i + 1) for i in changed)})." if changed else ".")
        )
    )


def later_attention(view: View) -> None:
    """Attention of the layers above the first switch, learned above switched."""
    base, sw = view.base, view.trace
    later = view.interventions.downstream_layers(sw.n_layers)
    if later:
        st.caption(
            "Attention of the later layers: a switch acts after a layer's attention, so only "
            "the layers above it can attend differently."
        )
        if len(later) * sw.n_heads > MAX_GRID_HEADS:  # too many squares: one layer at a time
            if st.session_state.get("compare_layer") not in (None, *later):
                st.session_state.pop("compare_layer")  # another switch: that layer is not above
            layer = st.selectbox(
                "Later layer shown",
                later,
                format_func=lambda x: f"L{x}",
                key="compare_layer",
                width=200,
            )
            later = [layer]
        # Full width, one above the other: side by side the cells are too small to label.
        chart(
            plots.attention_grid(base.attn[later], base.labels, later, title="learned W_o"),
            key="compare_attention_base",
        )
        chart(
            plots.attention_grid(sw.attn[later], sw.labels, later, title="switched"),
            key="compare_attention_switched",
        )
    else:
        st.caption(
            "The switch acts in the last layer, after its attention: no later layer's attention "
            "can change, only the output."
        )
