"""Numbers that look past raw attention: what each head writes, and what W_o does with it.

Raw attention weights say where a head looks, not what it writes into the residual stream: that
also depends on the values it reads and on the output projection W_o. Each function here computes
one published way of measuring that, from a model and/or a Trace, and returns float32 numpy arrays
(or small frozen dataclasses of them) for tfviz.plots to draw:

1. norm-based attention ||alpha_ij^h f^h(x_j)||           Kobayashi et al., EMNLP 2020
2. attention rollout (raw and norm-based)                   Abnar & Zuidema, ACL 2020
3. head importance by ablation and by gate gradients        Michel et al., NeurIPS 2019
4. ablating a head before W_o versus after it               (the teaching point of this tool)
5. OV circuits W_V^h W_O^h, effective rank, composition     Elhage et al. 2021; Roy & Vetterli 2007
6. how W_o mixes heads into each output dimension
7. previous-token and induction heads, the in-context loss drop   Olsson et al. 2022

Nothing here changes the model: it is shared by every browser session, so interventions go
through Transformer.forward's arguments (w_o, ablate_heads, head_gates, ablate_after_w_o), never
hooks or weight edits, and weights keep requires_grad=False. Model weights follow nn.Linear's
layout (out, in), applied as x @ W.T; per-head matrices below use the papers' row-vector
convention instead: W_V^h is (D, d_k), W_O^h is (d_k, D), and a head's output is z_h @ W_O^h.

Dimensions: L layers, B batch, H heads, T tokens, D = d_model, d_k = D / H.

Modules, one per section: norms (1), rollout (2), importance (3), ablation (4), circuits (5),
mixing (6), induction (7), all on base (checks, fresh examples, the metric, row
normalising). Every public name is re-exported here: callers write
`from tfviz import analysis; analysis.head_importance`.
"""

from tfviz.analysis.ablation import AblationComparison, compare_ablation
from tfviz.analysis.base import ANALYSIS_SEED, heads_of, normalise_rows
from tfviz.analysis.circuits import (
    Composition,
    OVCircuits,
    OVSpectra,
    composition_score,
    composition_scores,
    effective_rank,
    head_block,
    layernorm_fold,
    numerical_rank,
    ov_circuits,
    ov_matrix,
    ov_spectra,
    singular_values,
)
from tfviz.analysis.importance import (
    HeadImportance,
    accuracy_keeping_top_k,
    gate_gradients,
    head_importance,
    keep_top_k_curve,
    ranked_keys,
    top_k_heads,
)
from tfviz.analysis.induction import (
    InductionScores,
    duplicate_token_score,
    induction_score,
    measure_induction,
    previous_token_score,
    repeated_random_tokens,
)
from tfviz.analysis.mixing import WoMixing, head_shares, mixing_index, w_o_mixing
from tfviz.analysis.norms import norm_attention, norm_attention_summed, transformed_values
from tfviz.analysis.rollout import attention_flow, attention_rollout, rollout_from_trace

__all__ = [
    "ANALYSIS_SEED",
    "AblationComparison",
    "Composition",
    "HeadImportance",
    "InductionScores",
    "OVCircuits",
    "OVSpectra",
    "WoMixing",
    "accuracy_keeping_top_k",
    "attention_flow",
    "attention_rollout",
    "compare_ablation",
    "duplicate_token_score",
    "induction_score",
    "measure_induction",
    "previous_token_score",
    "repeated_random_tokens",
    "composition_score",
    "composition_scores",
    "effective_rank",
    "gate_gradients",
    "head_block",
    "head_importance",
    "head_shares",
    "heads_of",
    "keep_top_k_curve",
    "layernorm_fold",
    "mixing_index",
    "norm_attention",
    "norm_attention_summed",
    "normalise_rows",
    "numerical_rank",
    "ov_circuits",
    "ov_matrix",
    "ov_spectra",
    "ranked_keys",
    "rollout_from_trace",
    "singular_values",
    "top_k_heads",
    "transformed_values",
    "w_o_mixing",
]
