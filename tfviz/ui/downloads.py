"""Buttons that download a view's numbers as CSV, built on click only."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import streamlit as st

from tfviz.plots.export import before_after_csv, comparison_csv
from tfviz.ui.i18n import t
from tfviz.ui.view import View

FILE_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def csv_download(label: str, build: Callable[[], str], name: str, key: str) -> None:
    """A button that downloads build()'s CSV text as <name>.csv; build runs on click only, so
    a keystroke does not pay for a table nobody downloads."""
    st.download_button(
        label,
        build,
        file_name=f"{FILE_NAME_UNSAFE.sub('_', name)[:80]}.csv",
        mime="text/csv",
        key=key,
        on_click="ignore",
    )


def download_before_after(view: View, key: str = "download_before_after") -> None:
    """The "Before/after W_o" view's numbers as CSV: concat and attn_out of every layer, token
    and dimension (tfviz.plots.export.before_after_csv)."""
    tr = view.trace
    csv_download(
        t("common.download.before_after"),
        functools.partial(before_after_csv, tr.concat, tr.attn_out, tr.labels, tr.n_heads),
        f"before_after_w_o_{view.entry.name}",
        key,
    )


def download_comparison(view: View, key: str = "download_comparison") -> None:
    """The "W_o off" view's numbers as CSV: the residual stream after every layer, learned
    beside switched (tfviz.plots.export.comparison_csv)."""
    base, switched = view.base, view.trace
    csv_download(
        t("common.download.comparison"),
        functools.partial(comparison_csv, base.resid_out, switched.resid_out, base.labels),
        f"w_o_off_{view.entry.name}",
        key,
    )
