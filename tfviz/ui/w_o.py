"""The Before/after W_o view: concat against attn_out, W_o itself, and each head's term.

Per layer: the heads side by side before W_o (concat), what W_o makes of them (attn_out), their
cosine per token, the (D, D) matrix, and z_h W_o^h at one token with the check that these terms
and b_o add up to attn_out exactly.
"""

from __future__ import annotations

import streamlit as st

from tfviz import plots, wo
from tfviz.snapshot import cosine_per_token, decomposition_error
from tfviz.ui.common import W_O_LABELS, View, cached_w_o, chart, md_escape


def render(view: View) -> None:
    tr = view.trace
    H = tr.n_heads
    layer = st.selectbox(
        "Layer", range(tr.n_layers), format_func=lambda x: f"L{x}", key="wo_layer", width=200
    )
    mode = tr.w_o_modes[layer]
    if mode != "learned":
        st.info(md_escape(f"W_o is switched to '{W_O_LABELS[mode]}' in this layer (sidebar)."))
    before, after = st.columns(2)
    with before:
        chart(
            plots.activation_map(
                tr.concat[layer], tr.labels, n_heads=H, title="Before W_o: concat of the heads"
            ),
            key="concat",
        )
        st.caption(
            "Each head's output z_h laid side by side: block H0 holds only head 0, block H1 only "
            "head 1. Nothing is mixed yet: concatenating is not integrating."
        )
    with after:
        chart(
            plots.activation_map(tr.attn_out[layer], tr.labels, title="After W_o: attn_out"),
            key="attn_out",
        )
        st.caption(
            "attn_out = W_o applied to concat (+ b_o). Each output dimension is a weighted sum "
            "of all of concat, so no block of columns belongs to one head any more."
        )
    cosine = cosine_per_token(tr.concat[layer], tr.attn_out[layer])  # (T,)
    W_o = cached_w_o(view.entry.digest, tuple(tr.w_o_modes), _model=view.model)  # (L, D, D)
    chart(
        plots.cosine_bars(cosine, tr.labels, title="cosine(concat, attn_out) per token"),
        key="cosine",
    )
    st.caption(
        "1 means W_o only rescaled the token's vector; lower means W_o turned it into a new "
        "direction. With W_o off (identity) every bar is exactly 1."
    )
    left, right = st.columns(2)
    with left:
        chart(plots.w_o_matrix(W_o[layer], H, title=f"W_o of L{layer}"), key="w_o")
        st.caption(
            "Row i builds output dimension i from all D inputs; the dotted lines split the inputs "
            "into the heads' blocks. Colour in every block of a row: that output draws on every "
            "head."
        )
    with right:
        token = st.select_slider("Token", options=tr.labels, key="wo_token")
        t = tr.labels.index(token)
        chart(
            plots.head_contributions(wo.head_contributions(tr.z[layer], W_o[layer])[:, t], token),
            key="head_contributions",
        )
        st.caption(
            "z_h W_o^h: the part of attn_out that comes from head h, at this token. A column "
            "with colour in every row is an output dimension fed by all heads. The rows add up "
            "(with b_o) to attn_out exactly:"
        )
        st.metric(
            "max |Σ_h z_h W_o^h + b_o − attn_out|",
            f"{decomposition_error(tr, W_o, layer):.1e}",
            help="Float32 rounding only: attn_out is exactly the sum of one term per head + b_o.",
        )
