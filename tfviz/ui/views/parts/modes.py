"""Take W_o apart, 1: W_o modes. The task's accuracy (MiniLM: the similarity of sentences A
and B) under each W_o mode and rank-k over k, beside W_o's singular values."""

from __future__ import annotations

import streamlit as st

from tfviz import plots
from tfviz.core import dissect, wo
from tfviz.ui import compute, switches
from tfviz.ui.compute import accuracy_cache
from tfviz.ui.i18n import current, t
from tfviz.ui.switches import w_o_label
from tfviz.ui.text import md_escape
from tfviz.ui.view import View
from tfviz.ui.widgets import chart


def mode_names(lang: str) -> dict[str, str]:
    """The legend names of the mode-sweep chart."""
    names = {mode: w_o_label(mode, lang=lang) for mode in dissect.WHOLE_MODES}
    return {**names, "rank": t("parts.modes.rank_curve", lang=lang)}


def warm_other_scopes(view: View, layer: int | None) -> None:
    """Have the other layer scopes' sweeps measured in the background, so that switching the
    scope picker is a lookup (the first sweep of a scope measures the model ~20 times).

    The ranks are the grid and the k box's first k (d_k): what each scope shows when first
    picked. Another typed k costs a scope one measurement when it is picked, rather
    than background work on every k typed. Known values are skipped, so this is cheap to call
    on every run.

    Toy models only: their measure is the task's accuracy on fixed examples, one set of values
    per server and model. A sentence model's measure is the typed pair's similarity, which the
    next keystroke replaces, so measuring its other scopes ahead would mostly be wasted.
    """
    cfg = view.meta.config
    ranks = dissect.rank_grid(cfg.d_model, extra=[cfg.d_k])
    scopes = [scope for scope in (None, *range(cfg.n_layers)) if scope != layer]
    cache = accuracy_cache(view.entry.digest, view.task.name, view.model)
    cache.warm(iv for scope in scopes for iv in dissect.sweep_switches(cfg.d_model, scope, ranks))


def modes_section(view: View, k: int | None) -> None:
    st.caption(t("parts.modes.intro"))
    cfg = view.meta.config
    lang = current()
    layer = switches.layer_picker(
        t("parts.scope"),
        view.meta.config.n_layers,
        "parts_scope",
        t("parts.all_layers", lang=lang),
        lambda x: f"L{x}",
        width=220,
    )
    measured = view.kind.measure(view)  # None: nothing to measure, after saying why
    if measured is None:
        return
    measure, name = measured
    ranks = dissect.rank_grid(cfg.d_model, extra=[] if k is None else [k])
    with st.spinner(t("parts.modes.computing")):
        sweep = dissect.sweep_modes(measure, cfg.d_model, layer, ranks)
    if view.kind.shared_metric:
        warm_other_scopes(view, layer)
    lang = current()
    scope = t("parts.all_layers") if layer is None else f"L{layer}"
    left, right = st.columns([3, 2])
    with left:
        chart(
            plots.mode_sweep_plot(
                sweep.ranks,
                sweep.rank_values,
                sweep.whole,
                mode_names(lang),
                chosen_k=k,
                title=t("parts.modes.title", what=name, scope=scope),
                x_title=t("parts.modes.x"),
                y_title=name,
            ),
            key="parts_sweep",
        )
    with right:
        sv = compute.cached_spectrum(view.entry.digest, _model=view.model)
        shown = list(range(cfg.n_layers)) if layer is None else [layer]
        chart(
            plots.w_o_spectrum_plot(
                sv[shown],
                title=t("parts.modes.spectrum_title"),
                x_title=t("parts.modes.x"),
                y_title=t("parts.modes.spectrum_y"),
                layer_ids=shown,
                chosen_k=k,
            ),
            key="parts_spectrum",
        )
    values = {mode: f"{value:.3g}" for mode, value in sweep.whole.items()}
    st.markdown(
        md_escape(
            t(
                "parts.modes.summary",
                what=name,
                learned=values["learned"],
                block=values[wo.BLOCK_DIAGONAL],
                identity=values["identity"],
                zero=values["zero"],
            )
        )
    )
    if k is not None:
        st.markdown(md_escape(t("parts.modes.at_k", k=k, value=f"{sweep.at_rank(k):.3g}")))
    st.caption(t("parts.modes.reading"))
