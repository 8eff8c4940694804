"""Lesson step 1, concatenation is not integration: the article's 2-head example, editable, with and
without a W_o (tfviz.lessons.concat), then the same dependency map for the loaded model's real W_o.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from tfviz import lessons, plots
from tfviz.core.metrics import compact
from tfviz.lessons import LessonInputError
from tfviz.ui import state
from tfviz.ui.i18n import t, why
from tfviz.ui.standalone import download_button
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.views.lessons.common import STEP_TITLES, question
from tfviz.ui.widgets import chart, index_picker, plot_words

if TYPE_CHECKING:
    import plotly.graph_objects as go


Z_KEYS = ("lesson_z0_0", "lesson_z0_1", "lesson_z1_0", "lesson_z1_1")  # head 0, then head 1
EDIT_W = "lesson_edit_w"  # the toggle that shows the table editor


def reset_example() -> None:
    for key, value in zip(Z_KEYS, lessons.ARTICLE_Z0 + lessons.ARTICLE_Z1, strict=True):
        state.set_widget(key, value)
    state.LESSON_W_EDITOR.pop()
    state.LESSON_W_VALUES.pop()


def example_inputs() -> tuple[list[float], np.ndarray]:
    """The head outputs (4 numbers) and W_o (4 x 4, the article's layout) as edited."""
    st.markdown(t("lessons.s1.heads_label"))
    defaults = lessons.ARTICLE_Z0 + lessons.ARTICLE_Z1
    labels = ("lessons.s1.z0_0", "lessons.s1.z0_1", "lessons.s1.z1_0", "lessons.s1.z1_1")
    z = []
    for col, key, label, value in zip(st.columns(4), Z_KEYS, labels, defaults, strict=True):
        # Unbounded float inputs: a bad value (NaN from a crafted request, 1e300) gets a
        # message from the check below instead of Streamlit silently restoring the default.
        z.append(col.number_input(t(label), value=value, step=0.1, format="%g", key=key))
    st.markdown(t("lessons.s1.w_label"))
    # The article's layout: row j reads concat[j], column d builds attn_out[d].
    W = np.array(state.LESSON_W_VALUES.get(lessons.ARTICLE_W_O), dtype=np.float64)
    rows = [t("lessons.s1.w_column", j=j, h=j // 2) for j in range(4)]
    names = [t("lessons.s1.w_out", d=d) for d in range(4)]
    import pandas as pd  # only this step draws a table of W_o

    # A table editor is most of what a step change costs the browser to draw
    # (bench/ui_latency.py --lesson-steps): it is drawn on request, a plain table otherwise.
    if st.toggle(t("lessons.s1.edit_w"), key=EDIT_W):
        columns = [f"c{j}" for j in range(4)]
        config = {
            c: st.column_config.NumberColumn(name, format="%g")
            for c, name in zip(columns, names, strict=True)
        }
        frame = pd.DataFrame(W, columns=columns, index=rows)
        edited = st.data_editor(
            frame, key=state.LESSON_W_EDITOR.name, column_config=config, num_rows="fixed"
        )
        W = edited.to_numpy(dtype=np.float64, na_value=np.nan)
        state.LESSON_W_VALUES.set(W.tolist())
    else:
        shown = [[compact(x) for x in row] for row in W]
        st.table(pd.DataFrame(shown, columns=names, index=rows))
    return z, W


def step_concat(view: View) -> None:
    st.markdown(t("lessons.s1.intro"))
    model_shapes(view)
    st.info(t("lessons.s1.look"))
    st.markdown(t("lessons.s1.w_note"))
    z, W = example_inputs()
    st.button(t("lessons.s1.reset"), key="lesson_reset", on_click=reset_example)
    try:
        ex = lessons.two_head_example(z[:2], z[2:], W)
    except LessonInputError as e:
        st.error(why(e))
        ex = None
    if ex is not None:
        maps = show_example(ex)
        title = t("standalone.title.lesson", step=t(STEP_TITLES[1]))
        download_button(view, title, [(t("lessons.s1.look"), maps)], key="lesson_step1")
    show_model_dependency(view)
    shown = ex if ex is not None else lessons.two_head_example()
    c0, c1 = shown.contributions[:, 3]
    question(
        "lessons.s1.question",
        t(
            "lessons.s1.answer",
            identity=compact(shown.output_identity[3]),
            c0=compact(c0),
            c1=compact(c1),
            out=compact(shown.output[3]),
        ),
    )


def feature0_terms(ex: lessons.HeadExample) -> str:
    """attn_out[0] = sum_j concat[j] · W_o[j, 0], written out: every term whose concat number is
    not 0 (the article's 1.0 × 0.8 + 2.0 × 0.5), each with the head it comes from."""
    d_k = ex.z.shape[1]
    terms = [
        t("lessons.s1.term", z=compact(x), h=j // d_k, w=compact(ex.W_o[j, 0]))
        for j, x in enumerate(ex.concat)
        if x != 0
    ]
    return " + ".join(terms) or "0"


def model_shapes(view: View) -> None:
    """The article's shapes with the numbers of the model on screen: concat (T, h·d_k) times
    W_o (h·d_k, d_model) is attn_out (T, d_model), read from the layer's tensors themselves."""
    cfg = view.meta.config
    weight = view.model.layers[0].attn.W_o.weight  # nn.Linear: (d_model, h·d_k)
    d_model, width = weight.shape
    T: int | str = "T"  # no valid sequence typed: the letter stands
    if view.trace is not None:
        T, width = view.trace.concat[0].shape  # (T, h·d_k), as the layer computed it
    st.markdown(
        t(
            "lessons.s1.shapes",
            name=md_escape(view.entry.name),
            T=T,
            H=cfg.n_heads,
            d_k=width // cfg.n_heads,
            width=width,
            d_model=d_model,
        )
    )


def show_example(ex: lessons.HeadExample) -> go.Figure:
    """The example's table and its two maps; returns the maps' figure (drawn)."""
    rows = []
    for d in range(len(ex.concat)):
        rows.append(
            {
                t("lessons.s1.col.dim"): d,
                t("lessons.s1.col.owner"): f"H{d // ex.z.shape[1]}",
                t("lessons.s1.col.without"): compact(ex.output_identity[d]),
                t("lessons.s1.col.from0"): compact(ex.contributions[0, d]),
                t("lessons.s1.col.from1"): compact(ex.contributions[1, d]),
                t("lessons.s1.col.with"): compact(ex.output[d]),
                t("lessons.s1.col.heads_without"): int(ex.heads_drawn_on_identity[d]),
                t("lessons.s1.col.heads_with"): int(ex.heads_drawn_on[d]),
            }
        )
    st.table(rows)  # static: a data grid costs the browser far more to draw
    st.markdown(
        t(
            "lessons.s1.feature0",
            terms=feature0_terms(ex),
            out=compact(ex.output[0]),
        )
    )
    maps = plots.dependency_pair(
        ex.dependency_identity,
        ex.dependency,
        titles=(t("lessons.s1.map_without"), t("lessons.s1.map_with")),
        head_label=t("lessons.map.head"),
        output_label=t("lessons.map.output"),
        value_label=t("lessons.map.contribution"),
        words=plot_words(),
    )
    chart(maps, key="lesson_maps")
    st.caption(t("lessons.s1.maps_axes"))  # the table's rows are concat dims, the maps' outputs
    return maps


def show_model_dependency(view: View) -> None:
    cfg = view.meta.config
    # On request: a third chart on this step's first paint put a step change over its budget
    # (bench/ui_latency.py --lesson-steps), and the real W_o reads best after the small example.
    show = t("lessons.s1.show_model", name=md_escape(view.entry.name))
    if not st.toggle(show, key="lesson_show_model"):
        return
    st.markdown(t("lessons.s1.model_intro", name=md_escape(view.entry.name)))
    layer = index_picker(t("lessons.layer"), cfg.n_layers, key="lesson_dep_layer", prefix="L")
    dep = lessons.model_dependency(view.model, layer)  # (D, H)
    drawn = lessons.heads_drawn_on(dep)
    chart(
        plots.dependency_map(
            dep,
            title=t("lessons.s1.map_model", layer=layer),
            head_label=t("lessons.map.head"),
            output_label=t("lessons.map.output"),
            value_label=t("lessons.map.weight"),
            words=plot_words(),
        ),
        key="lesson_map_model",
    )
    st.markdown(
        t(
            "lessons.s1.model_summary",
            all=int((drawn == cfg.n_heads).sum()),
            one=int((drawn <= 1).sum()),
            D=cfg.d_model,
            H=cfg.n_heads,
            share=f"{lessons.DRAWN_ON:.0%}",
        )
    )
