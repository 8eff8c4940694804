"""The Train view: train a small model or a language model, retrain the chosen model's W_o alone,
replay a training.

Four parts, one at a time:
- Train a model: a worker thread trains it (work.TrainWork); it is saved to the user models folder
  with its timeline beside it, and joins every session's picker.
- Train a language model: a small character model on the bundled Shakespeare corpus
  (work.LanguageWork), saved as a model folder in the user models folder with its validation loss
  and induction score; it joins every session's picker too. It needs no toy model: it is the one
  part offered whatever model is picked.
- Retrain W_o alone: a copy of the chosen model with every weight but W_o frozen, W_o started from
  identity, zeros, random or the learned one (work.RetrainWoWork); its accuracy over the steps is
  drawn against the learned W_o's. Nothing is saved and the shared model is never changed.
- Training timeline: for a model trained in the app, a slider over its kept steps shows the
  attention of the typed sequence, head importance and W_o's mixing index at that step (the
  scores once per timeline, the sequence's attention at every kept step once per sequence, so a
  slider move is a lookup).

Every job runs under one server-wide cap (jobs.JobManager, one per process) and stops when the
browser session that started it has been gone longer than Streamlit's reconnect grace time. What a
job says (tfviz.messages.Message: a key and values) is worded in the page's language by
tfviz.ui.jobs, which the views that run jobs share. Each part is a module of this package; this
one draws the part picker and the chosen part.
"""

from __future__ import annotations

import streamlit as st

from tfviz.ui.i18n import current, t, why
from tfviz.ui.jobs import job_manager
from tfviz.ui.view import TRAINS_TOYS, View, toy_only
from tfviz.ui.views.train.language import language_section
from tfviz.ui.views.train.new_model import train_section
from tfviz.ui.views.train.retrain import retrain_section
from tfviz.ui.views.train.timeline import timeline_section

SECTIONS = {
    "train": "train.section.train",
    "language": "train.section.language",
    "retrain": "train.section.retrain",
    "timeline": "train.section.timeline",
}


def render(view: View) -> None:
    try:
        manager = job_manager()
    except ValueError as e:  # a bad TFVIZ_MAX_JOBS / TFVIZ_MAX_QUEUE setting on the server
        st.error(t("train.unavailable", why=why(e)))
        return
    lang = current()  # for the option labels: see tfviz.ui.i18n.t
    section = st.segmented_control(
        t("train.section"),
        list(SECTIONS),
        default="train",
        format_func=lambda s: t(SECTIONS[s], lang=lang),
        key="train_section",
        required=True,
        label_visibility="collapsed",
    )
    if section == "language":  # whatever model is picked: it trains a model of its own
        language_section(manager)
    elif toy_only(view, t("train.what"), TRAINS_TOYS):
        return
    elif section == "retrain":
        retrain_section(view, manager)
    elif section == "timeline":
        timeline_section(view)
    else:
        train_section(view, manager)
