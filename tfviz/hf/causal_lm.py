"""What a decoder says next: the top next tokens at every position, and a greedy continuation,
under any W_o switch (tfviz.core.interventions), so a page can set the learned model's answer
beside the switched one's.

The continuation runs the whole sequence again for each new token (no key/value cache): at most
MAX_NEW_TOKENS tokens on a model a class opens, it is a few forward passes, and each is the one
forward every view traces, so what is continued is exactly what is shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from tfviz.core.interventions import Interventions
from tfviz.core.model import Encoder

MAX_NEW_TOKENS = 20  # a continuation a class watches; the bound
TOP_K = 5


@dataclass(frozen=True)
class NextTokens:
    """The k likeliest next tokens after one position, with their probabilities."""

    ids: tuple[int, ...]  # (k,) best first
    probs: tuple[float, ...]  # (k,) softmax over the whole vocabulary


def next_tokens(logits: Tensor, k: int = TOP_K) -> list[NextTokens]:
    """logits (T, V) of one sequence -> its top k next tokens at every position."""
    if logits.dim() != 2:
        raise ValueError("logits must be (tokens, vocabulary) for one sequence")
    probs = torch.softmax(logits.double(), dim=-1)
    top = probs.topk(min(k, probs.shape[-1]), dim=-1)
    return [
        NextTokens(tuple(i.tolist()), tuple(p.tolist()))
        for i, p in zip(top.indices, top.values, strict=True)
    ]


def _check(model: Encoder, ids: list[int]) -> None:
    if not model.config.causal or not model.config.n_out:
        raise ValueError("a continuation needs a causal model with a next-token head")
    if not ids:
        raise ValueError("a continuation starts from at least one token")


def continue_greedily(
    model: Encoder,
    ids: list[int],
    max_new: int = MAX_NEW_TOKENS,
    interventions: Interventions | None = None,
    stop_ids: tuple[int, ...] = (),
) -> Iterator[int]:
    """Each next token, one at a time (a page may stop between them): the likeliest after the
    sequence so far, under the switches; ends after max_new tokens, at a stop token (yielded),
    or when the model's positions are used up."""
    _check(model, ids)
    seq = list(ids)
    room = model.config.max_len - len(seq)
    with torch.no_grad():
        for _ in range(max(0, min(max_new, MAX_NEW_TOKENS, room))):
            x = torch.tensor([seq], device=model.device)
            logits = model(x, interventions=interventions, trace=False).logits[0, -1]
            token = int(logits.argmax())
            seq.append(token)
            yield token
            if token in stop_ids:
                return


def greedy_continuation(
    model: Encoder,
    ids: list[int],
    max_new: int = MAX_NEW_TOKENS,
    interventions: Interventions | None = None,
    stop_ids: tuple[int, ...] = (),
) -> list[int]:
    """The whole greedy continuation of ids (see continue_greedily)."""
    return list(continue_greedily(model, ids, max_new, interventions, stop_ids))
