"""Induction heads in the page (Analysis, and the decoder lesson): every head's previous-token and
induction score on tfviz's probe (random tokens repeated twice, tfviz.analysis.induction), the
in-context loss drop, the chosen head's pattern with its diagonal stripe, all of it learned and
under W_o switches.

A decoder only: the probe asks what comes next. Its numbers are cached per model digest and
switches, shared by every session (the model is passed unhashed; a switch is a forward argument,
so nothing here changes it).
"""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from tfviz import plots
from tfviz.analysis import induction
from tfviz.core import modes
from tfviz.core.interventions import NONE, Interventions, head_name
from tfviz.ui import compute
from tfviz.ui.i18n import t
from tfviz.ui.labels import describe
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart, index_picker, number_table, plot_words

# A probe of PROBE_SEQS sequences costs a 135M-parameter decoder about a second a switch on two
# cores; past this size a page probes fewer.
LARGE_PARAMS = 20_000_000
LARGE_SEQS = 8


def probe_token_ids(view: View) -> list[int]:
    """What the probe draws from: a character model's letters; any other tokenizer's every id
    but its special ones."""
    tok = view.task.tokenizer
    if tok.alphabet is not None:  # character -> id
        return sorted(tok.alphabet[c] for c in induction.LETTERS if c in tok.alphabet)
    specials = {tok.cls_id, tok.sep_id, tok.pad_id, tok.unk_id, tok.mask_id} - {None}
    return [i for i in range(tok.vocab_size) if i not in specials]


def probe_ids(view: View) -> torch.Tensor:
    """The page's probe for the view's model: (N, 2 n) ids."""
    large = view.model.config.n_params > LARGE_PARAMS
    n = LARGE_SEQS if large else induction.PROBE_SEQS
    return induction.probe(probe_token_ids(view), view.model.config.max_len, n)


def switch_set(view: View) -> list[Interventions]:
    """The switches the section sets beside the learned model: W_o off in each layer and in
    all, block-diagonal, rank 1, and the sidebar's own switch when it is none of these."""
    L = view.model.config.n_layers
    out = [NONE, *(Interventions(w_o={layer: modes.IDENTITY}) for layer in range(L))]
    out += [Interventions(w_o=modes.IDENTITY)] if L > 1 else []
    out += [Interventions(w_o=modes.BLOCK_DIAGONAL), Interventions(w_o=modes.rank(1))]
    return out + ([view.interventions] if view.interventions not in out else [])


def scores_for(view: View, iv: Interventions) -> induction.InductionScores:
    return compute.cached_induction(view.entry.digest, iv, _model=view.model, _ids=probe_ids(view))


def induction_section(view: View) -> None:
    """Analysis: the heads ranked, the switches compared, one head's stripe, the losses."""
    if not view.kind.next_tokens:
        st.info(md_escape(t("induction.decoders_only", name=view.entry.name)))
        return
    learned = scores_for(view, NONE)
    switched = scores_for(view, view.interventions)
    st.caption(md_escape(t("induction.caption", n=learned.n_seqs, period=learned.period)))
    layer, head, best = learned.best()
    # A best head is only a head of its kind above what even attention scores.
    even = learned.even()
    formed = induction.head_verdict(best, even) != "none"
    cols = st.columns(3)
    shown = head_name(layer, head) if formed else t("induction.none")
    cols[0].metric(t("induction.best_head"), shown, f"{best:.3f}", delta_color="off",
                   help=t("induction.best_help"))  # fmt: skip
    if not formed:
        st.caption(md_escape(t("induction.none_caption", k=f"{induction.WEAK_OVER_EVEN:g}",
                               even=f"{even:.4f}", head=head_name(layer, head),
                               best=f"{best:.4f}")))  # fmt: skip
    cols[1].metric(t("induction.drop"), f"{learned.in_context_drop:.2f}",
                   help=t("induction.drop_help", first=f"{learned.loss_first:.2f}",
                          repeat=f"{learned.loss_repeat:.2f}"))  # fmt: skip
    if not view.interventions.is_default:
        cols[2].metric(t("induction.drop_switched"), f"{switched.in_context_drop:.2f}",
                       f"{switched.in_context_drop - learned.in_context_drop:+.2f}")  # fmt: skip
    heads_table(learned, switched, view)
    switches_table(view, (layer, head))
    st.markdown(f"**{md_escape(t('induction.pattern_title'))}**")
    picked = head_picker(view, learned)
    pattern_pair(view, picked)
    curves = {describe(NONE): learned.loss_by_position}
    if not view.interventions.is_default:
        curves[describe(view.interventions)] = switched.loss_by_position
    chart(plots.induction_losses(curves, learned.period, t("induction.loss_title"),
                                 words=plot_words()), key="induction_losses")  # fmt: skip


