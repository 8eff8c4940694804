"""Open a model folder in the usual Hugging Face layout as a tfviz Transformer, or refuse it.

The folder: config.json, weights as model.safetensors (or the shards that
model.safetensors.index.json names, as save_pretrained writes a large model), the tokenizer as
tokenizer.json (or a BERT vocab.txt, or a RoBERTa vocab.json + merges.txt), optionally
tokenizer_config.json / special_tokens_map.json (special token names, lower-casing),
sentence_bert_config.json (a sentence-transformers model's own length limit) and a README.md
whose front matter names the licence.

Nothing in the folder is executed: weights are read with safetensors (never a pickle), the
tokenizer with `tokenizers`, the rest as JSON. Every check that can be made from sizes is made
before anything is allocated: the config's sizes against tfviz's limits and a parameter budget,
the weights file's size against what the config implies, every tensor's shape and dtype from the
safetensors header before its data is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer
from tfviz.hf.decoder_weights import MAX_DECODER_PARAMS, load_decoder, plan_decoder
from tfviz.hf.decoders import DecoderArchitecture, decoder_family_of
from tfviz.hf.errors import ConfigError, MissingFileError, PretrainedError, TokenizerError
from tfviz.hf.families import Architecture, Family, family_of
from tfviz.hf.files import (
    MAX_FILES,
    licence_of,
    read_json,
    refuse_remote_code,
    refusing,
    scan,
    shown,
)
from tfviz.hf.mlm import MaskedLMHead
from tfviz.hf.shards import MAX_PARAMS, load_weights, plan_weights, weight_files
from tfviz.hf.tokenizer import PieceTokenizer
from tfviz.hf.tokenizer_files import (
    has_tokenizer,
    load_decoder_tokenizer,
    load_tokenizer,
    model_max_pieces,
)


@dataclass(frozen=True)
class LoadedModel:
    """A pretrained model, encoder or decoder, opened from a folder, ready for every view."""

    name: str  # the folder's name
    family: str  # "BERT", "RoBERTa", "DistilBERT"; "GPT-2", "Llama", "Qwen2" (decoders)
    model_type: str  # config.json's model_type
    # eval mode, gradients off; pooled "mean" without a masked-LM head; a decoder: causal, its
    # head reading out the next token at every position
    model: Transformer
    tokenizer: PieceTokenizer
    head: MaskedLMHead | None  # the masked-LM head, when the checkpoint has one
    max_pieces: int  # word-pieces read per text, specials included (the model's own limit)
    licence: str | None  # as the folder's README front matter or LICENSE file says
    n_params: int  # the encoder's parameters (the head's not counted); a decoder's, as stored
    ignored: tuple[tuple[str, str], ...]  # (tensor name, why it is not used)


# The name before decoders opened too, kept for saved code and old imports.
LoadedEncoder = LoadedModel


def _read_config(
    files: dict[str, Path],
) -> tuple[dict, Family, Architecture | DecoderArchitecture]:
    raw = read_json(files["config.json"])
    refuse_remote_code(raw, "config.json")
    family = decoder_family_of(raw) or family_of(raw)
    try:
        arch = family.read(raw)
    except PretrainedError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError("unusable_config", family=family.name, why=e) from None
    return raw, family, arch


def open_folder(
    folder: str | Path, device: str | torch.device = "cpu", max_params: int = MAX_PARAMS
) -> LoadedModel:
    """A model folder as a LoadedModel; a PretrainedError subclass saying why not."""
    with refusing():
        return _open_folder(Path(folder), device, max_params)


def _open_folder(folder: Path, device, max_params: int) -> LoadedModel:
    files = scan(folder)
    raw, family, arch = _read_config(files)
    weights = weight_files(folder, files)
    if family.decoder:
        model, plan = load_decoder(weights, family, arch, max(max_params, MAX_DECODER_PARAMS))
        head, ignored, n_params = None, plan.ignored, plan.n_stored  # the model's head: logits
        max_pieces = model_max_pieces(files, model.config)
        tokenizer = load_decoder_tokenizer(files, family, max_pieces, arch.add_bos)
    else:
        model, head, ignored = load_weights(weights, family, arch, max_params)
        max_pieces = model_max_pieces(files, model.config)
        tokenizer = load_tokenizer(files, family, max_pieces)
        n_params = model.config.n_params
    config = model.config
    if tokenizer.vocab_size > config.vocab_size:
        raise TokenizerError(
            "more_pieces_than_model", pieces=tokenizer.vocab_size, model=config.vocab_size
        )
    return LoadedModel(
        name=shown(folder.name),
        family=family.name,
        model_type=raw["model_type"],
        model=model.to(device),
        tokenizer=tokenizer,
        head=None if head is None else head.to(device),
        max_pieces=max_pieces,
        licence=licence_of(files),
        n_params=n_params,
        ignored=ignored,
    )


@dataclass(frozen=True)
class FolderInfo:
    """What a picker shows for a model folder, read without loading it (config.json and the
    safetensors header only)."""

    name: str  # the folder's name
    path: Path
    family: str  # "BERT", "RoBERTa" or "DistilBERT"
    model_type: str
    config: ModelConfig  # sizes: n_layers, n_heads, d_model, vocab_size, max_len
    n_params: int  # the encoder's
    masked_lm: bool  # it has a masked-LM head (fill in the mask); else a sentence encoder
    max_pieces: int  # word-pieces it reads per text, specials included
    licence: str | None
    weights_bytes: int  # size of model.safetensors, or of all its shards
    causal_lm: bool = False  # a decoder (GPT-2, Llama, Qwen2): it reads out the next token


def describe_folder(folder: str | Path, max_params: int = MAX_PARAMS) -> FolderInfo:
    """A model folder's FolderInfo, with every refusal open_folder would make that needs no
    tensor data (files, config, sizes, names and shapes in the header)."""
    with refusing():
        return _describe_folder(Path(folder), max_params)


def _describe_folder(folder: Path, max_params: int) -> FolderInfo:
    files = scan(folder)
    raw, family, arch = _read_config(files)
    weights = weight_files(folder, files)
    causal_lm = family.decoder
    if causal_lm:
        plan = plan_decoder(weights, family, arch, max(max_params, MAX_DECODER_PARAMS))
    else:
        plan = plan_weights(weights, family, arch, max_params)
    if not has_tokenizer(files, family):  # the loader raises MissingFileError, saying which file
        if causal_lm:
            load_decoder_tokenizer(files, family, 3, arch.add_bos)
        else:
            load_tokenizer(files, family, 3)
    return FolderInfo(
        name=shown(folder.name),
        path=folder,
        family=family.name,
        model_type=raw["model_type"],
        config=plan.config,
        n_params=plan.n_stored if causal_lm else plan.config.n_params,
        masked_lm=not causal_lm and bool(plan.head_names),
        causal_lm=causal_lm,
        max_pieces=model_max_pieces(files, plan.config),
        licence=licence_of(files),
        weights_bytes=weights.size,
    )


@dataclass(frozen=True)
class Refused:
    """A folder under the models folder that is not offered, and why: `error` words it in
    either language (error.text(lang)); `reason` is the English."""

    name: str
    path: Path
    error: PretrainedError

    @property
    def reason(self) -> str:
        return str(self.error)


def list_folder(root: str | Path, max_params: int = MAX_PARAMS) -> list[FolderInfo | Refused]:
    """Each subfolder of root (e.g. the server's TFVIZ_PRETRAINED_DIR), by name: described, or
    refused with the reason. Nothing is loaded; hidden folders (".cache") are skipped."""
    root = Path(root)
    if not root.is_dir():
        raise MissingFileError("not_a_folder", name=root)
    out: list[FolderInfo | Refused] = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            out.append(describe_folder(sub, max_params))
        except PretrainedError as e:  # describe_folder raises nothing else: said, not raised
            out.append(Refused(shown(sub.name), sub, e))
        if len(out) >= MAX_FILES:
            break
    return out
