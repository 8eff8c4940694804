"""The sidebar's switches, with one owner: W_o's mode (rank-k included), the layer it acts in,
and the heads zeroed before W_o.

The same three values live in three places: the sidebar's widgets (session_state), the forward
pass's tfviz.core.interventions.Interventions, and a shared link's query string. This module is the
only one that converts between them (`Switches`), names them (`w_o_label`), draws them
(`controls`) and checks a link's values (`parse`, `fit`). tfviz.ui.share calls it for links; the
"Take W_o apart" view borrows its rank option and its layer picker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from tfviz.core import interventions, modes, wo
from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions, head_name, head_names, parse_head_name
from tfviz.ui import state
from tfviz.ui.i18n import current, t

# Widget keys, which are also the query keys of a link (tfviz.ui.share).
MODE, RANK_K, SCOPE = state.W_O_MODE.name, state.W_O_RANK.name, state.W_O_SCOPE.name
ABLATE = state.ABLATE.name
QUERY_KEYS = (MODE, SCOPE, ABLATE)
PER_MODEL_KEYS = (RANK_K, SCOPE, ABLATE)  # options that depend on the model: forgotten with it

RANK = "rank"  # a mode picker's option for rank-k: k comes from a number box beside it
EVERY_LAYER = -1  # a layer picker's option for every layer (an int, like the layers)

# W_o mode -> catalogue key of its name; "rank:K" modes are named by RANK_LABEL with K filled in.
W_O_LABELS = {mode: modes.label_key(mode) for mode in (*modes.SWITCH, *modes.TAKEN_APART)}
RANK_LABEL = modes.label_key(modes.rank(1))

# A link's value refused: refuse(query key, reason, value, detail) (tfviz.ui.share.Notice).
Refuse = Callable[..., None]


def w_o_label(mode: str, lang: str | None = None) -> str:
    """A W_o mode's name in the student's language: every mode of tfviz.core.wo, "rank:K" included.

    lang: the language fixed while the script ran, when called from a widget's format_func.
    """
    k = wo.rank_of(mode)
    if k is not None:
        return t(RANK_LABEL, k=k, lang=lang)
    return t(W_O_LABELS[mode], lang=lang)


@dataclass(frozen=True)
class Switches:
    """What the sidebar's switches say: a W_o mode (a tfviz.core.wo mode, "rank:K" included) in
    every layer or one, and heads zeroed before W_o, by name (L0H1), in the order picked."""

    mode: str = "learned"
    layer: int | None = None  # None: every layer
    ablate: tuple[str, ...] = ()

    @property
    def interventions(self) -> Interventions:
        """The forward pass's switches."""
        return interventions.switches(
            self.mode, self.layer, [parse_head_name(name) for name in self.ablate]
        )

    @classmethod
    def of(cls, iv: Interventions) -> Switches:
        """The switches that give iv (as the sidebar makes it: one mode, in one layer or all)."""
        heads = tuple(head_name(*pair) for pair in iv.ablate_heads)
        if isinstance(iv.w_o, str):
            return cls(iv.w_o, None, heads)
        (layer, mode), *_ = iv.w_o
        if mode == "learned":  # learned in one layer is learned everywhere: the same view
            return cls("learned", None, heads)
        return cls(mode, layer, heads)

    def query(self) -> dict[str, str]:
        """A link's values for these switches; defaults are left out."""
        query = {}
        if self.mode != "learned":
            query[MODE] = self.mode
            if self.layer is not None:
                query[SCOPE] = str(self.layer)
        if self.ablate:
            query[ABLATE] = ",".join(self.ablate)
        return query

    def widget_state(self) -> dict:
        """The session_state values that make `controls` show these switches."""
        state: dict = {MODE: self.mode, SCOPE: EVERY_LAYER if self.layer is None else self.layer}
        k = wo.rank_of(self.mode)
        if k is not None:  # the radio's rank option, with k in its number box
            state[MODE], state[RANK_K] = RANK, k
        state[ABLATE] = list(self.ablate)
        return state


# ---- a link's values ------------------------------------------------------------------------


