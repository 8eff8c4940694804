"""Readability through AppTest (issue 16): the W_o off view's residual-stream colours.

MiniLM's residual stream has a few outlier dimensions (about 10, where 99% of the values are
below 2): a colour range spanning them drew the heatmaps almost white. The page now draws them
on a robust range and says so under the chart, in the student's language; a toy model, whose
values have no such outliers, keeps its full range and no note.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import page_figures, start_app
from tfviz import plots
from tfviz.hf import pretrained
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app")

MINILM = f"pretrained:{pretrained.NAME}"
CLIPPED_NOTE = "w_o_off.residual_clipped"


def residual_chart(at) -> dict:
    """The residual-stream figure of the W_o off view: its one signed (diverging) heatmap; the
    attention charts run from 0 to 1, the drift chart is bars."""
    found = []
    for spec in page_figures(at):
        axis = spec["layout"].get("coloraxis", {})
        if axis.get("cmin", 0) < 0:
            found.append(spec)
    assert len(found) == 1, f"expected one residual-stream chart, found {len(found)}"
    return found[0]


def note_prefix(lang: str) -> str:
    """The clipped-range note's words before its first number."""
    return translate(lang, CLIPPED_NOTE, limit="@", percentile="@", n=0, top="@").split("@")[0]


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


TITLES = plots.TITLES_META  # the block titles' text trace: not data


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_minilm_residual_colours_use_a_robust_range_and_say_so(lang):
    pytest.importorskip(pretrained.PACKAGE, reason=f"{pretrained.PIP_REQUIREMENT} is missing")
    at = start_app(translate(lang, "app.view.w_o_off"), model=MINILM, lang=lang)
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception and not at.error
    spec = residual_chart(at)
    cmax = spec["layout"]["coloraxis"]["cmax"]
    assert 0.5 < cmax < 3.0, cmax  # was about 10.5: dimension 99's outliers
    ends = spec["layout"]["coloraxis"]["colorbar"]["ticktext"]
    assert ends[0].startswith("≤") and ends[-1].startswith("≥")
    rings = [t for t in spec["data"] if t["type"] == "scatter" and t.get("meta") != TITLES]
    assert len(rings) == 1 and rings[0]["x"]  # the clipped cells, ringed, with their own hover
    mark = translate(lang, "chart.word.beyond_range")
    assert f"<br>{mark}<br>" in rings[0]["hovertemplate"]
    assert note_prefix(lang) in captions(at)


def test_a_toy_model_keeps_its_full_range_and_no_note():
    at = start_app(translate("en", "app.view.w_o_off"))
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception and not at.error
    spec = residual_chart(at)
    assert all(t["type"] == "heatmap" for t in spec["data"] if t.get("meta") != TITLES)
    limit = spec["layout"]["coloraxis"]["cmax"]
    z = spec["data"][0]["z"]
    if isinstance(z, dict):  # plotly's typed-array encoding
        import base64

        z = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"])
    assert limit == pytest.approx(float(np.nanmax(np.abs(np.asarray(z, dtype=float)))), rel=1e-6)
    assert note_prefix("en") not in captions(at)
    assert plots.ROBUST_RATIO >= 2.0  # the toys' largest values are at most 1.7x their 99th
