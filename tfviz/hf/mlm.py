"""The masked-LM head of a pretrained encoder, and fill-in-the-mask answers under the W_o switch.

BERT's "cls.predictions", RoBERTa's "lm_head" and DistilBERT's "vocab_*" tensors are one head:
dense (D -> D), activation, LayerNorm, then a decoder onto the vocabulary (usually the word
embedding itself, "tied") plus a bias per word-piece. It reads the encoder's last hidden state at
the masked position, so every switch of the encoder's forward pass (W_o off, heads ablated)
reaches the answer: a class sees the top words change when W_o is switched off.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tfviz.core.interventions import Interventions
from tfviz.core.model import Transformer, activation_function
from tfviz.core.tasks import InputError

TOP_K = 5


class MaskedLMHead(nn.Module):
    """logits = decoder(LayerNorm(act(dense(h)))) + bias, per position: (..., D) -> (..., V)."""

    def __init__(self, d_model: int, vocab_size: int, activation: str, norm_eps: float):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model, eps=norm_eps)
        self.decoder = nn.Linear(d_model, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        self.activation = activation
        self.act = activation_function(activation)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.decoder(self.norm(self.act(self.dense(hidden)))) + self.bias

    @staticmethod
    def shapes(d_model: int, vocab_size: int) -> dict[str, tuple[int, ...]]:
        """Each parameter's shape, from the sizes alone (checked before anything is built)."""
        D, V = d_model, vocab_size
        return {
            "dense.weight": (D, D),
            "dense.bias": (D,),
            "norm.weight": (D,),
            "norm.bias": (D,),
            "decoder.weight": (V, D),
            "bias": (V,),
        }


def token_states(
    model: Transformer,
    ids: Tensor,
    pad_mask: Tensor | None = None,
    interventions: Interventions | None = None,
) -> Tensor:
    """(B, T, D) the encoder's final hidden state at every position, under the switches.

    A model built per token (pool "none", no head) returns them as its logits; a pooled one
    (a sentence model) is read from its trace: the last layer's output through the final norm.
    """
    with torch.no_grad():
        if model.config.pool == "none" and not model.config.n_out:
            return model(ids, pad_mask, interventions, trace=False).logits
        trace = model(ids, pad_mask, interventions, trace=True).trace
        return model.norm_f(trace.layers[-1].resid_out)


def masked_lm_logits(
    model: Transformer,
    head: MaskedLMHead,
    ids: Tensor,
    pad_mask: Tensor | None = None,
    interventions: Interventions | None = None,
) -> Tensor:
    """(B, T, V) the head's logits at every position, under the switches."""
    with torch.no_grad():
        return head(token_states(model, ids, pad_mask, interventions))


@dataclass(frozen=True)
class Guess:
    """One word-piece the head proposes for the masked position."""

    piece_id: int
    piece: str  # as the vocabulary spells it ("##s", "Ġcat")
    word: str  # as text: "cat", "##s" (alone, as BERT decodes it), byte-level "▁cat" (shown_piece)
    probability: float  # softmax over the whole vocabulary


@dataclass(frozen=True)
class MaskAnswer:
    """The top guesses for one masked position, with the learned W_o and under the switches."""

    pieces: tuple[str, ...]  # the input as the model read it, the mask included
    position: int  # index of the masked position in pieces
    learned: tuple[Guess, ...]  # top k, nothing switched
    switched: tuple[Guess, ...]  # top k under the switches (== learned when none is set)

    @property
    def changed(self) -> bool:
        """True when the switches change the top guess."""
        return self.learned[0].piece_id != self.switched[0].piece_id


def top_guesses(tokenizer, logits: Tensor, k: int) -> tuple[Guess, ...]:
    """The k likeliest pieces of one masked position's logits (V,), likeliest first, each read
    as the masked-word view shows it (tokenizer.piece_text)."""
    probs = F.softmax(logits.float(), dim=-1)  # (V,)
    values, indices = probs.topk(k)
    guesses = []
    for p, i in zip(values.tolist(), indices.tolist(), strict=True):
        guesses.append(Guess(i, tokenizer.piece(i), tokenizer.piece_text(i), p))
    return tuple(guesses)


def fill_mask(
    model: Transformer,
    head: MaskedLMHead,
    tokenizer,
    text: str,
    interventions: Interventions | None = None,
    mask: str | None = None,
    k: int = TOP_K,
) -> MaskAnswer:
    """The top k word-pieces for the one masked position of text, learned and switched.

    mask: the marker typed for the masked word; default the model's own ("[MASK]", "<mask>").
    InputError (a ValueError) when text has no marker, more than one, or the marker is past the
    model's limit.
    """
    marker = mask or tokenizer.specials.mask
    count = text.count(marker) if isinstance(text, str) else 0
    if count != 1:
        raise InputError("mask_count", mask=marker, n=count)
    p = tokenizer.encode(text, mask=marker)
    if not p.masked:
        raise InputError("mask_past_limit", mask=marker, n=tokenizer.max_pieces - 2)
    position = p.masked[0]
    ids = torch.tensor([p.ids], device=model.device)
    iv = Interventions.of(interventions)

    def at_mask(switches: Interventions | None) -> Tensor:  # (V,)
        # The head reads the masked position only: over every position it cost more than the
        # encoder itself (T x V outputs; bench/hf_families.py).
        with torch.no_grad():
            return head(token_states(model, ids, None, switches)[0, position])

    learned = at_mask(None)
    switched = learned if iv.is_default else at_mask(iv)
    return MaskAnswer(
        pieces=p.pieces,
        position=position,
        learned=top_guesses(tokenizer, learned, k),
        switched=top_guesses(tokenizer, switched, k),
    )
