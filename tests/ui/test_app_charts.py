"""The attention views' chart options through AppTest (issue 31, "Charts"): the weights' colour
scale, chosen once per session and said under the charts; the "W_o off" compare view naming
its two models instead of Left and Right (its charts are stacked)."""

from __future__ import annotations

import pytest

from tests.conftest import page_figures, start_app
from tfviz import plots
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app")


def captions_read(at) -> str:
    return "\n".join(c.value for c in at.caption).replace("\\", "")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_compare_view_names_its_two_models_not_left_and_right(lang):
    at = start_app(translate(lang, "app.view.w_o_off"), lang=lang)
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    text = captions_read(at)
    learned, switched = translate(lang, "w_o_off.learned"), translate(lang, "w_o_off.switched")
    assert f"“{learned}”" in text and f"“{switched}”" in text
    for side in ("Left", "Right", "左：", "右："):
        assert side not in text
    headings = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert learned in headings and switched in headings  # the names the caption uses


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_weight_scale_is_chosen_once_said_on_the_bar_and_under_the_charts(lang):
    at = start_app(translate(lang, "app.view.attention"), lang=lang)
    fixed = translate(lang, "attention.colours_caption.fixed")
    assert fixed in captions_read(at)  # the default, said
    specs = [s for s in page_figures(at) if s["data"][0]["type"] == "heatmap"]
    assert specs and all(s["layout"]["coloraxis"]["cmax"] == 1.0 for s in specs)

    at.radio(key="attn_weight_scale").set_value(plots.LOG).run()
    assert not at.exception
    floor = f"{plots.LOG_FLOOR:g}"
    assert translate(lang, "attention.colours_caption.log", floor=floor) in captions_read(at)
    bars = [
        s["layout"]["coloraxis"]["colorbar"]["title"]["text"]
        for s in page_figures(at)
        if s["layout"]["coloraxis"].get("showscale", True)
    ]
    assert translate(lang, "chart.scale.log") in bars
    logged = [s for s in page_figures(at) if "customdata" in s["data"][0]]
    assert logged and all(s["layout"]["coloraxis"]["cmax"] == 0 for s in logged)

    # Another attention view keeps the session's choice, in its own picker.
    at.session_state["view"] = translate(lang, "app.view.w_o_off")
    at.run()
    at.radio(key="w_o_mode").set_value("identity").run()
    assert not at.exception
    assert at.radio(key="compare_weight_scale").value == plots.LOG
    assert translate(lang, "attention.colours_caption.log", floor=floor) in captions_read(at)
