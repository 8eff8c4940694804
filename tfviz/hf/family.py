"""The one family type: what tfviz knows of a family of checkpoints, encoder or decoder.

A family names where each tfviz parameter sits in its checkpoint and reads its config.json into a
tfviz ModelConfig. The encoder families (tfviz.hf.families: BERT, RoBERTa, DistilBERT) map names
one to one (key_map); the decoder families (tfviz.hf.decoders: GPT-2, Llama, Qwen2, tfviz's own)
say where each parameter comes from (sources: a tensor taken whole, transposed, or a part of a
fused one). `decoder` tells them apart: a decoder runs causally and reads out the next token.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Specials:
    """The names of a family's special tokens (its tokenizer files may rename them)."""

    cls: str
    sep: str
    pad: str
    unk: str
    mask: str

    @property
    def names(self) -> tuple[str, ...]:
        return (self.cls, self.sep, self.pad, self.mask, self.unk)


@dataclass(frozen=True, kw_only=True)
class Family:
    """One family, encoder or decoder: its checkpoint names and its config reader."""

    name: str  # as a page shows it
    model_types: tuple[str, ...]  # config.json model_type values of this family
    # The body's tensors sit under this prefix when a head is saved too; the token embedding's
    # name (after the prefix) tells the two apart.
    prefix: str
    embedding: str
    # config.json -> its Architecture (tfviz.hf.families) or DecoderArchitecture (.decoders)
    read: Callable[[dict], Any] = field(repr=False)
    decoder: bool = False  # runs causally, its head reading out the next token
    # Tensors a checkpoint may hold that the model does not use (regular expressions over the
    # name, with or without the prefix), and why. Anything else unmapped is refused.
    ignored: Mapping[str, str] = field(default_factory=dict)
    # A WordPiece vocab.txt may stand in for tokenizer.json; vocab.json + merges.txt (byte-level
    # BPE, as the slow GPT-2 and RoBERTa tokenizers save them) may.
    wordpiece: bool = False
    bpe_files: bool = False

    # Encoders: tfviz parameter -> checkpoint tensor, one to one (key_map).
    embedding_keys: Mapping[str, str] = field(default_factory=dict)  # after the prefix
    layer: str = ""  # checkpoint layer prefix, with {i} for the layer index
    layer_keys: Mapping[str, str] = field(default_factory=dict)  # "layers.{i}.<key>" -> value
    # Masked-LM head: tfviz MaskedLMHead parameter -> the checkpoint names it may have (first
    # found wins; the decoder weight may be absent when tied to the word embedding).
    head_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    specials: Specials | None = None

    # Decoders: (config, architecture, prefix) -> {tfviz parameter: Source} (tfviz.hf.decoders)
    sources: Callable[..., dict] | None = field(default=None, repr=False)
    # Special tokens, when tokenizer_config.json does not name them: beginning, end, unknown.
    bos: str = "<s>"
    eos: str = "</s>"
    unk: str | None = "<unk>"

    def key_map(self, n_layers: int, prefix: str = "") -> dict[str, str]:
        """tfviz Transformer parameter -> checkpoint tensor name, for every parameter (encoders)."""
        names = {ours: prefix + theirs for ours, theirs in self.embedding_keys.items()}
        for i in range(n_layers):
            layer = self.layer.format(i=i)
            for ours, theirs in self.layer_keys.items():
                for part in ("weight", "bias"):
                    names[f"layers.{i}.{ours}.{part}"] = f"{prefix}{layer}.{theirs}.{part}"
        return names

    def why_ignored(self, name: str, prefix: str = "") -> str | None:
        """Why a checkpoint tensor outside the key map may be left out; None: it may not."""
        bare = name[len(prefix) :] if prefix and name.startswith(prefix) else name
        for pattern, why in self.ignored.items():
            if re.fullmatch(pattern, bare) or re.fullmatch(pattern, name):
                return why
        return None
