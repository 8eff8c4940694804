"""Take W_o apart, 6: W_o's freedom. A head's W_v and W_o act only as their product W_OV^h, so a
change of basis inside the head's value space moves both while no output moves; what identity
W_o takes away is where each head writes (its write space), not what it can write."""

from __future__ import annotations

import streamlit as st

from tfviz import plots
from tfviz.core import modes
from tfviz.ui import compute
from tfviz.ui.freedom import basis_change, write_spaces
from tfviz.ui.i18n import t
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart, index_picker, number_table, plot_words


def freedom_section(view: View) -> None:
    st.caption(t("parts.freedom.intro"))
    cfg = view.meta.config
    left, right = st.columns(2)
    with left:
        layer = index_picker(t("parts.layer"), cfg.n_layers, "parts_free_layer", "L")
    with right:
        head = index_picker(t("parts.freedom.head"), cfg.n_heads, "parts_free_head", "H")
    spectrum(view, layer, head)
    if not compute.sandbox_allowed(view.model):
        st.info(t("parts.freedom.too_big", limit=compute.SANDBOX_MAX_PARAMS // 1_000_000))
    elif view.text is None:
        st.info(t("parts.need_sequence"))
    else:
        basis_change(view, layer, head)
    write_spaces(view, layer)
    composition(view)
    linear_undo(view, layer)


def spectrum(view: View, layer: int, head: int) -> None:
    ov = compute.cached_head_ov(view.entry.digest, layer, head, "learned", _model=view.model)
    d_k = view.meta.config.d_k
    st.markdown(f"**{md_escape(t('parts.freedom.spectrum_title', layer=layer, head=head))}**")
    with st.container(horizontal=True):
        st.metric(t("parts.freedom.rank"), f"{ov.rank} / {d_k}")
        st.metric(t("parts.freedom.largest"), f"{ov.singular_values[0]:.3g}")
    cache = compute.weight_views_cache(view.entry.digest, _model=view.model)
    sv = cache(("learned", "ov"))["singular_values"]  # every head's, (L, H, d_k)
    chart(
        plots.singular_value_lines(
            sv, title=t("parts.freedom.spectrum_chart", d_k=d_k), words=plot_words()
        ),
        key="parts_free_spectrum",
    )
    if len(ov.sharing) > 1:
        heads = ", ".join(f"H{h}" for h in ov.sharing)
        st.caption(t("parts.freedom.shared", kv=ov.kv_head, heads=heads))
    st.caption(t("parts.freedom.spectrum_caption", d_k=d_k))


def composition(view: View) -> None:
    if view.meta.config.n_layers < 2:
        return
    st.markdown(f"**{md_escape(t('parts.freedom.composition_title'))}**")
    cache = compute.weight_views_cache(view.entry.digest, _model=view.model)
    rows = []
    for mode in (modes.LEARNED, modes.IDENTITY):
        comp = cache((mode, "ov"))["composition"]
        row = {t("parts.freedom.col.w_o"): t(f"parts.freedom.mode.{mode}")}
        for x in "qkv":
            row[t(f"parts.freedom.col.{x}")] = float(getattr(comp, x).mean())
        rows.append(row)
    number_table(rows, key="parts_free_composition")
    st.caption(t("parts.freedom.composition_caption", baseline=f"{comp.baseline:.3f}"))


def linear_undo(view: View, layer: int) -> None:
    st.markdown(f"**{md_escape(t('parts.freedom.undo_title', layer=layer))}**")
    examples = bool(view.kind.has_answers)
    if not examples and view.text is None:
        st.info(t("parts.need_sequence"))
        return
    undo = compute.cached_linear_undo(view, layer, examples)
    with st.container(horizontal=True):
        for site in ("attn_out", "resid_mid", "resid_out"):
            st.metric(t(f"parts.freedom.undo.{site}"), f"{getattr(undo, site):.1e}")
    for site in ("attn_out", "resid_mid", "resid_out"):
        st.markdown("- " + md_escape(t(f"parts.freedom.undo_why.{site}")))
    if undo.n_points <= undo.d_model + 1:
        st.caption(t("parts.freedom.undo_few", n=undo.n_points, d=undo.d_model))
    else:
        st.caption(t("parts.freedom.undo_points", n=undo.n_points, d=undo.d_model))
