"""The logit lens (nostalgebraist 2020) and direct logit attribution (Elhage et al. 2021): what
the residual stream says when read out as tokens after every layer, and how much each head,
through its own block W_o^h of the output projection, adds to the logit of one token.

Both need a model that reads its stream out as tokens: a decoder (final norm, then the
unembedding) or a masked-LM encoder (the MLM head: dense, activation, LayerNorm, then the
decoder onto the vocabulary). A toy task's head answers its task, not a vocabulary, so neither is
defined there: LensRefused("no_vocabulary").

Logit lens: each layer's residual stream (and the embedding, row "embed") through the model's
own readout, keeping only the top k tokens a position: the vocabulary is read a chunk at a time
(tfviz.core.trace.head_top_next), so a 150k vocabulary never makes a (T, V) array. The last row
is the model's own answer.

Direct contributions: the final residual stream at one position is a sum of components (the
embedding, each head's z_h W_o^h, each layer's b_o, each MLP's output). Every norm between it
and the logit is linearised at the ACTUAL point: centred (LayerNorm), divided by the scale of
the whole stream as the pass computed it, times the norm's weight; its bias is a constant. A
masked-LM head's activation is linearised alike, as the ratio act(a) / a at its actual input a.
The logit is then exactly the sum of the components' contributions and the constants (biases).
In a post-norm encoder (BERT family) every layer re-normalises the whole stream, and an earlier
layer's output also feeds the later MLPs, so the clean split holds for the last layer only:
its heads, its b_o, its MLP and norm biases, and its input ("earlier layers") as one component.

Dimensions: L layers, H heads, T positions, D = d_model, V the vocabulary, k tokens kept.
Nothing changes the model (shared by every session): switches are forward arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import torch
from torch import Tensor, nn

from tfviz.core import wo
from tfviz.core.functional import layer_norm
from tfviz.core.interventions import Interventions
from tfviz.core.model import Trace, Transformer
from tfviz.core.tasks import InputError
from tfviz.core.trace import TOP_K, head_top_next
from tfviz.refusal import Refusal

EMBED = "embed"  # the lens's row for the embedding (layer -1)
EARLIER = "earlier layers"  # a post-norm model's last-layer input, as one component
# The constants a readout adds to a logit (its biases), as DirectContributions.ranked names them.
OUTPUT_BIAS, NORM_BIAS = "output bias", "norm bias"
HEAD_NORM_BIAS, HEAD_DENSE_BIAS = "head norm bias", "head dense bias"  # a masked LM's head
MLP = "MLP"  # "L3 MLP": layer 3's MLP output
TOP, NEXT = "top", "next"  # targets: the learned model's likeliest token; the text's next token
ALL_LAYERS, LAST_LAYER = "all_layers", "last_layer"  # how far the direct split reaches
DECODER, MASKED = "decoder", "masked"


class LensRefused(Refusal, ValueError):
    """The lens or a contribution refused: "no_vocabulary" (a model without a vocabulary
    head), "position" (outside the text), "target" (not a token of the vocabulary),
    "no_next_token" (the text has no next token there)."""

    PREFIX = "refusal.lens."


T_ = TypeVar("T_")


@dataclass(frozen=True)
class LearnedSwitched(Generic[T_]):
    """One analysis with the learned model and under the switches (the same when none is set)."""

    learned: T_
    switched: T_

    @classmethod
    def of(
        cls, learned: T_, interventions: Interventions | None, under: Callable[[Interventions], T_]
    ) -> LearnedSwitched[T_]:
        """learned, and under(the switches): the learned one again when none is set, so a page
        without switches costs one pass."""
        iv = Interventions.of(interventions)
        return cls(learned, learned if iv.is_default else under(iv))


@dataclass(frozen=True)
class Readout:
    """How a model reads its residual stream out as tokens: transform (..., D) -> (..., D) (the
    final norm; a masked-LM head's dense, activation and LayerNorm), then the unembedding
    weight (V, D) and bias (V,) or None. The model's own modules, never copies."""

    kind: str  # DECODER or MASKED
    transform: Callable[[Tensor], Tensor]
    weight: Tensor  # (V, D) (read as an nn.Linear's: head_top_next takes the readout itself)
    bias: Tensor | None  # (V,)
    decode: Callable[[int], str]  # a token id as text


def readout(model: Transformer, task) -> Readout:
    """The model's readout onto its vocabulary; LensRefused("no_vocabulary") for a model
    without one (a toy task, a sentence encoder without a masked-LM head)."""
    cfg = model.config
    tokenizer = getattr(task, "tokenizer", None)
    head = getattr(task, "head", None)
    if cfg.pool != "none" or cfg.embed != "token" or tokenizer is None:
        raise LensRefused("no_vocabulary")
    if cfg.causal and cfg.n_out == cfg.vocab_size:
        lin = model.head
        return Readout(
            DECODER, lambda x: layer_norm(x, model.norm_f), lin.weight, lin.bias,
            tokenizer.piece_text,
        )  # fmt: skip
    if head is not None and not cfg.n_out:

        def transform(x: Tensor) -> Tensor:
            # MaskedLMHead.forward up to its decoder, with the head's own modules
            return head.norm(head.act(head.dense(layer_norm(x, model.norm_f))))

        return Readout(MASKED, transform, head.decoder.weight, head.bias, tokenizer.piece_text)
    raise LensRefused("no_vocabulary")


@dataclass(frozen=True)
class LogitLens:
    """The logit lens of one pass. R = L + 1 rows: the embedding (row 0, EMBED, "layer -1"),
    then the stream after each layer ("L0" ..); the last row is the model's own answer."""

    rows: tuple[str, ...]  # (R,)
    labels: tuple[str, ...]  # (T,) every position's label
    positions: tuple[int, ...]  # (P,) the positions read
    ids: np.ndarray  # (R, P, k) int64 the k likeliest tokens, best first
    tokens: np.ndarray  # (R, P, k) str those tokens as text
    probs: np.ndarray  # (R, P, k) float32 their softmax probability over the whole vocabulary
    interventions: Interventions
    kind: str  # DECODER or MASKED


@dataclass(frozen=True)
class Pass:
    """One traced pass on one text: its ids (T,), the Trace, the labels, the switches."""

    ids: Tensor
    trace: Trace
    labels: tuple[str, ...]
    interventions: Interventions


@torch.no_grad()
def traced(model: Transformer, task, text: str, interventions: Interventions | None) -> Pass:
    """model on text under the switches, with its trace (the model's one forward)."""
    text = task.validate(text)
    iv = Interventions.of(interventions)
    ids, pad_mask = task.encode_batch([text], device=model.device)
    out = model(ids, pad_mask, iv, trace=True, head=False)
    return Pass(ids[0], out.trace, tuple(task.labels(text)), iv)


def positions_of(chosen: Sequence[int] | None, T: int) -> tuple[int, ...]:
    """Positions 0..T-1 (negative counting from the end); None: every one."""
    if chosen is None:
        return tuple(range(T))
    out = []
    for p in chosen:
        if not -T <= int(p) < T:
            raise LensRefused("position", position=int(p), n=T)
        out.append(int(p) % T)
    return tuple(out)


@torch.no_grad()
def logit_lens(
    model: Transformer,
    task,
    text: str,
    interventions: Interventions | None = None,
    k: int = TOP_K,
    positions: Sequence[int] | None = None,
) -> LogitLens:
    """The top k tokens the stream gives after every layer (and the embedding), at each of
    positions (None: all), under the switches. A layer at a time, the vocabulary a chunk at a
    time: only the (P, k) answers are kept.

    Cost: (L + 1) P V D multiply-adds; choose positions on a large model."""
    read = readout(model, task)
    run = traced(model, task, text, interventions)
    at = list(positions_of(positions, len(run.ids)))
    streams = [run.trace.embed[0]] + [lt.resid_out[0] for lt in run.trace.layers]
    ids, probs = [], []
    for stream in streams:
        top_ids, top_probs = head_top_next(read.transform(stream[at]), read, k)
        ids.append(top_ids.cpu().numpy())
        probs.append(top_probs.to(torch.float32).cpu().numpy())
    ids_ = np.stack(ids).astype(np.int64)
    tokens = np.vectorize(read.decode, otypes=[str])(ids_) if ids_.size else ids_.astype(str)
    return LogitLens(
        rows=(EMBED, *(f"L{i}" for i in range(len(run.trace.layers)))),
        labels=run.labels,
        positions=tuple(at),
        ids=ids_,
        tokens=tokens,
        probs=np.stack(probs),
        interventions=run.interventions,
        kind=read.kind,
    )


def compare_lens(
    model: Transformer,
    task,
    text: str,
    interventions: Interventions | None = None,
    k: int = TOP_K,
    positions: Sequence[int] | None = None,
) -> LearnedSwitched[LogitLens]:
    """logit_lens learned and under the switches (one pass when none is set)."""
    learned = logit_lens(model, task, text, None, k, positions)
    return LearnedSwitched.of(
        learned, interventions, lambda iv: logit_lens(model, task, text, iv, k, positions)
    )


@dataclass(frozen=True)
class DirectContributions:
    """Each component's direct contribution to the logit of `target` at `position`.

    ranked's values (components and constants) sum to the logit exactly (float64 on the
    pass's float32 tensors): sum(value for _, value in ranked) == logit within float32
    rounding. scope ALL_LAYERS (pre-norm): every layer's heads, b_o and MLP, and the embedding;
    LAST_LAYER (post-norm, BERT family): the last layer's only, earlier layers as one (EARLIER).
    """

    position: int
    target: int  # the token id whose logit is split
    target_token: str
    logit: float  # the target's logit as the model's own readout computed it
    heads: np.ndarray  # (L, H) float64 each head's z_h W_o^h; NaN where scope does not reach
    b_o: np.ndarray  # (L,) float64 each layer's b_o; NaN where scope does not reach
    mlp: np.ndarray  # (L,) float64 each MLP's output; NaN out of scope or with no MLP
    ranked: tuple[tuple[str, float], ...]  # "L3H5", "L3 MLP", "L3 b_o", "embed", "norm bias"
    # ... every component and constant, largest |value| first
    scope: str
    interventions: Interventions

    @property
    def total(self) -> float:
        """The sum of every component and constant: the logit, decomposed."""
        return float(sum(value for _, value in self.ranked))

    def named(self) -> dict[str, float]:
        return dict(self.ranked)


def frozen_back(norm: nn.Module, x: Tensor, u: Tensor) -> Tensor:
    """The direction u (D,) read through norm's map linearised at its actual input x (D,):
    the vector d with d . c == u . (norm's linear part at x)(c) for every c. LayerNorm's part
    is w * (c - mean c) / s, RMSNorm's w * c / s, s the scale of x itself (eps included)."""
    w = norm.weight.double() if norm.weight is not None else torch.ones_like(u)
    if isinstance(norm, nn.RMSNorm):
        eps = norm.eps if norm.eps is not None else torch.finfo(norm.weight.dtype).eps
        return w * u / torch.sqrt((x * x).mean() + eps)
    v = w * u / torch.sqrt(x.var(unbiased=False) + norm.eps)
    return v - v.mean()  # the centring is symmetric: it moves to the direction's side


def norm_bias(norm: nn.Module, u: Tensor) -> float:
    bias = getattr(norm, "bias", None)
    return 0.0 if bias is None else float(bias.double() @ u)


def has_norm(norm: nn.Module) -> bool:
    return isinstance(norm, (nn.LayerNorm, nn.RMSNorm))


def direction(
    model: Transformer, task, read: Readout, final: Tensor, target: int
) -> tuple[Tensor, list[tuple[str, float]]]:
    """The direction d (D,) in the final stream with d . component == its direct contribution
    to target's logit, every stage linearised at the actual point (final (D,) float64); and the
    constants the readout adds (its biases), named."""
    u = read.weight[target].double()
    consts = [] if read.bias is None else [(OUTPUT_BIAS, float(read.bias[target]))]
    r = final
    if has_norm(model.norm_f):
        r = normed(model.norm_f, final)
    if read.kind == MASKED:
        head = task.head
        a = head.dense.weight.double() @ r + head.dense.bias.double()
        y = head.act(a)
        consts.append((HEAD_NORM_BIAS, norm_bias(head.norm, u)))
        u = frozen_back(head.norm, y, u)
        # the activation as its actual ratio act(a) / a: exact at this a (act(0) is 0)
        u = u * torch.where(a != 0, y / torch.where(a != 0, a, 1.0), 0.0)
        consts.append((HEAD_DENSE_BIAS, float(head.dense.bias.double() @ u)))
        u = head.dense.weight.double().t() @ u
    if has_norm(model.norm_f):
        consts.append((NORM_BIAS, norm_bias(model.norm_f, u)))
        u = frozen_back(model.norm_f, final, u)
    return u, consts


def normed(norm: nn.Module, x: Tensor) -> Tensor:
    """norm(x) in float64, with the norm's own function and its weights in float64."""
    w = None if norm.weight is None else norm.weight.double()
    if isinstance(norm, nn.RMSNorm):
        return torch.nn.functional.rms_norm(x, norm.normalized_shape, w, norm.eps)
    b = None if norm.bias is None else norm.bias.double()
    return torch.nn.functional.layer_norm(x, norm.normalized_shape, w, b, norm.eps)


def head_terms(lt, t: int) -> Tensor:
    """(H, D) float64 each head's term z_h W_o^h at position t, with the map the layer applied."""
    return wo.head_contributions(lt.z[0, :, t : t + 1].double(), lt.W_o.double())[:, 0]


def pre_norm_split(model: Transformer, run: Pass, t: int, u: Tensor, out: dict) -> None:
    """Every component of a pre-norm stream: embedding, heads, b_o, MLP (resid_out - resid_mid,
    the trace keeps no MLP output), each read along u into out."""
    out["named"].append((EMBED, float(run.trace.embed[0, t].double() @ u)))
    for i, lt in enumerate(run.trace.layers):
        out["heads"][i] = (head_terms(lt, t) @ u).cpu().numpy()
        out["b_o"][i] = float(lt.b_o.double() @ u)
        if model.layers[i].has_ffn:  # an attention-only layer has no MLP
            mlp = lt.resid_out[0, t].double() - lt.resid_mid[0, t].double()
            out["mlp"][i] = float(mlp @ u)


def post_norm_split(model: Transformer, run: Pass, t: int, u: Tensor, out: dict) -> None:
    """The last layer's components of a post-norm stream: its input (EARLIER), heads and b_o
    through norm1, then its MLP (recomputed with the layer's own module) and both norms'
    biases through norm2, every norm linearised at its actual input."""
    i = len(run.trace.layers) - 1
    lt, layer = run.trace.layers[i], model.layers[i]
    at = f"L{i}"
    if layer.has_ffn:
        mid = lt.resid_mid[0, t]
        mlp = layer.ff(mid).double()
        into2 = mid.double() + mlp
        out["named"].append((f"{at} norm2 bias", norm_bias(layer.norm2, u)))
        u = frozen_back(layer.norm2, into2, u)
        out["mlp"][i] = float(mlp @ u)
    into1 = lt.resid_pre[0, t].double() + lt.attn_out[0, t].double()
    out["named"].append((f"{at} norm1 bias", norm_bias(layer.norm1, u)))
    u = frozen_back(layer.norm1, into1, u)
    out["named"].append((EARLIER, float(lt.resid_pre[0, t].double() @ u)))
    out["heads"][i] = (head_terms(lt, t) @ u).cpu().numpy()
    out["b_o"][i] = float(lt.b_o.double() @ u)


def ranked_of(out: dict) -> tuple[tuple[str, float], ...]:
    """Every named value, the heads, b_o and MLPs in reach, largest |value| first."""
    named = list(out["named"])
    for i, row in enumerate(out["heads"]):
        named += [(f"L{i}H{h}", float(v)) for h, v in enumerate(row) if not np.isnan(v)]
        if not np.isnan(out["b_o"][i]):
            named.append((f"L{i} b_o", float(out["b_o"][i])))
        if not np.isnan(out["mlp"][i]):
            named.append((f"L{i} {MLP}", float(out["mlp"][i])))
    return tuple(sorted(named, key=lambda nv: -abs(nv[1])))


def target_of(model, task, read: Readout, run: Pass, t: int, target: int | str | None) -> int:
    """The token whose logit is split: an id; NEXT, the text's own token after t (a decoder);
    TOP or None, the pass's likeliest at t."""
    V = read.weight.shape[0]
    if target is None or target == TOP:
        hidden = read.transform(run.trace.layers[-1].resid_out[0, t : t + 1])
        return int(head_top_next(hidden, read, 1)[0][0, 0])
    if target == NEXT:
        if read.kind != DECODER or t + 1 >= len(run.ids):
            raise LensRefused("no_next_token", position=t)
        return int(run.ids[t + 1])
    if isinstance(target, str) or not 0 <= int(target) < V:
        raise LensRefused("target", target=str(target), n=V)
    return int(target)


def default_position(task, text: str, read: Readout, position: int | None) -> int | None:
    """A masked LM's masked position when none is given (InputError unless text has exactly
    one mask); a decoder's last position (-1)."""
    if position is not None:
        return position
    if read.kind == DECODER:
        return -1
    masked = task.pieces(task.validate(text)).masked
    if len(masked) != 1:
        raise InputError("mask_count", mask=task.mask, n=text.count(task.mask))
    return masked[0]


@torch.no_grad()
def direct_contributions(
    model: Transformer,
    task,
    text: str,
    interventions: Interventions | None = None,
    position: int | None = None,
    target: int | str | None = None,
) -> DirectContributions:
    """Each head's (and MLP's, b_o's, the embedding's, the biases') direct contribution to the
    logit of target at position, under the switches.

    position: None, a decoder's last position or a masked LM's masked one. target: a token id,
    TOP (None: this pass's likeliest there) or NEXT (the text's own next token, a decoder)."""
    read = readout(model, task)
    position = default_position(task, text, read, position)
    run = traced(model, task, text, interventions)
    (t,) = positions_of([position], len(run.ids))
    v = target_of(model, task, read, run, t, target)
    final = run.trace.layers[-1].resid_out[0, t]
    u, consts = direction(model, task, read, final.double(), v)
    L, H = model.config.n_layers, model.config.n_heads
    nan = np.full((L,), np.nan)
    out = dict(named=consts, heads=np.full((L, H), np.nan), b_o=nan.copy(), mlp=nan.copy())
    pre_norm = model.config.norm == "pre"
    if pre_norm:
        pre_norm_split(model, run, t, u, out)
    else:
        post_norm_split(model, run, t, u, out)
    hidden = read.transform(final[None])[0]
    bias = 0.0 if read.bias is None else read.bias[v]
    return DirectContributions(
        position=t,
        target=v,
        target_token=read.decode(v),
        logit=float(hidden @ read.weight[v].to(hidden.dtype) + bias),
        heads=out["heads"],
        b_o=out["b_o"],
        mlp=out["mlp"],
        ranked=ranked_of(out),
        scope=ALL_LAYERS if pre_norm else LAST_LAYER,
        interventions=run.interventions,
    )


def compare_contributions(
    model: Transformer,
    task,
    text: str,
    interventions: Interventions | None = None,
    position: int | None = None,
    target: int | str | None = None,
) -> LearnedSwitched[DirectContributions]:
    """direct_contributions learned and under the switches, for one target: the learned
    model's (its likeliest token, by default), so the two split the same logit."""
    learned = direct_contributions(model, task, text, None, position, target)
    return LearnedSwitched.of(
        learned,
        interventions,
        lambda iv: direct_contributions(model, task, text, iv, learned.position, learned.target),
    )
