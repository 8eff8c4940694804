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
8. the neuron view: q, k, q * k and the softmax for one query     Vig 2019 (BertViz)
9. each head's share of attn_out (norm share, signed projection)
10. the OV sandbox: W_o's freedom (a change of basis inside a head), where heads write
    (principal angles), how far one linear map undoes W_o off
11. the logit lens and each head's direct contribution to a logit   nostalgebraist 2020; Elhage
    et al. 2021

Nothing here changes the model: it is shared by every browser session, so interventions go
through Transformer.forward's arguments (w_o, ablate_heads, head_gates, ablate_after_w_o), never
hooks or weight edits, and weights keep requires_grad=False. Model weights follow nn.Linear's
layout (out, in), applied as x @ W.T; per-head matrices below use the papers' row-vector
convention instead: W_V^h is (D, d_k), W_O^h is (d_k, D), and a head's output is z_h @ W_O^h.

Dimensions: L layers, B batch, H heads, T tokens, D = d_model, d_k = D / H.

Modules, one per section: norms (1), rollout (2), importance (3), ablation (4), circuits (5),
mixing (6), induction (7), neuron (8), shares (9), ov (10, on circuits' OV matrices and
composition), lens (11), all on base (checks, fresh examples, the metric, row
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
from tfviz.analysis.lens import (
    DirectContributions,
    LearnedSwitched,
    LensRefused,
    LogitLens,
    Readout,
    compare_contributions,
    compare_lens,
    direct_contributions,
    logit_lens,
    readout,
)
from tfviz.analysis.mixing import WoMixing, head_shares, mixing_index, w_o_mixing
from tfviz.analysis.neuron import (
    NeuronView,
    neuron_view,
    neuron_view_of_pass,
    neuron_view_of_trace,
    queries_and_keys,
    softmax_masked,
)
from tfviz.analysis.norms import norm_attention, norm_attention_summed, transformed_values
from tfviz.analysis.ov import (
    BASIS_KINDS,
    BasisChange,
    HeadOV,
    LinearUndo,
    WriteSpaces,
    basis_matrix,
    change_basis,
    head_ov,
    heads_reading,
    linear_fit,
    output_block,
    output_difference,
    principal_angles,
    undo_by_linear_map,
    value_block,
    value_head_of,
    write_spaces,
)
from tfviz.analysis.rollout import attention_flow, attention_rollout, rollout_from_trace
from tfviz.analysis.shares import (
    HeadOutputShares,
    SharesPair,
    applied_w_o,
    learned_and_switched,
    output_shares,
    output_shares_of_trace,
    shares_from,
)

__all__ = [
    "ANALYSIS_SEED",
    "AblationComparison",
    "BASIS_KINDS",
    "BasisChange",
    "Composition",
    "DirectContributions",
    "HeadImportance",
    "HeadOV",
    "HeadOutputShares",
    "InductionScores",
    "LearnedSwitched",
    "LensRefused",
    "LinearUndo",
    "LogitLens",
    "NeuronView",
    "OVCircuits",
    "OVSpectra",
    "Readout",
    "SharesPair",
    "WoMixing",
    "WriteSpaces",
    "accuracy_keeping_top_k",
    "applied_w_o",
    "attention_flow",
    "attention_rollout",
    "basis_matrix",
    "change_basis",
    "compare_ablation",
    "compare_contributions",
    "compare_lens",
    "composition_score",
    "composition_scores",
    "direct_contributions",
    "duplicate_token_score",
    "effective_rank",
    "gate_gradients",
    "head_block",
    "head_importance",
    "head_ov",
    "head_shares",
    "heads_of",
    "heads_reading",
    "induction_score",
    "keep_top_k_curve",
    "layernorm_fold",
    "learned_and_switched",
    "linear_fit",
    "logit_lens",
    "measure_induction",
    "mixing_index",
    "neuron_view",
    "neuron_view_of_pass",
    "neuron_view_of_trace",
    "norm_attention",
    "norm_attention_summed",
    "normalise_rows",
    "numerical_rank",
    "output_block",
    "output_difference",
    "output_shares",
    "output_shares_of_trace",
    "ov_circuits",
    "ov_matrix",
    "ov_spectra",
    "previous_token_score",
    "principal_angles",
    "queries_and_keys",
    "ranked_keys",
    "readout",
    "repeated_random_tokens",
    "rollout_from_trace",
    "shares_from",
    "singular_values",
    "softmax_masked",
    "top_k_heads",
    "transformed_values",
    "undo_by_linear_map",
    "value_block",
    "value_head_of",
    "w_o_mixing",
    "write_spaces",
]
