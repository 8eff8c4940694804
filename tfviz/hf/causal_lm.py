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

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions
from tfviz.core.model import Transformer
from tfviz.core.tasks import IGNORE, Batch
from tfviz.core.trace import TOP_K, top_next
from tfviz.hf.pretrained import TextTask
from tfviz.hf.tokenizer import PieceTokenizer

MAX_NEW_TOKENS = 20  # a continuation a class watches being written, short enough to wait for


@dataclass(frozen=True)
class NextTokens:
    """The k likeliest next tokens after one position, with their probabilities."""

    ids: tuple[int, ...]  # (k,) best first
    probs: tuple[float, ...]  # (k,) softmax over the whole vocabulary


def next_tokens(logits: Tensor, k: int = TOP_K) -> list[NextTokens]:
    """logits (T, V) of one sequence -> its top k next tokens at every position."""
    if logits.dim() != 2:
        raise ValueError("logits must be (tokens, vocabulary) for one sequence")
    ids, probs = top_next(logits, k)
    return [
        NextTokens(tuple(i.tolist()), tuple(p.tolist())) for i, p in zip(ids, probs, strict=True)
    ]


def _check(model: Transformer, ids: list[int]) -> None:
    if not model.config.causal or not model.config.n_out:
        raise ValueError("a continuation needs a causal model with a next-token head")
    if not ids:
        raise ValueError("a continuation starts from at least one token")


def continue_greedily(
    model: Transformer,
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
    model: Transformer,
    ids: list[int],
    max_new: int = MAX_NEW_TOKENS,
    interventions: Interventions | None = None,
    stop_ids: tuple[int, ...] = (),
) -> list[int]:
    """The whole greedy continuation of ids (see continue_greedily)."""
    return list(continue_greedily(model, ids, max_new, interventions, stop_ids))


NEXT_TOKEN_EXAMPLE = "The cat sat on the"
# A character model's first text: Hamlet's line (Hamlet is in its training split, punctuated
# "be,--that is"), whose repeated "to be" gives an induction head something to copy.
CHARACTER_EXAMPLE = "To be, or not to be, that is the question"
NEXT_TOKEN_DESCRIPTION = (
    "Reads a text left to right and gives, at every position, how likely each token of its "
    "vocabulary is to come next; continued greedily, it writes on."
)


class NextTokenTask(TextTask):
    """A decoder (GPT-2, Llama, Qwen2 folders) behind the interface the views read a pretrained
    model through: one text, its word-pieces as labels, no toy answer to check. What it
    produces is the next token at every position (tfviz.core.trace.TraceArrays.top_ids) and a
    continuation (continue_greedily); its prediction row is the likeliest next token at each
    position."""

    model_kind = "decoder"
    causal = True  # read left to right: one text, next tokens, no sentence B
    name = "next token"
    description = NEXT_TOKEN_DESCRIPTION
    # The analyses' metric (head importance, ablation): how many of a text's own next tokens
    # the model gives as its likeliest, the targets being the text itself (batch_from_texts).
    metric = "token_accuracy"
    bos = False  # every position has an answer: the token after it (the last one's is unknown)
    examples = (NEXT_TOKEN_EXAMPLE, NEXT_TOKEN_EXAMPLE)
    pairs: dict = {}

    def __init__(self, tokenizer: PieceTokenizer):
        super().__init__(tokenizer)
        if tokenizer.alphabet is not None:  # a character model (tfviz's own, on Shakespeare)
            self.examples = (CHARACTER_EXAMPLE, CHARACTER_EXAMPLE)

    def answer_from_logits(self, logits: Tensor, length: int) -> list[str]:
        """The likeliest next token after each position, as text."""
        return self.answer_from_ids(logits.argmax(-1))

    def answer_from_ids(self, ids: Tensor) -> list[str]:
        """The answer from the likeliest token ids (T,) themselves (tfviz.core.trace.run_trace
        reads a vocabulary's k best without making its logits)."""
        return [self.tokenizer.piece_text(int(i)) for i in ids]

    def batch_from_texts(self, texts: list[str]) -> Batch:
        """The texts as a left-padded batch whose targets are their own next tokens: position
        i's target is token i + 1; the last position and padding have none (IGNORE)."""
        ids, pad_mask = self.encode_batch(texts)
        target = torch.full_like(ids, IGNORE)
        target[:, :-1] = ids[:, 1:].masked_fill(pad_mask[:, 1:], IGNORE)
        target = target.masked_fill(pad_mask, IGNORE)
        lengths = (~pad_mask).sum(1)
        return Batch(ids, pad_mask, target, lengths)

    def output_classes(self, logits: Tensor) -> Tensor:
        return logits.argmax(-1)

    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        """Cross-entropy of the next tokens, over the positions that have one."""
        flat = logits.reshape(-1, logits.shape[-1])
        return F.cross_entropy(flat, target.reshape(-1), ignore_index=IGNORE)

    def score(self, logits: Tensor, target: Tensor) -> dict[str, float]:
        real = target != IGNORE
        ok = (self.output_classes(logits) == target) & real
        return {"correct": ok.sum().item(), "count": real.sum().item()}

    def check_config(self, config: ModelConfig) -> None:
        if not config.causal or config.n_out != config.vocab_size:
            raise ValueError("a next-token task needs a causal model with a vocabulary head")


def agreement(learned_top: np.ndarray, switched_top: np.ndarray) -> float:
    """The share of positions whose likeliest next token is the same learned and switched:
    1 when the switch changed no answer. top: (T, k) ids, best first (TraceArrays.top_ids)."""
    if learned_top.shape[0] == 0:
        return 1.0
    return float((learned_top[:, 0] == switched_top[:, 0]).mean())
