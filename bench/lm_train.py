"""tfviz's language-model training against a plain nanoGPT-style loop, side by side in one run.

The plain side is written the way nanoGPT's model.py and train.py write it, in plain PyTorch with
its own small modules (tfviz's model is not imported): token and position embeddings (an
nn.Embedding each), pre-norm blocks (LayerNorm, causal self-attention with one fused qkv Linear and
F.scaled_dot_product_attention(is_causal=True), the output projection; then LayerNorm and an MLP
D -> 4D -> D with exact GELU, unless the recipe has no FFN), a final LayerNorm and a linear head,
biases on every Linear, no dropout, no weight tying (tfviz ties none either). nanoGPT's
initialisation (N(0, 0.02), the two maps into the residual stream N(0, 0.02 / sqrt(2 L)), biases
0: the same as tfviz.training.language.init_language_weights) and its optimiser (AdamW, decay on
the parameters with dim >= 2 only, betas (0.9, 0.99), fused, linear warm-up over the first 5% of
steps then cosine to a tenth of lr, gradients clipped at 1). Both sides draw the same windows
step by step: tfviz's LanguageTask(train_ids, context).sample(batch, rng), rng =
np.random.default_rng(seed).

tfviz's side: tfviz.training.language.train_language_model on the same recipe (LANGUAGE_RECIPES),
on the CPU.

Each round trains both from scratch for --steps steps (model built, initialised, trained), in
alternating order (plain first on even rounds, tfviz first on odd ones) so machine noise falls on
both sides; the median round is reported. Then each side's last model is scored on the whole
validation split (nats per character over consecutive windows of context + 1, as
tfviz.training.language.validation_loss measures it).

Targets: ratio (tfviz / plain seconds per run) <= 1.00; |validation loss difference| <= 0.02.
The two sides start from different random draws of the same initialisation (parameter order and
the fused qkv differ), so at few steps the loss difference is partly seed noise; --same-init
starts the plain model from tfviz's very initial weights, which leaves only float rounding.

Usage: python -m bench.lm_train [--recipe shakespeare-char] [--steps N] [--rounds 3]
       [--threads 1] [--context N] [--same-init] [--max-windows N]
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tfviz.core.model import Encoder
from tfviz.training.language import (
    LANGUAGE_RECIPES,
    CharVocabulary,
    LanguageTask,
    bundled_corpus,
    init_language_weights,
    language_config,
    train_language_model,
)


# ---- the plain model: nanoGPT's model.py, written plainly --------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)  # q, k, v for all heads in one map
        self.c_proj = nn.Linear(n_embd, n_embd)  # the output projection (W_o)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()  # exact (erf)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, ffn: bool):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ffn = ffn
        if ffn:
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        if self.ffn:
            x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(
        self, vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int, ffn: bool
    ):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList(Block(n_embd, n_head, ffn) for _ in range(n_layer)),
                ln_f=nn.LayerNorm(n_embd),
            )
        )
        self.lm_head = nn.Linear(n_embd, vocab_size)
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if pn.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1
            )  # (reshape: a window's targets are a strided slice here, nanoGPT's a fresh stack)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=True)


def get_lr(it: int, max_iters: int, learning_rate: float) -> float:
    """nanoGPT's get_lr: linear warm-up over the first 5% of iterations, then cosine decay to
    min_lr = learning_rate / 10 at the last iteration."""
    warmup_iters, min_lr = max(1, max_iters // 20), learning_rate / 10
    if it < warmup_iters:
        return learning_rate * (it + 1) / warmup_iters
    decay_ratio = (it - warmup_iters) / max(1, max_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def plain_model(vocab_size: int, recipe: dict) -> GPT:
    return GPT(
        vocab_size,
        recipe["context"],
        recipe["n_layers"],
        recipe["n_heads"],
        recipe["d_model"],
        recipe["ffn"],
    )


def train_plain(
    model: GPT, train_ids: np.ndarray, recipe: dict, steps: int
) -> tuple[GPT, list[float]]:
    """nanoGPT's training loop on model (already initialised); returns (model in eval mode, the
    loss per step)."""
    task = LanguageTask(train_ids, recipe["context"])
    rng = np.random.default_rng(recipe["seed"])
    lr = recipe["lr"]
    optimizer = model.configure_optimizers(recipe["weight_decay"], lr, (0.9, 0.99))
    losses = []
    model.train()
    for it in range(steps):
        for param_group in optimizer.param_groups:
            param_group["lr"] = get_lr(it, steps, lr)
        batch = task.sample(recipe["batch_size"], rng)
        _, loss = model(batch.ids, batch.target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.detach())  # no .item() per step (nanoGPT reads it at log intervals)
    model.eval()
    return model, torch.stack(losses).tolist()


def run_plain(
    train_ids: np.ndarray, vocab_size: int, recipe: dict, steps: int, start: Encoder | None = None
) -> tuple[GPT, list[float]]:
    """A whole plain run: build, initialise (nanoGPT's init from the recipe's seed, or a copy of
    start's weights), train."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe["seed"])
        model = plain_model(vocab_size, recipe)
        if start is not None:
            copy_tfviz_weights(start, model)
        return train_plain(model, train_ids, recipe, steps)


def run_ours(train_ids: np.ndarray, vocab: CharVocabulary, recipe: dict, steps: int):
    """A whole tfviz run: train_language_model on the recipe, on the CPU."""
    config = tfviz_config(vocab, recipe)
    keys = ("batch_size", "lr", "seed", "weight_decay")
    return train_language_model(
        train_ids, config, steps, device="cpu", **{k: recipe[k] for k in keys}
    )


def tfviz_config(vocab: CharVocabulary, recipe: dict):
    sizes = {k: recipe[k] for k in ("n_layers", "n_heads", "d_model", "ffn")}
    return language_config(vocab, recipe["context"], **sizes)


def tfviz_initial(vocab: CharVocabulary, recipe: dict) -> Encoder:
    """tfviz's model before its first step: exactly what train_language_model starts from."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe["seed"])
        return init_language_weights(Encoder(tfviz_config(vocab, recipe)))


@torch.no_grad()
def copy_tfviz_weights(encoder: Encoder, model: GPT) -> GPT:
    """Load a tfviz Encoder's weights into the plain model (same architecture, other names):
    W_q, W_k, W_v stacked into c_attn, W_o -> attn.c_proj, the FFN's fc1/fc2 -> mlp.c_fc/c_proj,
    norm1/norm2/norm_f -> ln_1/ln_2/ln_f, the position table (1, T, D) -> wpe (T, D)."""
    t = model.transformer
    t.wte.weight.copy_(encoder.embed.weight)
    t.wpe.weight.copy_(encoder.pos[0, : model.block_size])
    for block, layer in zip(t.h, encoder.layers, strict=True):
        a = layer.attn
        block.attn.c_attn.weight.copy_(torch.cat([a.W_q.weight, a.W_k.weight, a.W_v.weight]))
        block.attn.c_attn.bias.copy_(torch.cat([a.W_q.bias, a.W_k.bias, a.W_v.bias]))
        pairs = [(block.ln_1, layer.norm1), (block.attn.c_proj, a.W_o)]
        if block.ffn:
            pairs += [(block.ln_2, layer.norm2), (block.mlp.c_fc, layer.ff.fc1)]
            pairs += [(block.mlp.c_proj, layer.ff.fc2)]
        for mine, theirs in pairs:
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
    for mine, theirs in ((t.ln_f, encoder.norm_f), (model.lm_head, encoder.head)):
        mine.weight.copy_(theirs.weight)
        mine.bias.copy_(theirs.bias)
    return model


@torch.no_grad()
def windowed_loss(
    logits_of, ids: np.ndarray, context: int, max_windows: int | None = None, batch_size: int = 32
) -> float:
    """Mean next-token cross-entropy (nats per character) over ids cut into consecutive windows
    of context + 1, as tfviz.training.language.validation_loss: logits_of maps (B, T) ids to
    (B, T, V) logits."""
    ids_t = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    n = (len(ids_t) - 1) // (context + 1)
    n = n if max_windows is None else min(n, max_windows)
    windows = ids_t[: n * (context + 1)].view(n, context + 1)
    total = 0.0
    for i in range(0, n, batch_size):
        w = windows[i : i + batch_size]
        logits = logits_of(w[:, :-1])
        total += F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), w[:, 1:].reshape(-1), reduction="sum"
        ).item()
    return total / (n * context)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.lm_train", description=__doc__.split("\n")[0])
    p.add_argument("--recipe", default="shakespeare-char", choices=sorted(LANGUAGE_RECIPES))
    p.add_argument("--steps", type=int, help="steps per run (default: the recipe's)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--context", type=int, help="override the recipe's context (a quick run)")
    p.add_argument(
        "--same-init", action="store_true", help="start the plain model from tfviz's weights"
    )
    p.add_argument(
        "--max-windows", type=int, help="score only the first N validation windows (default all)"
    )
    args = p.parse_args(argv)
    recipe = dict(LANGUAGE_RECIPES[args.recipe])
    if args.context:
        recipe["context"] = args.context
    steps = args.steps or recipe["steps"]

    vocab, train_ids, valid_ids, _ = bundled_corpus()

    before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        sizes = (
            f"L={recipe['n_layers']} H={recipe['n_heads']} D={recipe['d_model']} "
            f"{'FFN' if recipe['ffn'] else 'attention only'}, context {recipe['context']}, "
            f"batch {recipe['batch_size']}, lr {recipe['lr']}, weight decay "
            f"{recipe['weight_decay']}, seed {recipe['seed']}"
        )
        print(f"recipe {args.recipe} ({sizes}); {steps} steps x {args.rounds} rounds")
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), CPU {cpu_model()}")
        start = tfviz_initial(vocab, recipe) if args.same_init else None
        print(f"plain init: {'a copy of tfviz initial weights' if start else 'its own (nanoGPT)'}")
        plain_s, ours_s = [], []
        plain_net = ours_net = None
        for r in range(args.rounds):
            for side in ("plain", "ours") if r % 2 == 0 else ("ours", "plain"):
                t0 = time.perf_counter()
                if side == "plain":
                    plain_net, plain_losses = run_plain(train_ids, vocab.size, recipe, steps, start)
                    plain_s.append(time.perf_counter() - t0)
                else:
                    ours_net, history = run_ours(train_ids, vocab, recipe, steps)
                    ours_s.append(time.perf_counter() - t0)
            print(
                f"round {r + 1}: plain {plain_s[-1]:.2f} s  ours {ours_s[-1]:.2f} s  "
                f"ratio {ours_s[-1] / plain_s[-1]:.3f}  (final train loss plain "
                f"{plain_losses[-1]:.4f}, ours {history['loss'][-1]:.4f})"
            )
        ratios = [o / q for o, q in zip(ours_s, plain_s, strict=True)]
        p_med, o_med = statistics.median(plain_s), statistics.median(ours_s)
        ratio = statistics.median(ratios)
        print(
            f"seconds per run (median of {args.rounds}): plain {p_med:.2f}  ours {o_med:.2f}  "
            f"({p_med / steps * 1e3:.2f} and {o_med / steps * 1e3:.2f} ms/step)"
        )
        each = ", ".join(f"{x:.3f}" for x in ratios)
        print(f"ratio ours/plain {ratio:.3f} (median; rounds {each})  (target <= 1.00)")
        context = recipe["context"]
        plain_val = windowed_loss(lambda x: plain_net(x)[0], valid_ids, context, args.max_windows)
        ours_val = windowed_loss(
            lambda x: ours_net(x, trace=False).logits, valid_ids, context, args.max_windows
        )
        n = (len(valid_ids) - 1) // (context + 1)
        n = n if args.max_windows is None else min(n, args.max_windows)
        print(
            f"validation loss ({n} windows of {context} + 1, nats/char): plain {plain_val:.4f}  "
            f"ours {ours_val:.4f}  difference ours - plain {ours_val - plain_val:+.4f}  "
            f"(target |difference| <= 0.02)"
        )
    finally:
        torch.set_num_threads(before)
    return {
        "plain_seconds": plain_s,
        "ours_seconds": ours_s,
        "ratio": ratio,
        "plain_valid": plain_val,
        "ours_valid": ours_val,
    }


if __name__ == "__main__":
    main()
