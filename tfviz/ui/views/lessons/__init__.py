"""The Lessons view: the seed articles' three claims, one step per screen, with live numbers.

1. Concatenation is not integration: the article's 2-head example, editable, with and without a
   W_o, then the same dependency map for the loaded model's real W_o (concat).
2. One big projection then view/transpose equals H per-head projections, on the loaded model
   (projection).
3. The digit-sum model in its original setting, trained through the app's one job manager (the
   bundled `sum_seed` answers at once), predicting sums the student types (recipe).
4. W_o switched off on the loaded model (switch), and the toy atlas's and the language
   atlas's answer (experiment).

Steps 5-8 look inside a decoder: the bundled character language model shakespeare-2l-attn
(models/language/, opened by tfviz.ui.folders whatever the sidebar has loaded; a step says so when
it is missing or unusable; decoder). Every number is measured live on it, never written down:
5. The causal mask: one head's attention on a typed line of Shakespeare, its upper triangle
   blank, and each row's sum over the keys it may read (causal).
6. The head with the highest previous-token score on tfviz's probe, on the typed line (previous).
7. A sentence (or the probe's kind of random letters) typed twice: the best induction head's
   stripe, and the loss and next-character accuracy on each copy. A model whose best induction
   score is low is said to have no induction head, with the number (repeat).
8. W_o switched off (the identity) in layer 0, in layer 1 and in all layers: the learned best
   induction head's score and the in-context loss drop on the probe (K-composition; w_o_off).
The probe's scores and one head's pattern come from tfviz.ui.induction (the Analysis view's
induction section, cached there), the traces from tfviz.ui.compute.trace_for.

Each step says what to look at and asks one question with its answer folded away (common). Every
string a student reads goes through the language catalogue (tfviz.ui.i18n.t); numbers come from
tfviz.lessons, figures from tfviz.plots. The step is tfviz.ui.state.LESSON_STEP (1..8); this
module draws the step picker and the step.
"""

from __future__ import annotations

import streamlit as st

from tfviz.ui import state
from tfviz.ui.i18n import current, t
from tfviz.ui.view import View
from tfviz.ui.views.lessons.causal import step_causal
from tfviz.ui.views.lessons.common import STEP_TITLES, STEPS
from tfviz.ui.views.lessons.concat import step_concat
from tfviz.ui.views.lessons.previous import step_previous
from tfviz.ui.views.lessons.projection import step_projection
from tfviz.ui.views.lessons.recipe import step_train
from tfviz.ui.views.lessons.repeat import step_induction
from tfviz.ui.views.lessons.switch import step_switch
from tfviz.ui.views.lessons.w_o_off import step_w_o_off


def render(view: View) -> None:
    st.subheader(t("lessons.heading"))
    step = step_navigation()
    st.markdown(f"### {t(STEP_TITLES[step])}")
    steps = {1: step_concat, 2: step_projection, 3: step_train, 4: step_switch}
    steps |= {5: step_causal, 6: step_previous, 7: step_induction, 8: step_w_o_off}
    steps[step](view)


def move(delta: int) -> None:
    now = state.LESSON_STEP.get(1)
    state.LESSON_STEP.set(min(max(STEPS), max(min(STEPS), now + delta)))


def step_navigation() -> int:
    """Previous / step picker / next; returns the step to show."""
    lang = current()  # for the option labels: see tfviz.ui.i18n.t
    left, middle, right = st.columns([1, 4, 1], vertical_alignment="bottom")
    with middle:
        step = st.selectbox(
            t("lessons.step_picker"),
            STEPS,
            format_func=lambda n: t(
                "lessons.step_option", n=n, title=t(STEP_TITLES[n], lang=lang), lang=lang
            ),
            key=state.LESSON_STEP.name,
        )
    left.button(
        t("lessons.prev"), key="lesson_prev", on_click=move, args=(-1,), disabled=step == STEPS[0]
    )
    right.button(
        t("lessons.next"), key="lesson_next", on_click=move, args=(1,), disabled=step == STEPS[-1]
    )
    return step
