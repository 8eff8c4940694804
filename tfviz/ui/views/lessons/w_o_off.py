"""Lesson step 8: W_o switched off (the identity) in each layer and in all layers, and what becomes
of the learned model's best induction head and of the in-context loss drop on the probe.
"""

from __future__ import annotations

import streamlit as st

from tfviz import lessons, plots
from tfviz.analysis import induction
from tfviz.core import modes
from tfviz.core.interventions import NONE, Interventions, head_name
from tfviz.ui import induction as induction_view
from tfviz.ui.i18n import t
from tfviz.ui.labels import describe
from tfviz.ui.view import View
from tfviz.ui.views.lessons.common import question
from tfviz.ui.views.lessons.decoder import lesson_lm, lm_intro, score_text
from tfviz.ui.widgets import chart, number_table, plot_words


def w_o_off_switches(n_layers: int) -> list[Interventions]:
    """The learned model, W_o off (the identity) in each layer, and in all layers."""
    one = [Interventions(w_o={layer: modes.IDENTITY}) for layer in range(n_layers)]
    return [NONE, *one, *([Interventions(w_o=modes.IDENTITY)] if n_layers > 1 else [])]


def step_w_o_off(view: View) -> None:
    lm = lesson_lm(view)
    if lm is None:
        return
    lm_intro(lm, short=True)
    st.markdown(t("lessons.s8.intro"))
    measured = {
        iv: induction_view.scores_for(lm, iv) for iv in w_o_off_switches(lm.model.config.n_layers)
    }
    learned = measured[NONE]
    off0 = measured[Interventions(w_o={0: modes.IDENTITY})]
    layer, head, best = learned.best()
    name = head_name(layer, head)
    switched = float(off0.induction[layer, head])
    even = learned.even()
    if induction.head_verdict(best, even) == "none":
        outcome = "lessons.s8.answer_none"
    else:
        outcome = (
            "lessons.s8.answer_kept"
            if lessons.head_kept(best, switched)
            else "lessons.s8.answer_lost"
        )
    values = dict(
        head=name,
        learned=score_text(best),
        switched=score_text(switched),
        even=score_text(even),
        drop=f"{learned.in_context_drop:.2f}",
        drop_off=f"{off0.in_context_drop:.2f}",
    )
    parts = [t(outcome, **values)]
    if layer == 0:
        parts.append(t("lessons.s8.answer_layer0", head=name))
    parts.append(t("lessons.s8.answer_why"))
    question("lessons.s8.question", "\n\n".join(parts))
    st.caption(t("lessons.s8.table_caption", n=learned.n_seqs, period=learned.period))
    rows = [
        {
            t("induction.col.switch"): describe(iv),
            t("induction.col.that_head", head=name): float(s.induction[layer, head]),
            t("induction.col.best_any"): float(s.induction.max()),
            t("induction.col.drop"): s.in_context_drop,
        }
        for iv, s in measured.items()
    ]
    number_table(rows, key="lesson_w_o_off_table")
    curves = {describe(iv): s.loss_by_position for iv, s in measured.items()}
    chart(
        plots.induction_losses(
            curves, learned.period, t("lessons.s8.loss_title"), words=plot_words()
        ),
        key="lesson_w_o_off_losses",
    )
    st.caption(t("lessons.loss_caption"))
