"""Take W_o apart, 5: predict, then reveal. A guess committed before the answer, then the class's
guesses (a server-wide tally the teacher may reset)."""

from __future__ import annotations

import functools

import streamlit as st

from tfviz import plots
from tfviz.core import dissect, modes
from tfviz.core.interventions import Interventions
from tfviz.serve.tally import Tally
from tfviz.ui import compute, state, switches
from tfviz.ui.i18n import current, t, why
from tfviz.ui.switches import w_o_label
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart

# What the guess is about: a mode, or rank-k with k from the box above.
QUESTION_MODES = (modes.BLOCK_DIAGONAL, modes.IDENTITY, switches.RANK, modes.ZERO)
CHOICES = ("yes", "no")


def class_tally() -> Tally:
    """The guesses of every session of this server process (anonymous, capped:
    tfviz.serve.tally), one object (tfviz.ui.compute.once)."""
    return compute.once("class_tally", Tally)


def question_label(choice: str, lang: str) -> str:
    """A question picker option: a W_o mode's name, or "rank k" (k typed in the box)."""
    if choice == switches.RANK:
        return t("parts.predict.rank_k", lang=lang)
    return w_o_label(choice, lang)


def question_mode(choice: str, k: int | None) -> str | None:
    """The W_o mode a question is about; None for the rank question while k is refused."""
    if choice != switches.RANK:
        return choice
    return None if k is None else dissect.rank_mode(k)


def predict_section(view: View, k: int | None) -> None:
    st.caption(t("parts.predict.intro"))
    lang = current()
    choice = st.selectbox(
        t("parts.predict.about"),
        QUESTION_MODES,
        format_func=functools.partial(question_label, lang=lang),
        key="parts_question",
    )
    mode = question_mode(choice, k)
    if mode is None:
        st.info(t("parts.predict.need_k"))
        return
    label = w_o_label(mode)
    question = view.kind.question(view, label)
    st.markdown(f"**{md_escape(question)}**")
    qid = f"{view.entry.key}|{mode}"  # the same question for everyone on this model
    guesses = state.PARTS_GUESSES.setdefault({})
    tally = class_tally()
    if qid not in guesses:
        guess = st.radio(
            t("parts.predict.your_guess"),
            CHOICES,
            index=None,
            format_func=lambda c: t(f"parts.predict.{c}", lang=lang),
            key=f"parts_guess_{qid}",
            horizontal=True,
        )
        if not st.button(t("parts.predict.commit"), key="parts_commit", type="primary"):
            st.caption(t("parts.predict.hidden"))
            teacher_reset(tally)
            return
        if guess is None:
            st.warning(t("parts.predict.pick_first"))
            return
        try:
            tally.add(qid, guess)
        except ValueError as e:  # the tally's cap on answers: a message, the guess kept
            st.warning(why(e))
        guesses[qid] = guess
    reveal(view, mode, guesses[qid], lang)
    counts = tally.counts(qid)
    chart(
        plots.tally_bars(
            [t(f"parts.predict.{c}") for c in CHOICES],
            [counts.get(c, 0) for c in CHOICES],
            title=t("parts.predict.tally_title", n=sum(counts.values())),
            y_title=t("parts.predict.tally_y"),
        ),
        key="parts_tally",
    )
    st.caption(t("parts.predict.anonymous"))
    teacher_reset(tally)


def reveal(view: View, mode: str, guess: str, lang: str) -> None:
    """The answer to the question about mode, and whether the guess was right."""
    iv = Interventions(w_o=mode)
    fell, shown = view.kind.outcome(view, iv)
    answer = "yes" if fell else "no"
    st.markdown(md_escape(shown))
    said = t(f"parts.predict.{guess}", lang=lang)
    if guess == answer:
        st.success(t("parts.predict.right", guess=said))
    else:
        st.warning(t("parts.predict.wrong", guess=said, answer=t(f"parts.predict.{answer}")))


def set_reset_step(step: str | None, tally: Tally | None = None) -> None:
    """A reset button's callback: move to step; with a tally, empty it (confirmed)."""
    if tally is not None:
        tally.reset()
        state.PARTS_GUESSES.set({})  # this session may guess again, like the class
    state.PARTS_RESET_STEP.set(step)


def teacher_reset(tally: Tally) -> None:
    """The teacher's reset of the whole tally, with a confirmation step."""
    step = state.PARTS_RESET_STEP.get()
    if step == "confirm":
        st.warning(t("parts.predict.reset_confirm"))
        with st.container(horizontal=True):
            st.button(
                t("parts.predict.reset_yes"),
                key="parts_reset_yes",
                type="primary",
                on_click=set_reset_step,
                args=("done", tally),
            )
            st.button(
                t("parts.predict.reset_no"),
                key="parts_reset_no",
                on_click=set_reset_step,
                args=(None,),
            )
        return
    if step == "done":
        st.success(t("parts.predict.reset_done"))
        state.PARTS_RESET_STEP.set(None)
    st.button(
        t("parts.predict.reset"),
        key="parts_reset",
        help=t("parts.predict.reset_help"),
        on_click=set_reset_step,
        args=("confirm",),
    )
