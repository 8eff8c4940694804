"""Plotly figures from numpy arrays and token labels: attention maps, W_o before/after, drift.

The renderer never runs a model: every function takes arrays and labels, checks their shapes at
the boundary (a mismatch raises ValueError saying which axis disagrees with what) and sends
float32. Token labels are HTML-escaped, because plotly reads tick labels and hover text as HTML:
a token "<b>x</b>" must be shown as typed, not in bold. Figures are built as plain dicts and
validated once by go.Figure.

One module per kind of figure, each importing only the shared ones below it:
    style      words (`english`, Words), colours, margins, legends, array checks (the bottom)
    mosaic     a grid of heatmaps as one trace, and its block titles (imports style)
    attention  attention grids, columns and maps; norm-based attention, rollout
    w_o        concat and attn_out, W_o itself, head terms, what each output dim draws on
    neuron     inside one head for one query: q, the keys, q x k, the scores and the softmax
    shares     each head's share of a layer's attention output, layer by layer and per token
    heads      head scores, keep-top-k, ablation, OV singular values, composition
    ov         the OV sandbox: a weight block before and after a change of basis, write-space
               angles between heads
    lens       the logit lens: each layer's top token at each position
    residual   the residual stream of two passes, drift per layer
    training   a loss curve, the experiment's curves over seeds
    dissect    W_o's modes swept, its spectrum, two inputs compared, a class's guesses
    atlas      the W_o atlas's grid, a cell's curves, the mechanism's bars (imports style;
               not re-exported: tfviz.ui.atlas uses it as a module)
The other renderers of a view, not re-exported (callers import them as modules):
    standalone a view as one self-contained web page, and standalone.js, which draws the part of
               plotly's figure JSON tfviz's figures use on a canvas (the page, and the app's
               canvas charts)
    export     the views' numbers as CSV text (the same arrays and labels the figures take)
This module only re-exports the names callers use (`plots.attention_grid(...)`).
"""

from tfviz.plots.attention import (
    BLOCKS_META,
    COLUMN_PX,
    COLUMN_ROW_PX,
    COLUMN_TOP_PX,
    FITTED,
    FIXED,
    LOG,
    LOG_FLOOR,
    MAP_MAX_PX,
    MAX_ROW_LABELS,
    MIN_LABEL_PX,
    WEIGHT_SCALES,
    attention_column,
    attention_grid,
    attention_grid_column,
    attention_map,
    norm_attention_column,
    norm_attention_grid,
    rollout_grid,
    weight_range,
)
from tfviz.plots.dissect import (
    attention_diff_grid,
    head_change_map,
    mode_sweep_plot,
    tally_bars,
    w_o_spectrum_plot,
)
from tfviz.plots.heads import (
    ablation_change_bars,
    composition_grid,
    head_score_map,
    induction_losses,
    keep_top_k_plot,
    singular_value_lines,
)
from tfviz.plots.lens import lens_map
from tfviz.plots.mosaic import (
    MOSAIC_PX,
    TITLES_META,
    block_titles,
)
from tfviz.plots.neuron import (
    product_map,
    query_key_map,
    score_bars,
)
from tfviz.plots.ov import angle_map, weight_pair
from tfviz.plots.residual import (
    drift_bars,
    residual_pair,
)
from tfviz.plots.shares import (
    head_share_flow,
    head_share_tokens,
)
from tfviz.plots.style import (
    ATTENTION_SCALE,
    BOTTOM_LEGEND,
    CHART_KEYS,
    CLIPPED_KEY,
    CONDITION_COLOURS,
    DIVERGING_SCALE,
    LEGEND_MARGIN,
    MARGIN,
    MODE_COLOURS,
    MODE_DASHES,
    NORM_SCALE,
    RANK_COLOUR,
    ROBUST_PERCENTILE,
    ROBUST_RATIO,
    SEQUENTIAL_SCALE,
    TITLE_UNITS,
    Words,
    colour_limit,
    english,
    escape_labels,
)
from tfviz.plots.training import (
    experiment_curves,
    loss_curve,
)
from tfviz.plots.w_o import (
    DEP_AXIS_TITLE_PX,
    DEP_TICKS_PX,
    DEP_TITLE_LINE_PX,
    DEP_TITLE_UNITS,
    activation_map,
    cosine_bars,
    dependency_map,
    dependency_pair,
    head_contributions,
    head_shares_map,
    w_o_matrix,
)

__all__ = [
    "ATTENTION_SCALE",
    "BLOCKS_META",
    "BOTTOM_LEGEND",
    "CHART_KEYS",
    "CLIPPED_KEY",
    "COLUMN_PX",
    "COLUMN_ROW_PX",
    "COLUMN_TOP_PX",
    "CONDITION_COLOURS",
    "DEP_AXIS_TITLE_PX",
    "DEP_TICKS_PX",
    "DEP_TITLE_LINE_PX",
    "DEP_TITLE_UNITS",
    "DIVERGING_SCALE",
    "FITTED",
    "FIXED",
    "LEGEND_MARGIN",
    "LOG",
    "LOG_FLOOR",
    "MAP_MAX_PX",
    "MARGIN",
    "MAX_ROW_LABELS",
    "MIN_LABEL_PX",
    "MODE_COLOURS",
    "MODE_DASHES",
    "MOSAIC_PX",
    "NORM_SCALE",
    "RANK_COLOUR",
    "ROBUST_PERCENTILE",
    "ROBUST_RATIO",
    "SEQUENTIAL_SCALE",
    "TITLES_META",
    "TITLE_UNITS",
    "WEIGHT_SCALES",
    "Words",
    "ablation_change_bars",
    "activation_map",
    "attention_column",
    "attention_diff_grid",
    "attention_grid_column",
    "attention_grid",
    "attention_map",
    "block_titles",
    "colour_limit",
    "composition_grid",
    "cosine_bars",
    "dependency_map",
    "dependency_pair",
    "drift_bars",
    "english",
    "escape_labels",
    "experiment_curves",
    "head_change_map",
    "head_contributions",
    "head_score_map",
    "head_share_flow",
    "head_share_tokens",
    "head_shares_map",
    "keep_top_k_plot",
    "loss_curve",
    "mode_sweep_plot",
    "norm_attention_column",
    "norm_attention_grid",
    "product_map",
    "query_key_map",
    "residual_pair",
    "rollout_grid",
    "score_bars",
    "induction_losses",
    "singular_value_lines",
    "tally_bars",
    "w_o_matrix",
    "w_o_spectrum_plot",
    "weight_range",
    "angle_map",
    "lens_map",
    "weight_pair",
]
