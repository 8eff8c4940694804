"""Lesson step 4's why, on the loaded model: W_v and W_o act only as their product, so a change of
basis inside a head's value space moves both and no output (what W_o cannot add); what W_o can
add is where each head writes, learned W_o against identity (tfviz.ui.freedom, the same pieces
as Take W_o apart's "W_o's freedom").
"""

from __future__ import annotations

import streamlit as st

from tfviz.ui import compute
from tfviz.ui.freedom import basis_change, write_spaces
from tfviz.ui.i18n import t
from tfviz.ui.view import View, per_model
from tfviz.ui.widgets import index_picker

KEY = "lesson_free"  # the widgets' and charts' key prefix: apart from the parts view's
PER_MODEL_KEYS = per_model(f"{KEY}_layer", f"{KEY}_head")


def why_freedom(view: View) -> None:
    st.markdown(f"#### {t('lessons.s4.why_title')}")
    st.markdown(t("lessons.s4.why_intro"))
    cfg = view.meta.config
    left, right = st.columns(2)
    with left:
        layer = index_picker(t("parts.layer"), cfg.n_layers, f"{KEY}_layer", "L")
    with right:
        head = index_picker(t("parts.freedom.head"), cfg.n_heads, f"{KEY}_head", "H")
    if not compute.sandbox_allowed(view.model):
        st.info(t("parts.freedom.too_big", limit=compute.SANDBOX_MAX_PARAMS // 1_000_000))
    elif view.text is None:
        st.info(t("lessons.need_sequence"))
    else:
        basis_change(view, layer, head, key=KEY)
    low = write_spaces(view, layer, key=KEY)
    st.markdown(t("lessons.s4.why_close", layer=layer, low=f"{low:.1f}"))
