"""The prose the views show to explain each method: its paper, what it computes, its caveats.

UI text lives here, not in the library, so it can go through a language catalogue; the views
read it only through HELP. Each entry stands alone: a view shows whole entries, never a sentence
cut out of a longer one, so a translation needs no sentence splitting.
"""

from __future__ import annotations

HELP: dict[str, str] = {
    "norm_attention": (
        "Norm-based attention (Kobayashi et al., 'Attention is Not Only a Weight: Analyzing "
        "Transformers with Vector Norms', EMNLP 2020). A head's output at token i is a weighted "
        "sum of transformed vectors alpha_ij f(x_j), with f(x) = (x W_V + b_V) W_O: what it "
        "writes is a vector, not a weight. Its length ||alpha_ij f(x_j)|| shows how much token j "
        "really contributes to token i through this head. A large weight on a token whose "
        "transformed vector is short contributes little; a small weight on a long one can matter "
        "more. W_o is part of f, so switching it off changes these norms but not the raw weights."
    ),
    "norm_attention_summed": (
        "Norm-based attention of the whole layer (Kobayashi et al., EMNLP 2020): ||sum_h "
        "alpha_ij^h f^h(x_j)||, the length of everything token j sends to token i through all "
        "heads together after W_o. Heads can reinforce or cancel each other, so this is not the "
        "sum of the per-head norms."
    ),
    "attention_rollout": (
        "Attention rollout (Abnar & Zuidema, 'Quantifying Attention Flow in Transformers', ACL "
        "2020). Each layer's attention, averaged over heads, is mixed half-and-half with the "
        "identity for the residual connection (A_hat = 0.5 A + 0.5 I, rows renormalised), and "
        "these matrices are multiplied through the layers: row i of layer l says how much of "
        "token i's representation there traces back to each input token. Computed from raw "
        "weights, or from the norm-based weights (Kobayashi et al. 2020), which also count what "
        "the values and W_o do. It ignores the feed-forward nets and LayerNorm, so it is an "
        "approximation of the information flow, not a measurement of it."
    ),
    "head_importance": (
        "Head importance (Michel, Levy & Neubig, 'Are Sixteen Heads Really Better than One?', "
        "NeurIPS 2019). Two measures on fresh examples: the change in loss and in accuracy when "
        "one head is removed (its output zeroed before W_o), and Michel et al.'s gradient score "
        "|dL/d xi_h| averaged over examples, where xi_h is a gate multiplying head h's output (1 "
        "= untouched). The gradient is a first-order estimate of what removing the head would do, "
        "at the cost of one backward pass. Michel et al. found many heads can be removed with "
        "little loss; 'keep the k most important heads' shows how many this model needs."
    ),
    "accuracy_keeping_top_k": (
        "Keep only the k most important heads (by the chosen score) and remove every other one "
        "before W_o, as in the pruning experiments of Michel et al. (NeurIPS 2019); the number is "
        "the task metric left on fresh examples."
    ),
    "compare_ablation": (
        "Removing a head before W_o versus after it. Zeroing head h's slice of the concatenation "
        "(before W_o) removes exactly that head's term z_h W_o^h. Zeroing the same dimensions of "
        "W_o's output instead is a common mistake: because W_o mixes every head into every output "
        "dimension, it removes those d_k coordinates from every head's term (and the bias) while "
        "leaving head h's output in the other D - d_k dimensions. The two agree only when W_o is "
        "switched off (identity) or block-diagonal."
    ),
    # Shown alone above the ablation numbers, so it says in full what the mistake is.
    "compare_ablation_mistake": (
        "Zeroing head h's d_k dimensions of W_o's output, instead of its slice of the "
        "concatenation before W_o, is a common mistake: because W_o mixes every head into every "
        "output dimension, it removes those d_k coordinates from every head's term (and the bias) "
        "while leaving head h's output in the other D - d_k dimensions."
    ),
    "ov_circuits": (
        "The OV circuit of a head, W_OV^h = W_V^h W_O^h (Elhage et al., 'A Mathematical Framework "
        "for Transformer Circuits', Anthropic 2021): the D x D map from what a token holds to "
        "what the head writes when it attends to that token. Its rank is at most d_k. Singular "
        "values show how many directions it really uses; the effective rank is exp of the entropy "
        "of the normalised singular values (Roy & Vetterli, EUSIPCO 2007): 1 when one direction "
        "dominates, d_k when all are equal. Also shown: the number of singular values above 1% of "
        "the largest. Biases are left out (they add a constant, not a map)."
    ),
    "composition_scores": (
        "Composition scores (Elhage et al. 2021): how much of head h's output (its OV circuit) "
        "lands in the subspace head g of the next layer reads through its query, key or value "
        "projection: ||W_OV^h W_X^g||_F / (||W_OV^h||_F ||W_X^g||_F), between 0 and 1. Unrelated "
        "random matrices score about 1/sqrt(D), shown as the baseline. Caveat: between the two "
        "heads lie LayerNorm (and, in post-norm layers, the feed-forward net); the scores fold in "
        "LayerNorm's centring and per-dimension scale but not its per-token division or the "
        "feed-forward net, so they are a guide to the weights, not a measurement on data."
    ),
    "w_o_mixing": (
        "How W_o mixes heads: for each output dimension d of W_o, the share of its weight that "
        "reads each head, ||W_o[d, head block]||^2 / ||W_o[d, :]||^2. The mixing number is the "
        "mean entropy of these shares divided by log H: 0 when each output dimension reads a "
        "single head (W_o identity or block-diagonal: heads stay separate), 1 when every "
        "dimension reads all heads equally. It measures the weights' layout only: a large weight "
        "on a head whose output is small still counts fully."
    ),
}
