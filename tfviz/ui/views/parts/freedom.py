"""Take W_o apart, 6: W_o's freedom. A head's W_v and W_o act only as their product W_OV^h, so a
change of basis inside the head's value space moves both while no output moves; what identity
W_o takes away is where each head writes (its write space), not what it can write."""

from __future__ import annotations

import numpy as np
import streamlit as st

import tfviz.analysis as analysis
from tfviz import plots
from tfviz.core import modes
from tfviz.ui import compute
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


def basis_change(view: View, layer: int, head: int) -> None:
    st.markdown(f"**{md_escape(t('parts.freedom.basis_title'))}**")
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    kind = left.segmented_control(
        t("parts.freedom.kind"),
        analysis.BASIS_KINDS,
        default="random",
        required=True,
        key="parts_free_kind",
        format_func=lambda k: t(f"parts.freedom.kind.{k}"),
    )
    seed = int(right.number_input(t("parts.freedom.seed"), 0, 9999, 0, key="parts_free_seed"))
    change = compute.cached_basis_change(view, layer, head, kind, seed)
    diff = compute.cached_basis_outputs(view, layer, head, kind, seed)
    names = (t("parts.freedom.before"), t("parts.freedom.after"))
    W_V0, _ = analysis.value_block(view.model, layer, change.kv_head)
    W_V1, _ = analysis.value_block(change.model, layer, change.kv_head)
    W_O0 = analysis.output_block(view.model, layer, head)
    W_O1 = analysis.output_block(change.model, layer, head)
    for what, pair in (("w_v", (W_V0.T, W_V1.T)), ("w_o", (W_O0, W_O1))):
        title = t(f"parts.freedom.{what}_chart", layer=layer, head=head, kv=change.kv_head)
        chart(plots.weight_pair(*pair, names, title, words=plot_words()), f"parts_free_{what}")
    with st.container(horizontal=True):
        st.metric(t("parts.freedom.w_o_moved"), f"{change.w_o_relative:.0%}")
        st.metric(t("parts.freedom.out_learned"), f"{diff['learned']:.1e}")
        st.metric(t("parts.freedom.out_identity"), f"{diff['identity']:.1e}")
    st.markdown(
        md_escape(
            t(
                "parts.freedom.verdict",
                diff=f"{diff['learned']:.1e}",
                moved=f"{change.w_o_relative:.0%}",
                identity=f"{diff['identity']:.1e}",
                cond=f"{change.condition:.2f}",
            )
        )
    )


def write_spaces(view: View, layer: int) -> None:
    st.markdown(f"**{md_escape(t('parts.freedom.spaces_title', layer=layer))}**")
    digest = view.entry.digest
    learned = compute.cached_write_spaces(digest, "learned", _model=view.model)
    identity = compute.cached_write_spaces(digest, "identity", _model=view.model)
    cols = st.columns(2)
    for col, (mode, spaces) in zip(
        cols, (("learned", learned), ("identity", identity)), strict=True
    ):
        with col:
            title = t(f"parts.freedom.spaces_{mode}", layer=layer)
            figure = plots.angle_map(spaces.smallest[layer], title, words=plot_words())
            chart(figure, key=f"parts_free_angles_{mode}")
    H = view.meta.config.n_heads
    off = ~np.eye(H, dtype=bool)
    low = float(np.nanmin(learned.smallest[layer][off])) if H > 1 else 90.0
    st.caption(t("parts.freedom.spaces_caption", low=f"{low:.1f}"))


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
