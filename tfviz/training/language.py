"""Language models of our own: a character vocabulary, random windows of a corpus's training text
as next-token batches, the validation loss in nats per character on its fixed split, training
(the trainer's own loop, tfviz.training.train.fit_params, with AdamW) and the model folder the app
opens like any decoder folder (tfviz.hf: the "tfviz-lm" family).

A character model, as nanoGPT's shakespeare_char: every character of the corpus is one token, so
a student reads the model's next token as a letter, and an induction head (Olsson et al. 2022)
copies letters it has seen before. Ids: the alphabet's characters in sorted order, then END
(which stands between documents and pads a batch of texts; training windows never hold it).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save as st_save
from torch import Tensor

from tfviz.analysis.induction import LETTERS, measure_induction, probe
from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions
from tfviz.core.model import Transformer
from tfviz.core.tasks import Batch
from tfviz.hf.decoders import TFVIZ_MODEL_TYPE
from tfviz.training import corpus
from tfviz.training.checkpoint import write_atomic
from tfviz.training.train import StepInfo, fit_params, resolve_device

END = "<|endoftext|>"  # the one special token: between documents, and padding
MIN_REPEAT = 8  # the shortest passage a repeating window repeats (LanguageTask.repeat_share)


@dataclass(frozen=True)
class CharVocabulary:
    """Characters <-> ids: id i is alphabet[i] (sorted), END is the last id."""

    alphabet: str

    def __post_init__(self):
        if not self.alphabet or list(self.alphabet) != sorted(set(self.alphabet)):
            raise ValueError("an alphabet is its distinct characters, sorted")

    @property
    def end_id(self) -> int:
        return len(self.alphabet)

    @property
    def size(self) -> int:
        return len(self.alphabet) + 1

    def encode(self, text: str) -> np.ndarray:
        """(N,) int64 ids of text; ValueError naming the characters outside the alphabet."""
        table = np.full(max(map(ord, self.alphabet)) + 1, -1, dtype=np.int64)
        table[[ord(c) for c in self.alphabet]] = np.arange(len(self.alphabet))
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        ids = np.where(codes < len(table), table[np.minimum(codes, len(table) - 1)], -1)
        if (ids < 0).any():
            bad = sorted({text[i] for i in np.flatnonzero(ids < 0)[:100]})
            raise ValueError(f"characters outside the alphabet: {bad!r}")
        return ids

    def decode(self, ids) -> str:
        return "".join(self.alphabet[i] if i < len(self.alphabet) else "" for i in map(int, ids))

    def tokenizer_spec(self) -> dict:
        """A tokenizer.json the `tokenizers` library reads (tfviz.hf.tokenizer): BPE without
        merges, one piece per character, END an added special token."""
        vocab = {c: i for i, c in enumerate(self.alphabet)} | {END: self.end_id}
        end = {"id": self.end_id, "content": END, "single_word": False, "lstrip": False,
               "rstrip": False, "normalized": False, "special": True}  # fmt: skip
        model = {"type": "BPE", "dropout": None, "unk_token": None,
                 "continuing_subword_prefix": None, "end_of_word_suffix": None,
                 "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                 "vocab": vocab, "merges": []}  # fmt: skip
        return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [end],
                "normalizer": None, "pre_tokenizer": None, "post_processor": None,
                "decoder": None, "model": model}  # fmt: skip


def language_config(
    vocab: CharVocabulary,
    context: int,
    n_layers: int = 2,
    n_heads: int = 4,
    d_model: int = 128,
    ffn: bool = True,
    positions: str = "learned",
) -> ModelConfig:
    """A GPT-style causal character model: pre-norm, GELU, no dropout; positions learned (a
    table, as GPT-2) or rotary (q and k turned by the position, as Llama)."""
    return ModelConfig(
        vocab_size=vocab.size,
        n_out=vocab.size,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=4 * d_model,
        n_layers=n_layers,
        max_len=context,
        dropout=0.0,
        norm="pre",
        activation="gelu",
        causal=True,
        ffn=ffn,
        positions=positions,
    )


class LanguageTask:
    """Random windows of a text's ids as next-token batches (what fit_params draws each step):
    ids (B, T) and targets (B, T), the target of position t being token t + 1.

    repeat_share: the share of windows that repeat a passage once, as a reader going back over a
    line would: the window's first m tokens (m drawn from MIN_REPEAT..T/2), then the same m
    again, then the text that follows them. Only there does copying from earlier in the context
    pay within a window: on the plain text, a two-layer character model learns no induction head
    in thousands of steps (models/README.md). 0: the text as it is.
    """

    name = "language"
    min_len = max_len = None  # fit_params passes them on; windows have one length

    def __init__(self, ids: np.ndarray, context: int, repeat_share: float = 0.0):
        if context < 2 or len(ids) <= context + 1:
            raise ValueError(f"a text of {len(ids)} tokens has no window of {context} + 1")
        if not 0.0 <= repeat_share <= 1.0:
            raise ValueError(f"repeat_share is a share in [0, 1], got {repeat_share!r}")
        if repeat_share and context // 2 < MIN_REPEAT:
            raise ValueError(f"repeats of at least {MIN_REPEAT} tokens need a context of 2x that")
        self.ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        self.context = context
        self.repeat_share = repeat_share
        self._offsets = torch.arange(context + 1)

    def sample(self, n: int, rng: np.random.Generator, min_len=None, max_len=None) -> Batch:
        starts = torch.as_tensor(rng.integers(0, len(self.ids) - self.context - 1, size=n))
        offsets = self._offsets.expand(n, -1)  # (B, T + 1)
        if self.repeat_share:  # (no draw otherwise: the plain text's batches stay as they were)
            repeats = torch.as_tensor(rng.random(n) < self.repeat_share)[:, None]  # (B, 1)
            m = torch.as_tensor(rng.integers(MIN_REPEAT, self.context // 2 + 1, size=n))[:, None]
            # Position j of a repeating window reads the text at j - m once j >= m.
            offsets = offsets - m * (repeats & (offsets >= m))
        window = self.ids[starts[:, None] + offsets]  # (B, T + 1)
        x, y = window[:, :-1], window[:, 1:]
        return Batch(ids=x, pad_mask=torch.zeros_like(x, dtype=torch.bool), target=y,
                     lengths=torch.full((n,), self.context))  # fmt: skip

    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    def check_config(self, config: ModelConfig) -> None:
        if not config.causal or config.pool != "none" or config.n_out != config.vocab_size:
            raise ValueError("a language model is causal, per token, with a vocabulary head")
        if config.max_len < self.context:
            raise ValueError(f"windows of {self.context} need {self.context} positions")
        if int(self.ids.max()) >= config.vocab_size:
            raise ValueError("the text has ids past the model's vocabulary")


@torch.no_grad()
def validation_loss(
    model: Transformer,
    ids: np.ndarray,
    context: int | None = None,
    max_windows: int | None = None,
    interventions: Interventions | None = None,
    batch_size: int = 32,
) -> float:
    """Mean next-token cross-entropy, nats per character, over the text cut into consecutive
    windows of context + 1 (every character but each window's first is predicted, from at
    least one before it): a fixed measure, the same for every model of one context.

    max_windows: only the first this many windows (a short slice, as the tests read).
    """
    context = context or model.config.max_len
    ids_t = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    n = (len(ids_t) - 1) // (context + 1)
    n = n if max_windows is None else min(n, max_windows)
    if n < 1:
        raise ValueError(f"a text of {len(ids_t)} tokens has no window of {context} + 1")
    windows = ids_t[: n * (context + 1)].view(n, context + 1)
    total = 0.0
    for i in range(0, n, batch_size):
        w = windows[i : i + batch_size].to(model.device)
        logits = model(w[:, :-1], interventions=interventions, trace=False).logits
        total += F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), w[:, 1:].reshape(-1), reduction="sum"
        ).item()
    return total / (n * context)


@torch.no_grad()
def init_language_weights(model: Transformer) -> Transformer:
    """GPT-2's initialisation (as nanoGPT's): every matrix and table drawn from N(0, 0.02), biases
    zero, and the two maps that write into the residual stream (W_o, the FFN's fc2) drawn
    smaller, N(0, 0.02 / sqrt(2 L)), so that the stream's variance does not grow with depth.

    The toy models keep torch's defaults (an embedding drawn from N(0, 1)); a language model's
    learned positions, drawn at 0.02 beside such an embedding, stay unread for thousands of
    steps (seen here: a two-layer attention-only model kept uniform attention for 3,000 steps)."""
    residual_std = 0.02 / (2 * model.config.n_layers) ** 0.5
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.zero_()
        elif name.endswith(("attn.W_o.weight", "ff.fc2.weight")):
            p.normal_(0.0, residual_std)
        elif p.dim() >= 2:  # (norms' gains, 1-d, stay at 1)
            p.normal_(0.0, 0.02)
    return model


def train_language_model(
    train_ids: np.ndarray,
    config: ModelConfig,
    steps: int,
    batch_size: int = 12,
    lr: float = 1e-3,
    seed: int = 0,
    weight_decay: float = 0.1,
    device: str = "auto",
    on_step: Callable[[StepInfo], bool | None] | None = None,
    w_o: str = "learned",
    repeat_share: float = 0.0,
    prepare: Callable[[Transformer], list[torch.nn.Parameter]] | None = None,
) -> tuple[Transformer, dict]:
    """Train a fresh character model on random windows of train_ids.

    prepare: given the freshly initialised model, changes it in place if it must and returns the
    parameters to train (the language atlas's frozen and gated arms); None: all of them.

    AdamW (betas 0.9, 0.99; weight decay on the matrices only) with a linear warm-up over the
    first 5% of steps then cosine decay to a tenth of lr, gradients clipped at 1: nanoGPT's
    shakespeare_char recipe, run by the trainer's own loop (fit_params).

    Returns:
        (model in eval mode, history: the loss per step and the settings).
    """
    task = LanguageTask(train_ids, config.max_len, repeat_share)
    task.check_config(config)
    dev = resolve_device(device)
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = init_language_weights(Transformer(config))
        params = list(model.parameters()) if prepare is None else prepare(model)
        model.to(dev)  # (in place: params are still the model's)
        losses = fit_params(
            model,
            params,
            task,
            np.random.default_rng(seed),
            steps,
            batch_size,
            lr,
            "cosine",
            1.0,
            on_step,
            None,
            None,
            weight_decay=weight_decay,
            betas=(0.9, 0.99),
            **({} if w_o == "learned" else {"w_o": w_o}),
        )
    history = {
        "loss": losses,
        "steps_done": len(losses),
        "steps": steps,
        "cancelled": len(losses) < steps,
        "seconds": round(time.perf_counter() - start, 1),
        "batch_size": batch_size,
        "context": config.max_len,
        "lr": lr,
        "weight_decay": weight_decay,
        "repeat_share": repeat_share,
        "seed": seed,
        "w_o": w_o,
        "device": str(dev),
    }
    return model, history


FOLDER_FILES = ("config.json", "model.safetensors", "tokenizer.json", "README.md")


def save_language_folder(
    folder: str | Path,
    model: Transformer,
    vocab: CharVocabulary,
    record: dict,
    card: str,
    licence: str = "cc0-1.0",
) -> Path:
    """Write the model as a folder tfviz.hf opens (family "tfviz-lm"): config.json (the
    ModelConfig itself and the training record), model.safetensors (the Transformer's own names;
    the position table (T, D)), tokenizer.json (vocab.tokenizer_spec) and README.md (card, under
    front matter naming the licence). Each file written atomically."""
    folder = Path(folder)
    config = model.config
    if config.vocab_size != vocab.size:
        raise ValueError(f"the model reads {config.vocab_size} ids, the vocabulary {vocab.size}")
    tensors = {}
    for name, value in model.state_dict().items():
        value = value.detach().to("cpu", torch.float32)
        tensors[name] = (value[0] if name == "pos" else value).contiguous()
    raw = {"model_type": TFVIZ_MODEL_TYPE, "tfviz_config": config.to_dict(), "record": record}
    files = {
        "config.json": json.dumps(raw, indent=1, allow_nan=False).encode(),
        "model.safetensors": st_save(tensors),
        "tokenizer.json": json.dumps(vocab.tokenizer_spec(), ensure_ascii=False).encode(),
        "README.md": f"---\nlicense: {licence}\n---\n\n{card.strip()}\n".encode(),
    }
    for name, data in files.items():
        write_atomic(folder / name, data)
    return folder


# The bundled language models (`python -m tfviz.cli.train --language NAME`), trained on the
# bundled corpus (tfviz.training.corpus). nanoGPT's CPU setting for Shakespeare characters is
# shakespeare-char's; the attention-only model is the classic induction-head model (two layers,
# no feed-forward net: Elhage et al. 2021), on long windows, where copying pays.
# fmt: off
LANGUAGE_RECIPES: dict[str, dict] = {
    # nanoGPT's CPU setting but 3,000 steps, not 2,000: at 2,000 this one reached 1.889 nats on
    # plays it never saw (nanoGPT's 1.88 is on the last tenth of the very text it trained on).
    "shakespeare-char": dict(n_layers=4, n_heads=4, d_model=128, ffn=True, positions="learned",
                             context=64, batch_size=12, steps=3000, lr=1e-3, weight_decay=0.1,
                             seed=0),
    # Rotary positions: the same model with a learned table reached 1.956 nats at 2,000 steps,
    # with rotary 1.786 at 3,000 (models/README.md, what was tried).
    "shakespeare-2l-attn": dict(n_layers=2, n_heads=4, d_model=64, ffn=False, positions="rotary",
                                context=256, batch_size=32, steps=3000, lr=3e-3,
                                weight_decay=0.1, seed=0),
}
# fmt: on
# The sizes of a recipe (language_config's arguments); the rest is training.
SIZE_KEYS = ("n_layers", "n_heads", "d_model", "ffn", "positions")
TRAIN_KEYS = ("steps", "batch_size", "lr", "seed", "weight_decay", "w_o", "repeat_share")
SLICE_WINDOWS = 32  # windows of the validation split's start that a record's slice loss covers


@functools.cache
def corpus_vocabulary() -> CharVocabulary:
    """The bundled corpus's characters, from its manifest alone (no text read)."""
    return CharVocabulary(corpus.load_manifest(corpus.CORPUS_DIR)["alphabet"])


@functools.cache
def bundled_corpus() -> tuple[CharVocabulary, np.ndarray, np.ndarray, dict]:
    """(vocabulary, training ids, validation ids, manifest) of the bundled corpus, read once per
    process (about 5 MB of text, each split checked against its sha256) and shared: never change
    the arrays."""
    manifest = corpus.load_manifest(corpus.CORPUS_DIR)
    vocab = corpus_vocabulary()
    train_ids = vocab.encode(corpus.load_split(corpus.CORPUS_DIR, "train"))
    valid_ids = vocab.encode(corpus.load_split(corpus.CORPUS_DIR, "valid"))
    return vocab, train_ids, valid_ids, manifest


def induction_probe(vocab: CharVocabulary, context: int) -> Tensor:
    """The standard probe (tfviz.analysis.induction.probe) in vocab's letters."""
    return probe([vocab.alphabet.index(c) for c in LETTERS if c in vocab.alphabet], context)


def measure_record(
    model: Transformer, vocab: CharVocabulary, valid_ids: np.ndarray, history: dict, manifest: dict
) -> dict:
    """What a bundled model's folder records: its training, the validation loss on the whole
    validation split, and its induction probe (best head, in-context loss drop)."""
    scores = measure_induction(model, induction_probe(vocab, model.config.max_len))
    layer, head, best = scores.best()
    record = {k: v for k, v in history.items() if k != "loss"}
    every = max(1, len(history["loss"]) // 100)
    return record | {
        "loss_curve": [
            round(float(np.mean(history["loss"][i : i + every])), 4)
            for i in range(0, len(history["loss"]), every)
        ],  # fmt: skip
        "loss_curve_every": every,
        "valid_loss": round(validation_loss(model, valid_ids), 4),
        # The same on the split's first windows alone: what a test re-measures in a second.
        "valid_loss_slice": round(validation_loss(model, valid_ids, max_windows=SLICE_WINDOWS), 5),
        "valid_slice_windows": SLICE_WINDOWS,
        "valid_chars": int(len(valid_ids)),
        "corpus": manifest.get("name"),
        "corpus_sha256": manifest["valid"]["sha256"],
        "induction_best": {"layer": layer, "head": head, "score": round(best, 4)},
        "previous_token_best": round(float(scores.previous_token.max()), 4),
        "in_context_drop": round(scores.in_context_drop, 4),
        "loss_first_copy": round(scores.loss_first, 4),
        "loss_repeat": round(scores.loss_repeat, 4),
        "torch_version": torch.__version__,
    }


def model_card(name: str, record: dict, made: str | None = None) -> str:
    """The folder's README.md: what the model is, what it learned from, how it was made (made;
    by default the command that rebuilds a bundled model)."""
    return "\n".join([
        f"# {name}",
        "",
        "A character-level language model trained by tfviz on Project Gutenberg's texts of",
        "Shakespeare's plays and poems (public domain; tfviz's bundled corpus, models/corpus).",
        "",
        made or f"Rebuild: `python -m tfviz.cli.train --language {name}`",
        "",
        f"- training: {record['steps_done']} steps x {record['batch_size']} windows of "
        f"{record['context']} characters, AdamW lr {record['lr']}, {record['seconds']} s",
        f"- validation loss: {record['valid_loss']} nats per character "
        f"({record['valid_chars']:,} held-out characters)",
        f"- best induction score: {record['induction_best']['score']} (layer "
        f"{record['induction_best']['layer']}, head {record['induction_best']['head']}); "
        f"in-context loss drop on repeated random letters: {record['in_context_drop']} nats",
    ])  # fmt: skip


def readme_section(root: Path) -> list[str]:
    """models/README.md's table of the bundled language models, from each folder's record."""
    rows = []
    for name in LANGUAGE_RECIPES:
        config_file = root / name / "config.json"
        if not config_file.is_file():
            continue
        raw = json.loads(config_file.read_text())
        c, r = raw["tfviz_config"], raw["record"]
        ind = r["induction_best"]
        size = (root / name / "model.safetensors").stat().st_size / 2**20
        rows.append(
            f"| {name} | D={c['d_model']} H={c['n_heads']} L={c['n_layers']} "
            f"{'FFN ' + str(c['d_ff']) if c['ffn'] else 'attention only'}, context "
            f"{c['max_len']} | {r['steps_done']} x {r['batch_size']}, AdamW lr {r['lr']} | "
            f"{r['seconds']:.0f} s | **{r['valid_loss']:.3f}** | {ind['score']:.3f} "
            f"(L{ind['layer']}H{ind['head']}) | {r['in_context_drop']:.2f} | {size:.1f} MB |"
        )
    if not rows:
        return []
    return [
        "## Bundled language models",
        "",
        "Character-level decoders trained by tfviz on the corpus below, as folders the picker "
        "lists (`models/language/NAME`: config.json, model.safetensors, tokenizer.json, a model "
        "card). Rebuild one with `python -m tfviz.cli.train --language NAME` (settings in "
        "`tfviz/training/language.py`, LANGUAGE_RECIPES; one CPU thread). Validation loss: nats "
        "per character over the whole validation split (consecutive windows of the context). "
        "Induction: the best head's score on 32 sequences of random letters repeated twice, and "
        "the loss on the first copy minus the loss on the repeat (Olsson et al. 2022). "
        "`tests/training/test_language_models.py` re-measures both on the models' own weights. No "
        "induction head formed in either (nor in any recipe tried within a CPU's reach: "
        "docs/language.md gives each with its figures).",
        "",
        "| folder | model | training | time | validation loss | best induction score | "
        "in-context drop (nats) | size |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
