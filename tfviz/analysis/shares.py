"""Each head's share of the attention output: how much of attn_out each head's term makes.

attn_out = sum_h t_h + b_o, with t_h = z_h W_O^h the head's term (tfviz.core.wo). Per layer, head
and token this module gives ||t_h|| and two shares of it:

- norm share ||t_h|| / sum_h' ||t_h'||: how loud each head is, in 0..1, summing to 1 over the
  heads. What a flow picture draws as a band's width. It ignores direction: two heads that
  cancel each other each still get a large share.
- projection share <t_h, a> / ||a||^2 with a = sum_h t_h = attn_out - b_o: the part of attn_out
  along itself that head h makes. It sums to exactly 1 over the heads (the terms add up to a),
  and is negative for a head that works against the others, above 1 for one that more than
  makes the whole. The exact, signed decomposition; 0 where a = 0 (W_o zero, every head off).

Learned against switched: under a W_o mode the terms are made with the map that mode applies;
identity W_o makes t_h head h's own block of concat (z_h in its d_k dimensions, 0 elsewhere), so
its norm is ||z_h|| and the blocks, orthogonal, share ||a||^2 as ||z_h||^2 / ||concat||^2.

Heads are concat's slots: under a head_order switch slot i holds head order[i] (the trace keeps
z in that order). Dimensions: L layers, H heads, T tokens, D = d_model, d_k = D / H.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tfviz.core import wo
from tfviz.core.interventions import Interventions
from tfviz.core.model import Transformer
from tfviz.core.tasks import Task
from tfviz.core.trace import TraceArrays, run_trace

TINY = 1e-12  # a length below this is no output at all (W_o zero, every head gated off)


@dataclass(frozen=True)
class HeadOutputShares:
    """Each head's term of attn_out, per layer and token, and its two shares (module doc)."""

    w_o_modes: list[str]  # per layer: the W_o mode the terms were made with
    norms: np.ndarray  # (L, H, T) float64: ||z_h W_O^h||, head h's term's length
    norm_share: np.ndarray  # (L, H, T) float64: norms / sum over heads; sums to 1 (0 where
    # every term is 0)
    projection_share: np.ndarray  # (L, H, T) float64: <t_h, a> / ||a||^2, a = attn_out - b_o;
    # sums to 1 over heads (0 where a = 0)
    total: np.ndarray  # (L, T) float64: ||attn_out - b_o||, the length of the heads' sum
    bias: np.ndarray  # (L,) float64: ||b_o||, what no head makes


@dataclass(frozen=True)
class SharesPair:
    """The same sequence's head shares in the learned model and under switches."""

    learned: HeadOutputShares
    switched: HeadOutputShares


def shares_from(
    z: np.ndarray, W_o: np.ndarray, b_o: np.ndarray, w_o_modes: list[str]
) -> HeadOutputShares:
    """HeadOutputShares from each layer's heads and the map it applied.

    Args:
        z: (L, H, T, d_k) each head's output (concat's slots).
        W_o: (L, D, D) the map each layer applied to concat, nn.Linear layout (out, in).
        b_o: (L, D) the bias it added.
        w_o_modes: per layer, the mode's name (kept with the numbers).
    """
    L = z.shape[0]
    norms, norm_share, projection, total = [], [], [], []
    for layer in range(L):  # one layer's (H, T, D) terms at a time: a large model's all don't fit
        terms = wo.head_contributions(
            np.asarray(z[layer], np.float64), np.asarray(W_o[layer], np.float64)
        )  # (H, T, D)
        a = terms.sum(axis=0)  # (T, D): attn_out - b_o
        length = np.linalg.norm(terms, axis=-1)  # (H, T)
        norms.append(length)
        norm_share.append(_share(length, length.sum(axis=0)))
        projection.append(_share(np.einsum("htd,td->ht", terms, a), (a * a).sum(-1)))
        total.append(np.linalg.norm(a, axis=-1))
    return HeadOutputShares(
        w_o_modes=list(w_o_modes),
        norms=np.stack(norms),
        norm_share=np.stack(norm_share),
        projection_share=np.stack(projection),
        total=np.stack(total),
        bias=np.linalg.norm(np.asarray(b_o, np.float64), axis=-1),
    )


def _share(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """part (H, T) / whole (T,), 0 where the whole is (about) nothing."""
    return np.divide(part, whole, out=np.zeros_like(part), where=np.abs(whole) > TINY)


@torch.no_grad()
def applied_w_o(model: Transformer, interventions: Interventions) -> np.ndarray:
    """(L, D, D) float32: the map each layer applies to concat under the switches, as the
    forward pass resolves it (the mode, W_o's columns permuted with the heads, the slices zeroed
    after W_o), nn.Linear layout (out, in)."""
    layers = model.layers
    plan = interventions.resolve(
        model.config, model.device, [(lay.attn.W_o.weight, lay.attn.W_o.bias) for lay in layers]
    )
    maps = []
    for lay, sw in zip(layers, plan.layers, strict=True):
        W, _ = lay.attn.applied(sw)
        if sw.out_gate is not None:  # zeroing W_o's output slices zeroes those rows of the map
            W = W * sw.out_gate[:, None]
        maps.append(W.detach().to("cpu", torch.float32))
    return torch.stack(maps).numpy()


def output_shares_of_trace(model: Transformer, trace: TraceArrays) -> HeadOutputShares:
    """HeadOutputShares of a trace of this model (run_trace), with the map its switches applied."""
    return shares_from(trace.z, applied_w_o(model, trace.interventions), trace.b_o, trace.w_o_modes)


def output_shares(
    model: Transformer, task: Task, text: str, interventions: Interventions | None = None
) -> HeadOutputShares:
    """HeadOutputShares of one sequence under the switches (one traced forward pass)."""
    return output_shares_of_trace(model, run_trace(model, task, text, interventions))


def learned_and_switched(
    model: Transformer, task: Task, text: str, switched: Interventions
) -> SharesPair:
    """The head shares of one sequence in the learned model and under `switched` (a W_o mode,
    heads zeroed, ...): two traced passes. A switch in a layer also changes the layers after it,
    through their inputs."""
    return SharesPair(
        learned=output_shares(model, task, text),
        switched=output_shares(model, task, text, switched),
    )
