"""Does a two-layer attention-only model form an induction head on a pure copy task within a CPU's
budget, and is tfviz's encoder any different from a plain one? One run of this script answers both.

    python -m bench.induction_copy [--steps 2000] [--lr 1e-3] [--positions learned|rotary]

Two models of the same shape (2 layers, 4 heads, D 64, attention only, pre-norm, learned
positions, GPT-2's initialisation) train on the same batches with the same AdamW:
- tfviz's Encoder (tfviz.training.language.language_config, init_language_weights);
- a plain model written here in a few lines of PyTorch, sharing nothing with tfviz but the data.
Each window is 64 random letters in which a span of 4 to 32 letters, at a random place, is
followed by a copy of itself: only copying predicts the copy, and only an induction head (or a
shortcut by position) copies a span whose place and length change every time. Every 250 steps
both are scored on tfviz's probe (32 letters, then the same 32 again): the best head's induction
score (mean attention from a token of the repeat to the token after its first occurrence), the
best previous-token score, and the in-context loss drop (loss on the first copy minus the
repeat), each computed here from the attention patterns for the plain model and by
tfviz.analysis.induction.measure_induction for tfviz's. Prints a table; docs/language.md quotes it.
"""

from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from tfviz.analysis.induction import measure_induction  # noqa: E402
from tfviz.core.model import Encoder  # noqa: E402
from tfviz.training.language import (  # noqa: E402
    corpus_vocabulary,
    init_language_weights,
    language_config,
)

T, PERIOD, D, H, L = 64, 32, 64, 4, 2


class Plain(nn.Module):
    """Two pre-norm attention-only layers, as a textbook writes them; returns logits and the
    attention of every layer (B, L, H, T, T)."""

    def __init__(self, vocab: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, D)
        self.pos = nn.Parameter(torch.randn(T, D) * 0.02)
        self.norms = nn.ModuleList(nn.LayerNorm(D) for _ in range(L))
        self.qkv = nn.ModuleList(nn.Linear(D, 3 * D) for _ in range(L))
        self.out = nn.ModuleList(nn.Linear(D, D) for _ in range(L))
        self.final = nn.LayerNorm(D)
        self.head = nn.Linear(D, vocab, bias=False)
        for name, p in self.named_parameters():  # GPT-2's initialisation, as tfviz's
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02 / (math.sqrt(2 * L) if name.startswith("out.") else 1))

    def forward(self, ids):
        B, n = ids.shape
        h = self.tok(ids) + self.pos[:n]
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        patterns = []
        for norm, qkv, out in zip(self.norms, self.qkv, self.out, strict=True):
            q, k, v = qkv(norm(h)).view(B, n, 3, H, D // H).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(D // H)
            a = scores.masked_fill(~causal, float("-inf")).softmax(-1)
            patterns.append(a)
            h = h + out((a @ v).transpose(1, 2).reshape(B, n, D))
        return self.head(self.final(h)), torch.stack(patterns, 1)


def copy_batch(rng, letters: np.ndarray, b: int) -> torch.Tensor:
    x = letters[rng.integers(0, len(letters), size=(b, T))]
    for row in x:
        m = int(rng.integers(4, T // 2 + 1))
        start = int(rng.integers(0, T - 2 * m + 1))
        row[start + m : start + 2 * m] = row[start : start + m]
    return torch.from_numpy(x)


def plain_scores(model: Plain, probe: torch.Tensor) -> tuple[float, float, float]:
    logits, att = model(probe)
    a = att.mean(0)  # (L, H, T, T)
    t = torch.arange(PERIOD, T)
    induction = a[:, :, t, t - PERIOD + 1].mean(-1)
    t1 = torch.arange(1, T)
    previous = a[:, :, t1, t1 - 1].mean(-1)
    loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), probe[:, 1:], reduction="none").mean(0)
    drop = loss[: PERIOD - 1].mean() - loss[PERIOD:].mean()
    return float(induction.max()), float(previous.max()), float(drop)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--positions", choices=("learned", "rotary"), default="learned")
    args = p.parse_args()
    torch.set_num_threads(1)
    vocab = corpus_vocabulary()
    letters = np.array([vocab.alphabet.index(c) for c in vocab.alphabet if c.isalpha()])
    torch.manual_seed(0)
    plain = Plain(vocab.size)
    config = language_config(vocab, T, L, H, D, ffn=False, positions=args.positions)
    ours = init_language_weights(Encoder(config))
    optimisers = {
        name: torch.optim.AdamW(m.parameters(), lr=args.lr, betas=(0.9, 0.99), weight_decay=0.1)
        for name, m in (("plain", plain), ("tfviz", ours))
    }
    rng = np.random.default_rng(0)
    first = letters[np.random.default_rng(1).integers(0, len(letters), size=(32, PERIOD))]
    probe = torch.from_numpy(np.concatenate([first, first], 1))
    print(f"copy task, {args.steps} steps, lr {args.lr}, batch 32, tfviz: {args.positions}")
    print("step | plain: induction, previous, drop | tfviz: induction, previous, drop")
    start = time.perf_counter()
    for step in range(args.steps + 1):
        if step % 250 == 0 or step == args.steps:
            with torch.no_grad():
                plain.eval()
                ours.eval()
                a = plain_scores(plain, probe)
                s = measure_induction(ours, probe)
                b = (float(s.induction.max()), float(s.previous_token.max()), s.in_context_drop)
                plain.train()
                ours.train()
            row = [f"{a[0]:.3f}, {a[1]:.3f}, {a[2]:+.2f}", f"{b[0]:.3f}, {b[1]:.3f}, {b[2]:+.2f}"]
            print(f"{step} | {row[0]} | {row[1]}")
        if step == args.steps:
            break
        x = copy_batch(rng, letters, 32)
        for name, logits in (("plain", plain(x)[0]), ("tfviz", ours(x).logits)):
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab.size), x[:, 1:].reshape(-1))
            optimisers[name].zero_grad()
            loss.backward()
            optimisers[name].step()
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
