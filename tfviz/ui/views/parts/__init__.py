"""The "Take W_o apart" view: which part of W_o does the model need?

"W_o off" removes two things at once: each head's own linear map and the mixing across heads.
Six experiments, one at a time (only the chosen section runs):

1. W_o modes: the task's accuracy (MiniLM: the similarity of sentences A and B) with W_o learned,
   block-diagonal (each head's own map, no mixing), rank-k over k, identity and zero, in one
   chart, beside W_o's singular values.
2. Head permutation: shuffling the heads in concat changes the output, unless W_o's column blocks
   are shuffled alike; then it is identical (the largest difference is printed).
3. Pattern override: one head's attention replaced by a fixed pattern; the prediction and the
   head's term z_h W_o^h before and after.
4. Two inputs: per head, how attention, concat and W_o's output differ between two sequences.
5. Predict, then reveal: a guess committed before the answer, then the class's guesses.
6. W_o's freedom: each head's OV spectrum (rank <= d_k); a change of basis inside one head's
   value space moves W_v and W_o while the outputs stay equal; the angles between the heads'
   write spaces, learned vs identity; composition; how far one linear map undoes W_o off.

The k box, above the two sections that read it, sets the rank that the chart marks and the
rank-k question asks about. Every number comes from cached library calls; nothing here changes
the shared model. Each section is a module of this package; this one draws the picker, the k box
and the chosen section.
"""

from __future__ import annotations

import streamlit as st

from tfviz.core import dissect
from tfviz.ui.i18n import current, t
from tfviz.ui.text import md_escape
from tfviz.ui.view import View, per_model
from tfviz.ui.views.parts.diff import diff_section
from tfviz.ui.views.parts.freedom import freedom_section
from tfviz.ui.views.parts.modes import modes_section
from tfviz.ui.views.parts.pattern import pattern_section
from tfviz.ui.views.parts.permutation import permutation_section
from tfviz.ui.views.parts.predict import predict_section

# Its widgets whose options depend on the model: forgotten when the model changes.
PER_MODEL_KEYS = per_model(
    "parts_k",
    "parts_order",
    "parts_seq_b",
    "parts_scope",
    "parts_perm_layer",
    "parts_pat_layer",
    "parts_pat_head",
    "parts_pat_source",
    "parts_diff_layer",
    "parts_free_layer",
    "parts_free_head",
)


SECTIONS = ("modes", "permutation", "pattern", "diff", "freedom", "predict")
RANK_SECTIONS = ("modes", "predict")  # the sections that read the k box


def render(view: View) -> None:
    lang = current()
    section = st.segmented_control(
        t("parts.section"),
        SECTIONS,
        default=SECTIONS[0],
        format_func=lambda s: t(f"parts.section.{s}", lang=lang),
        key="parts_section",
        required=True,
    )
    # Only the sections that read k show its box: above the others it asked for a number
    # nothing used.
    k = rank_box(view) if section in RANK_SECTIONS else None
    if section in ("permutation", "pattern", "diff") and view.trace is None:
        st.info(t("parts.need_sequence"))  # the box above says what is wrong with it
        return
    if section == "modes":
        modes_section(view, k)
    elif section == "permutation":
        permutation_section(view)
    elif section == "pattern":
        pattern_section(view)
    elif section == "diff":
        diff_section(view)
    elif section == "freedom":
        freedom_section(view)
    else:
        predict_section(view, k)


def rank_box(view: View) -> int | None:
    """The k of rank-k W_o (1..D) typed in a box; None, after a message, when it is not one."""
    D = view.meta.config.d_model
    d_k = view.meta.config.d_k
    typed = st.text_input(
        t("parts.k", d=D),
        value=str(d_k),
        key="parts_k",  # no max_chars: a browser drops a longer paste without a word
        width=260,
        help=t("parts.k_help", d=D, d_k=d_k),
    )
    try:
        return dissect.parse_rank(typed, D)
    except ValueError:
        st.error(md_escape(t("parts.k_bad", d=D, got=typed.strip()[:12])))
        return None
