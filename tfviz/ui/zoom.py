"""Zoom on a range of word-pieces in the Attention view (pretrained models, long texts).

At 256 word-pieces each heatmap row is a pixel or two high: a range of positions, picked with a
slider, is drawn instead, its rows and columns both, so a class can read who attends to whom in
one stretch of the text. The ranked list (tfviz.ui.ranked) and the CSV keep the whole text.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from tfviz.ui.common import View, md_escape, per_model
from tfviz.ui.i18n import t

PER_MODEL_KEYS = per_model("attn_zoom_range")
MIN_PIECES = 16  # a shorter text is readable whole: no zoom offered
SPAN = 32  # word-pieces in the range first shown


def window(view: View) -> tuple[np.ndarray, list[str]]:
    """(attn (L, H, t, t), labels (t,)) to draw: a sentence model's chosen range when the zoom
    is on, else the whole trace."""
    tr = view.trace
    labels = list(tr.labels)
    T = len(labels)
    if not view.is_sentence or T < MIN_PIECES:
        return tr.attn, labels
    if not st.toggle(t("zoom.toggle"), key="attn_zoom", help=t("zoom.help", n=T)):
        return tr.attn, labels
    shown = st.session_state.get("attn_zoom_range")
    if shown is not None and not (0 <= shown[0] <= shown[1] < T):
        st.session_state.pop("attn_zoom_range")  # the text got shorter than the range
    a, b = st.slider(
        t("zoom.range"),
        min_value=0,
        max_value=T - 1,
        value=(0, min(T, SPAN) - 1),
        key="attn_zoom_range",
    )
    st.caption(md_escape(t("zoom.caption", first=labels[a], last=labels[b], n=b - a + 1, total=T)))
    return tr.attn[:, :, a : b + 1, a : b + 1], labels[a : b + 1]
