"""Lesson step 5, the causal mask: one head's attention on a typed line, its upper triangle blank,
and each row's sum over the keys it may read (tfviz.lessons.causal_rows).
"""

from __future__ import annotations

import streamlit as st

from tfviz import lessons
from tfviz.core.interventions import NONE, head_name
from tfviz.core.metrics import compact
from tfviz.ui.compute import trace_for
from tfviz.ui.i18n import t
from tfviz.ui.view import View
from tfviz.ui.views.lessons.common import difference_text, question
from tfviz.ui.views.lessons.decoder import head_map, lesson_lm, lm_intro, typed_line
from tfviz.ui.widgets import index_picker


def step_causal(view: View) -> None:
    lm = lesson_lm(view)
    if lm is None:
        return
    lm_intro(lm)
    st.markdown(t("lessons.s5.intro"))
    text = typed_line(lm)
    if text is None:
        return
    cfg = lm.model.config
    left, right = st.columns(2)
    with left:
        layer = index_picker(t("lessons.layer"), cfg.n_layers, "lesson_mask_layer", "L")
    with right:
        head = index_picker(t("induction.head"), cfg.n_heads, "lesson_mask_head", "H")
    st.info(t("lessons.s5.look"))
    trace = trace_for(lm, text, NONE)
    title = t("lessons.s5.map_title", head=head_name(layer, head))
    head_map(trace, layer, head, title, key="lesson_mask_map")
    rows = lessons.causal_rows(trace.attn)
    question(
        "lessons.s5.question",
        t(
            "lessons.s5.answer",
            error=difference_text(rows.row_error),
            heads=cfg.n_layers * cfg.n_heads,
            T=len(trace.labels),
            above=compact(rows.above),
            masked=rows.masked,
            cells=rows.masked + rows.allowed,
        ),
    )
