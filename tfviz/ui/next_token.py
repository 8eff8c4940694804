"""A decoder's answer (tfviz.hf.NextTokenTask): the likeliest next token after every position,
learned and under the sidebar's switches side by side, the five likeliest after the last one, and
a greedy continuation written token by token in both, so a class watches the text change when
W_o is switched off.

The next tokens come with the traces every view already runs (TraceArrays.top_ids): nothing more
is computed for them. A continuation runs the model once per new token; it is kept per model,
text and switches in the session, so a rerun shows it again, and any click stops it (Streamlit
stops a run when the next one is asked for) with what was written so far kept. Tokens come from
the model's vocabulary, which an uploaded folder supplies: shown in code blocks, never as markdown.
"""

from __future__ import annotations

import streamlit as st

from tfviz import hf
from tfviz.core.interventions import NONE
from tfviz.ui import state
from tfviz.ui.i18n import t
from tfviz.ui.labels import describe
from tfviz.ui.text import md_escape
from tfviz.ui.view import View

ROWS = 16  # positions the table lists: the last ones of a longer text


def token_text(task, token_id: int) -> str:
    """A token as the tables show it: its text, or its spelling where that is blank."""
    text = task.tokenizer.piece_text(int(token_id))
    return text if text.strip() and text.isprintable() else repr(task.tokenizer.piece(token_id))


def next_table(view: View) -> str:
    """One row per position (the last ROWS): the token, then its likeliest successor learned
    and, when a switch is on, switched, each with its probability."""
    task, base, tr = view.task, view.base, view.trace
    switched = not view.interventions.is_default
    labels = base.labels
    start = max(0, len(labels) - ROWS)
    head = [t("next.col.position"), t("next.col.token"), t("next.col.learned")]
    if switched:
        head.append(t("next.col.switched"))
    rows = [head]
    for i in range(start, len(labels)):
        row = [str(i), labels[i], guess(task, base, i)]
        if switched:
            row.append(guess(task, tr, i) + ("" if same(base, tr, i) else "  *"))
        rows.append(row)
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows
    )


def guess(task, trace, i: int) -> str:
    # To a tenth of a percent, as the top list: a best guess under 0.5% is not "0%".
    return f"{token_text(task, trace.top_ids[i, 0])} {trace.top_probs[i, 0]:.1%}"


def same(a, b, i: int) -> bool:
    return a.top_ids[i, 0] == b.top_ids[i, 0]


def top_list(task, trace) -> str:
    """The TOP_K likeliest tokens after the last position, one a line with its probability."""
    ids, probs = trace.top_ids[-1], trace.top_probs[-1]
    words = [token_text(task, i) for i in ids]
    width = max(len(w) for w in words)
    ranked = enumerate(zip(words, probs, strict=True), 1)
    return "\n".join(f"{n}. {w.ljust(width)}  {p:6.1%}" for n, (w, p) in ranked)


def show(view: View) -> None:
    """The next-token table, the last position's top tokens and the continuation."""
    if view.text is None or view.trace is None:
        return
    task, base, tr, iv = view.task, view.base, view.trace, view.interventions
    pieces = task.pieces(view.text)
    with st.container(key="prediction"):  # a stable hook for browser tests
        st.code(next_table(view), language=None)
    if pieces.truncated:
        st.warning(md_escape(t("next.cut", n=len(pieces.ids))))
    agree = hf.agreement(base.top_ids, tr.top_ids)
    key = "next.caption" if iv.is_default else "next.caption_switched"
    n = len(base.labels)
    values = dict(n=n, agree=f"{agree:.0%}", what=describe(iv), rows=min(ROWS, n))
    st.caption(md_escape(t(key, **values)))
    left, right = st.columns(2)
    with left:
        st.caption(md_escape(t("next.top_learned", token=base.labels[-1])))
        st.code(top_list(task, base), language=None)
    if not iv.is_default:
        with right:
            st.caption(md_escape(t("next.top_switched", what=describe(iv))))
            st.code(top_list(task, tr), language=None)
    continuation(view)


def continuation(view: View) -> None:
    """The continue button and, once asked, the greedy continuation learned and switched."""
    iv = view.interventions
    key = (view.entry.digest, view.text, iv)
    done = state.CONTINUATIONS.setdefault({})
    st.button(
        t("next.continue", n=hf.MAX_NEW_TOKENS),
        key="next_continue",
        help=t("next.continue_help"),
        on_click=lambda: done.update({key: ([], [])}),
    )
    if key not in done:
        return
    learned, switched = done[key]
    sides = [(NONE, learned, t("next.cont_learned"))]
    if not iv.is_default:
        sides.append((iv, switched, t("next.cont_switched", what=describe(iv))))
    columns = st.columns(len(sides))
    slots = []
    for column, (_, _, title) in zip(columns, sides, strict=True):
        with column:
            st.caption(md_escape(title))
            slots.append(st.empty())
    prompt = list(view.task.pieces(view.text).ids)
    stop = (view.task.tokenizer.sep_id,)  # a decoder's end-of-text token (always named)
    for slot, (_, tokens, _) in zip(slots, sides, strict=True):
        slot.code(written(view, tokens), language=None, wrap_lines=True)
    for slot, (switches, tokens, _) in zip(slots, sides, strict=True):
        if len(tokens) >= hf.MAX_NEW_TOKENS or (tokens and tokens[-1] in stop):
            continue
        # Written token by token, each kept at once: a click elsewhere stops the run and the
        # next one shows what was written.
        rest = hf.MAX_NEW_TOKENS - len(tokens)
        for token in hf.continue_greedily(view.model, prompt + tokens, rest, switches, stop):
            tokens.append(token)
            slot.code(written(view, tokens), language=None, wrap_lines=True)
    if len(sides) == 2 and learned and switched:
        pairs = enumerate(zip(learned, switched, strict=False))  # one may have stopped sooner
        differ = next((n for n, (a, b) in pairs if a != b), None)
        words = "next.cont_same" if differ is None else "next.cont_differ"
        st.caption(md_escape(t(words, n=(differ or 0) + 1)))


def written(view: View, tokens: list[int]) -> str:
    """The text and its continuation so far, the new part after a marker."""
    if not tokens:
        return view.text + " …"
    new = view.task.tokenizer.decode_ids(tokens)
    return f"{view.text} ▶ {new}"