def parse(one: Callable[..., str | None], refuse: Refuse, max_ablate_chars: int) -> Switches:
    """The switches a link's query names, checked for what can be checked without a model.

    one(key, limit=...): the key's single value, or None (absent, or refused already).
    """
    mode = one(MODE)
    if mode is not None:
        try:
            wo.check_mode(mode)
        except ValueError:
            refuse(MODE, "bad_mode", mode)
            mode = None
    layer = None
    scope = one(SCOPE)
    if scope is not None:
        if scope.isascii() and scope.isdigit():
            layer = int(scope)
        else:
            refuse(SCOPE, "bad_layer", scope)
    heads: list[str] = []
    ablate = one(ABLATE, limit=max_ablate_chars)
    for name in ablate.split(",") if ablate else ():
        try:
            pair = parse_head_name(name.strip()) if name.isascii() else (-1, -1)
        except ValueError:
            pair = (-1, -1)
        # int() also reads "L-1H0" and full-width or Arabic-Indic digits: refused too.
        if min(pair) < 0:
            refuse(ABLATE, "bad_head", name)
            continue
        if head_name(*pair) not in heads:
            heads.append(head_name(*pair))
    return Switches(mode or "learned", layer, tuple(heads))


def fit(switches: Switches, config: ModelConfig, refuse: Refuse) -> Switches:
    """switches with what the model cannot take refused: a rank above d_model, a layer or a
    head it lacks."""
    mode, layer = switches.mode, switches.layer
    try:
        wo.check_rank(mode, config.d_model)
    except ValueError:
        refuse(MODE, "rank_too_large", mode, str(config.d_model))
        mode = "learned"
    if layer is not None and layer >= config.n_layers:
        refuse(SCOPE, "bad_layer", str(layer), str(config.n_layers - 1))
        layer = None
    kept = []
    for name in switches.ablate:
        lay, head = parse_head_name(name)
        if lay < config.n_layers and head < config.n_heads:
            kept.append(name)
        else:
            refuse(ABLATE, "bad_head", name)
    return Switches(mode, layer, tuple(kept))


# ---- widgets --------------------------------------------------------------------------------


def layer_picker(
    label: str,
    n_layers: int,
    key: str,
    every: str,
    layer_name: Callable[[int], str],
    width: int | str = "stretch",
) -> int | None:
    """A selectbox of every layer (EVERY_LAYER, shown as `every`) and each layer (layer_name);
    the picked layer, None for every layer. A stale choice (another model's layer) is dropped."""
    options = [EVERY_LAYER, *range(n_layers)]
    if state.widget_value(key) not in (None, *options):
        state.forget(key)
    choice = st.selectbox(
        label,
        options,
        format_func=lambda x: every if x == EVERY_LAYER else layer_name(x),
        key=key,
        width=width,
    )
    return None if choice == EVERY_LAYER else choice


def controls(config: ModelConfig) -> Switches:
    """The sidebar's switches: W_o learned / off / zero / block-diagonal / rank-k (k in a number
    box, 1..D), in every layer or one, and heads zeroed before W_o."""
    lang = current()  # format_func runs outside the script: the language is fixed here

    def mode_name(mode: str) -> str:
        return t("switch.rank_k", lang=lang) if mode == RANK else w_o_label(mode, lang=lang)

    st.subheader(t("switch.title"))
    mode = st.radio(
        t("switch.w_o"),
        [*W_O_LABELS, RANK],
        format_func=mode_name,
        key=MODE,
        help=t("switch.w_o_help"),
    )
    if mode == RANK:
        if state.W_O_RANK.get() not in (None, *range(1, config.d_model + 1)):
            state.W_O_RANK.pop()  # k of a wider model: not a rank of this W_o
        k = st.number_input(
            t("switch.k", d=config.d_model),
            min_value=1,
            max_value=config.d_model,
            value=min(config.d_k, config.d_model),
            step=1,
            key=RANK_K,
            help=t("switch.k_help", d=config.d_model),
        )
        mode = f"{wo.RANK_PREFIX}{int(k)}"
    layer = layer_picker(
        t("switch.scope"),
        config.n_layers,
        SCOPE,
        t("switch.all_layers", lang=lang),
        lambda x: t("switch.layer", lang=lang, layer=x),
    )
    ablate = st.multiselect(
        t("switch.ablate"),
        head_names(config.n_layers, config.n_heads),
        key=ABLATE,
        placeholder=t("switch.ablate_none"),
        help=t("switch.ablate_help"),
    )
    return Switches(mode, layer, tuple(ablate))
