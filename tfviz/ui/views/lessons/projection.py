"""Lesson step 2: one big projection then view/transpose equals H per-head projections, measured on
the loaded model (tfviz.lessons.projection).
"""

from __future__ import annotations

import streamlit as st

from tfviz import lessons
from tfviz.core.metrics import compact
from tfviz.ui.i18n import t
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.views.lessons.common import difference_text, question
from tfviz.ui.widgets import index_picker

# Seed 004's two ways of computing the heads' queries (shown as code: not translated).
PROJECTION_CODE = """# one big D x D projection, then split into heads (B, T, D) -> (B, H, T, d_k)
q = W_q(x).view(B, T, H, d_k).transpose(1, 2)
# H separate (d_k x D) projections: head h owns rows h*d_k .. (h+1)*d_k of W_q
q_h = x @ W_q.weight[h*d_k:(h+1)*d_k].T + W_q.bias[h*d_k:(h+1)*d_k]   # (B, T, d_k)"""


def step_projection(view: View) -> None:
    st.markdown(t("lessons.s2.intro"))
    st.code(PROJECTION_CODE, language="python")
    st.info(t("lessons.s2.look"))
    if view.text is None:
        st.warning(t("lessons.need_sequence"))
        return
    cfg = view.meta.config
    layer = index_picker(t("lessons.layer"), cfg.n_layers, key="lesson_proj_layer", prefix="L")
    ids, pad = view.task.encode_batch([view.text], device=view.model.device)
    check = lessons.projection_equivalence(view.model, layer, ids, pad)
    B, H, T, d_k = check.shape
    st.markdown(
        t("lessons.s2.sequence", text=md_escape(view.text), T=T, H=H, d_k=d_k, D=cfg.d_model)
    )
    # The shapes of the tensors just computed (check.shape), not the config's promise of them.
    st.markdown(t("lessons.s2.shapes", T=T, H=H, d_k=d_k, D=H * d_k))
    for col, (role, diff) in zip(st.columns(3), check.max_diff.items(), strict=True):
        col.metric(t("lessons.s2.diff", role=role), difference_text(diff))
    n = min(d_k, 8)
    rows = [
        {t("lessons.s2.col.way"): t("lessons.s2.way.big")}
        | {f"[{i}]": compact(v) for i, v in enumerate(check.big_first[:n])},
        {t("lessons.s2.col.way"): t("lessons.s2.way.separate")}
        | {f"[{i}]": compact(v) for i, v in enumerate(check.separate_first[:n])},
    ]
    st.caption(t("lessons.s2.table_caption", n=n, d_k=d_k))
    st.dataframe(rows, hide_index=True, key="lesson_projection_table")
    worst = max(check.max_diff.values())
    if check.exact:  # "0.00e+00: float32 rounding" would tell a student rounding happened
        answer = t("lessons.s2.answer_exact")
    else:
        answer = t("lessons.s2.answer", worst=difference_text(worst))
    question("lessons.s2.question", answer)
