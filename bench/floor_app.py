"""The floor under bench/mode_switch.py's sidebar switch: a bare Streamlit page that redraws what
the switch changes on "Before/after W_o", and nothing else.

A sidebar radio of the same W_o modes, and the same five charts for the same model and sequence
(concat, attn_out, their cosine per token, W_o as applied, each head's term at one token),
drawn by the same tfviz.ui.common.chart call. No header, sequence box, prediction, tabs, link,
layer picker or token slider. The time from a click to these charts painted is what Streamlit
and plotly.js alone take on the machine at hand; the app's switch minus this is what the app's
page adds. Served by bench/mode_switch.py; not part of the app.

Environment: TFVIZ_FLOOR_MODEL, the bundled model's name (default max_position).
"""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from tfviz import plots, wo
from tfviz.checkpoint import load_checkpoint
from tfviz.interventions import switches
from tfviz.snapshot import cosine_per_token, run_trace, w_o_used
from tfviz.tasks import get_task
from tfviz.ui.common import chart

MODELS = Path(__file__).resolve().parent.parent / "models"
MODES = ("learned", wo.BLOCK_DIAGONAL, "identity", "zero", "rank:16")  # "rank k": the app's k
LAYER, TOKEN = 0, 0  # the app's defaults: layer 0, the first token


@st.cache_resource(show_spinner=False)
def traces(name: str) -> dict:
    """mode -> (trace, W_o applied) of the model's first example, computed once."""
    model, meta = load_checkpoint(MODELS / f"{name}.safetensors")
    task = get_task(meta.task)
    out = {}
    for mode in MODES:
        iv = switches(mode, None, [])
        modes = iv.w_o_modes(model.config.n_layers)
        out[mode] = run_trace(model, task, task.examples[0], iv), w_o_used(model, modes)
    return out


def main() -> None:
    by_mode = traces(os.environ.get("TFVIZ_FLOOR_MODEL", "max_position"))
    mode = st.sidebar.radio("W_o", MODES, key="floor_mode")
    tr, W_o = by_mode[mode]
    H = tr.n_heads
    before, after = st.columns(2)
    with before:
        chart(
            plots.activation_map(tr.concat[LAYER], tr.labels, n_heads=H, title="concat"), "concat"
        )
    with after:
        chart(plots.activation_map(tr.attn_out[LAYER], tr.labels, title="attn_out"), "attn_out")
    cosine = cosine_per_token(tr.concat[LAYER], tr.attn_out[LAYER])
    chart(plots.cosine_bars(cosine, tr.labels, title="cosine"), "cosine")
    left, right = st.columns(2)
    with left:
        chart(plots.w_o_matrix(W_o[LAYER], H, title=f"W_o of layer {LAYER}"), "w_o")
    with right:
        terms = wo.head_contributions(tr.z[LAYER], W_o[LAYER])[:, TOKEN]
        chart(plots.head_contributions(terms, tr.labels[TOKEN], title="terms"), "terms")


main()
