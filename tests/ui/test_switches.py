"""tfviz.ui.switches: the one owner of the sidebar's switches converts between widget state,
Interventions and a link's query, and each conversion undoes the other."""

from __future__ import annotations

import pytest

from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions
from tfviz.ui import switches
from tfviz.ui.switches import EVERY_LAYER, RANK, Switches

CONFIG = ModelConfig(vocab_size=12, n_out=5, d_model=16, n_heads=4, n_layers=2)
EVERY = [
    Switches(),
    Switches("identity"),
    Switches("zero", 1),
    Switches("block_diagonal", 0, ("L1H3",)),
    Switches("rank:5", None, ("L0H1", "L1H0")),
    Switches("rank:16", 1),
    Switches("learned", None, ("L0H0",)),
]


def parsed(query: dict[str, str]) -> tuple[Switches, list[tuple]]:
    refused: list[tuple] = []

    def one(key, limit=100):
        return query.get(key)

    got = switches.parse(one, lambda *notice: refused.append(notice), 2000)
    return got, refused


@pytest.mark.parametrize("sw", EVERY, ids=str)
def test_interventions_and_the_query_give_back_the_same_switches(sw):
    assert Switches.of(sw.interventions) == sw
    assert parsed(sw.query()) == (sw, [])
    assert switches.fit(sw, CONFIG, lambda *n: pytest.fail(f"refused {n}")) == sw


@pytest.mark.parametrize("sw", EVERY, ids=str)
def test_the_widget_state_names_the_mode_the_scope_and_the_heads(sw):
    state = sw.widget_state()
    k = sw.mode.removeprefix("rank:")
    if k != sw.mode:
        assert (state["w_o_mode"], state["w_o_rank"]) == (RANK, int(k))
    else:
        assert state["w_o_mode"] == sw.mode and "w_o_rank" not in state
    assert state["w_o_scope"] == (EVERY_LAYER if sw.layer is None else sw.layer)
    assert state["ablate"] == list(sw.ablate)


def test_defaults_stay_out_of_the_link_and_learned_in_one_layer_is_learned_everywhere():
    assert Switches().query() == {}
    one_layer = Interventions(w_o={1: "learned"})
    assert Switches.of(one_layer) == Switches()
    assert Switches("learned", 1).query() == {}  # the scope means nothing without a mode


def test_what_a_model_cannot_take_is_refused_one_by_one():
    refused: list[tuple] = []
    fitted = switches.fit(
        Switches("rank:17", 2, ("L0H4", "L1H3", "L2H0")), CONFIG, lambda *n: refused.append(n)
    )
    assert fitted == Switches("learned", None, ("L1H3",))
    assert [n[:2] for n in refused] == [
        ("w_o_mode", "rank_too_large"),
        ("w_o_scope", "bad_layer"),
        ("ablate", "bad_head"),
        ("ablate", "bad_head"),
    ]


def test_a_malformed_link_keeps_the_defaults_and_says_why():
    got, refused = parsed({"w_o_mode": "off", "w_o_scope": "one", "ablate": "L0H1,H2,L-1H0"})
    assert got == Switches("learned", None, ("L0H1",))
    assert [n[:2] for n in refused] == [
        ("w_o_mode", "bad_mode"),
        ("w_o_scope", "bad_layer"),
        ("ablate", "bad_head"),
        ("ablate", "bad_head"),
    ]
