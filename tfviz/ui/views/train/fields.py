"""The form fields both training forms draw (a toy model's, a language model's): the seed and the
W_o a model trains with, written once."""

from __future__ import annotations

import streamlit as st

from tfviz import settings
from tfviz.serve import work
from tfviz.ui.i18n import current, t

TRAIN_W_O_LABELS = {mode: f"train.w_o.{mode}" for mode in work.TRAIN_W_O}


def seed_box(column, value: float, key: str) -> float:
    """The seed, a float box checked by the form's own check (see new_model.train_form)."""
    return column.number_input(
        t("train.seed"),
        value=value,
        step=1.0,
        format="%.0f",
        key=key,
        help=t("train.seed_help", high=f"{settings.MAX_SEED:,}"),
    )


def w_o_radio(key: str) -> str:
    """The W_o a model trains with: every training mode."""
    lang = current()  # for format_func, which Streamlit may call outside this run
    return st.radio(
        t("train.w_o"),
        list(TRAIN_W_O_LABELS),
        format_func=lambda m: t(TRAIN_W_O_LABELS[m], lang=lang),
        key=key,
        horizontal=True,
        help=t("train.w_o_help"),
    )