def heads_table(learned, switched, view: View) -> None:
    """Every head, the best induction score first, learned (and switched)."""
    rows = []
    for layer, head, prev, ind in learned.ranked():
        row = {
            t("analysis.col.head"): head_name(layer, head),
            t("induction.col.previous"): prev,
            t("induction.col.induction"): ind,
        }
        if not view.interventions.is_default:
            row[t("induction.col.previous_switched")] = float(switched.previous_token[layer, head])
            row[t("induction.col.induction_switched")] = float(switched.induction[layer, head])
        rows.append(row)
    number_table(rows, key="induction_heads")


def switches_table(view: View, best: tuple[int, int]) -> None:
    """The learned model's best induction head and the in-context drop under every switch."""
    layer, head = best
    rows = []
    for iv in switch_set(view):
        s = scores_for(view, iv)
        rows.append({
            t("induction.col.switch"): describe(iv),
            t("induction.col.that_head", head=head_name(layer, head)): float(
                s.induction[layer, head]),
            t("induction.col.best_any"): float(s.induction.max()),
            t("induction.col.drop"): s.in_context_drop,
        })  # fmt: skip
    st.markdown(f"**{md_escape(t('induction.switches_title'))}**")
    number_table(rows, key="induction_switches")


def head_picker(view: View, learned) -> tuple[int, int]:
    """Layer and head pickers, starting at the best induction head."""
    best_layer, best_head, _ = learned.best()
    cfg = view.model.config
    left, right = st.columns(2)
    with left:
        layer = index_picker(t("analysis.layer"), cfg.n_layers, "induction_layer", "L",
                             index=best_layer)  # fmt: skip
    with right:
        head = index_picker(t("induction.head"), cfg.n_heads, "induction_head", "H",
                            index=best_head)  # fmt: skip
    return layer, head


def pattern_pair(view: View, picked: tuple[int, int]) -> None:
    """The head's attention on the probe's first sequence: learned, and switched beside it."""
    layer, head = picked
    ids = probe_ids(view)
    tok = view.task.tokenizer
    labels = [f"{tok.piece_text(int(i))}·{n}" for n, i in enumerate(ids[0].tolist())]
    shown = {describe(NONE): NONE}
    if not view.interventions.is_default:
        shown[describe(view.interventions)] = view.interventions
    cols = st.columns(len(shown))
    for n, (col, (name, iv)) in enumerate(zip(cols, shown.items(), strict=True)):
        weights = compute.cached_pattern(
            view.entry.digest, iv, layer, head, _model=view.model, _ids=ids
        )
        T = weights.shape[-1]
        weights = np.where(np.triu(np.ones((T, T), dtype=bool), 1), np.nan, weights)
        with col:
            title = f"{head_name(layer, head)}: {name}"
            chart(plots.attention_map(weights, labels, title, words=plot_words()),
                  key=f"induction_map_{n}")  # fmt: skip
    st.caption(md_escape(t("induction.stripe_caption", period=ids.shape[1] // 2)))
