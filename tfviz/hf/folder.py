"""Open a model folder in the usual Hugging Face layout as a tfviz Encoder, or refuse it.

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

import json
import os
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from tfviz.config import ModelConfig
from tfviz.hf.errors import (
    ConfigError,
    MissingFileError,
    PretrainedError,
    TokenizerError,
    TooLargeError,
    UnsafeFileError,
    WeightsError,
)
from tfviz.hf.families import Architecture, Family, Specials, family_of
from tfviz.hf.mlm import MaskedLMHead
from tfviz.hf.tokenizer import PieceTokenizer
from tfviz.hf.weights import checked, encoder_from_tensors, expected_shapes
from tfviz.model import Encoder

# Limits of what a classroom server opens. XLM-R base (278 M parameters, 1.1 GB in float32) is
# the largest model the issue names; BERT-large and larger are refused by tfviz.config.LIMITS
# (12 layers, D <= 1024) before this budget is even reached.
MAX_PARAMS = 300_000_000
MAX_FILES = 256  # files in a model folder (a Hugging Face folder has about a dozen)
MAX_JSON_BYTES = 1 << 20  # config.json, tokenizer_config.json and the like
MAX_TOKENIZER_BYTES = 64 << 20  # each of TOKENIZER_FILES (XLM-R's tokenizer.json is 17 MB)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "merges.txt")
WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"  # {"weight_map": {tensor name: shard file}}
# Files that unpickle (run code) when loaded by torch, numpy or joblib. Never read here; a folder
# with one of them and no safetensors file is refused, saying why.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz")
CODE_SUFFIXES = (".py", ".pyc", ".pyo", ".pyd", ".so", ".dll", ".dylib")
# config.json keys that ask a loader to import code shipped with the model.
REMOTE_CODE_KEYS = ("auto_map", "trust_remote_code", "custom_pipelines")


@dataclass(frozen=True)
class LoadedEncoder:
    """A pretrained encoder opened from a folder, ready for every view."""

    name: str  # the folder's name
    family: str  # "BERT", "RoBERTa" or "DistilBERT"
    model_type: str  # config.json's model_type
    model: Encoder  # eval mode, gradients off; pooled "mean" without a masked-LM head
    tokenizer: PieceTokenizer
    head: MaskedLMHead | None  # the masked-LM head, when the checkpoint has one
    max_pieces: int  # word-pieces read per text, specials included (the model's own limit)
    licence: str | None  # as the folder's README front matter or LICENSE file says
    n_params: int  # the encoder's parameters (the head's not counted)
    ignored: tuple[tuple[str, str], ...]  # (tensor name, why it is not used)


def scan(folder: Path) -> dict[str, Path]:
    """Relative name -> path of every file in folder (subfolders included), refusing code.

    UnsafeFileError for a code file anywhere, a pickle without safetensors weights beside it;
    PretrainedError for too many files or a folder that is not one.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingFileError(f"{folder} is not a folder")
    files: dict[str, Path] = {}
    for root, dirs, names in os.walk(folder):  # links to folders are not followed
        dirs.sort()
        for name in sorted(names):
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if not path.is_file():  # a FIFO or device would block or never end when read
                raise UnsafeFileError(f"{rel} is not a regular file")
            files[rel] = path
            if len(files) > MAX_FILES:
                raise TooLargeError(
                    f"the folder holds more than {MAX_FILES} files; a model folder has a dozen"
                )
    code = [rel for rel in files if rel.lower().endswith(CODE_SUFFIXES)]
    if code:
        raise UnsafeFileError(
            f"the folder holds code ({', '.join(code[:3])}); tfviz never runs a model's own "
            "code: remove it, tfviz needs only config.json, model.safetensors and the tokenizer"
        )
    pickles = [rel for rel in files if rel.lower().endswith(PICKLE_SUFFIXES)]
    if WEIGHTS not in files and WEIGHTS_INDEX not in files:
        if pickles:
            raise UnsafeFileError(
                f"the weights are a pickle ({', '.join(pickles[:3])}), which can run code when "
                f"loaded; tfviz reads only {WEIGHTS}. Convert them with safetensors first."
            )
        raise MissingFileError(f"the folder has no {WEIGHTS} (nor {WEIGHTS_INDEX})")
    for name in ("config.json",):
        if name not in files:
            raise MissingFileError(f"the folder has no {name}")
    return files


def read_json(path: Path, limit: int = MAX_JSON_BYTES) -> dict:
    """A JSON object from a small file; ConfigError when it is too large or not an object."""
    size = path.stat().st_size
    if size > limit:
        raise TooLargeError(f"{path.name} has {size:,} bytes; at most {limit:,} are read")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"{path.name} is not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name} is not a JSON object")
    return data


def refuse_remote_code(data: dict, name: str) -> None:
    for key in REMOTE_CODE_KEYS:
        if key in data:
            raise UnsafeFileError(
                f"{name} has {key}: the model wants its own code run to load it; tfviz never "
                "runs a model's code and opens only the BERT, RoBERTa and DistilBERT it knows"
            )


def model_config(arch: Architecture, has_head: bool, max_params: int) -> ModelConfig:
    """tfviz's config for the architecture; TooLargeError or ConfigError before allocation."""
    try:
        config = ModelConfig(
            **arch.fields,
            n_out=0,  # no tfviz head: the output is the hidden states
            dropout=0.0,  # inference only
            # A masked-LM model is read per token; a headless one (a sentence encoder such as
            # MiniLM) gives the mean of its last hidden states over real tokens.
            pool="none" if has_head else "mean",
            embed="token",
        )
    except ValueError as e:
        limited = re.match(r"(\w+) must be between", str(e))
        kind = TooLargeError if limited else ConfigError
        raise kind(f"config.json: {e}") from None
    head = config.d_model * (config.d_model + 3) + config.vocab_size if has_head else 0
    total = config.n_params + head  # the decoder is counted once: tied to the embedding
    if total > max_params:
        raise TooLargeError(
            f"config.json describes {total:,} parameters; this server opens at most {max_params:,}"
        )
    return config


def _prefix(family: Family, names) -> str:
    """The prefix the encoder's tensors carry: the family's ("bert.") when a head was saved
    with them (BertForMaskedLM), none for a bare encoder (BertModel, MiniLM)."""
    embedding = next(iter(family.embedding_keys.values()))
    if family.prefix + embedding in names:
        return family.prefix
    return ""


@dataclass(frozen=True)
class WeightFiles:
    """Where the checkpoint's tensors are: one model.safetensors, or the shards its index names.

    name: what refusals call the weights (the file, or the index of shards). shards: shard file
    -> its path, in the index's order. where: tensor name -> its shard file, as the index says
    (empty for a single file: its header says).
    """

    name: str
    shards: dict[str, Path]
    where: dict[str, str]

    @property
    def size(self) -> int:
        """Bytes of every file read, for the same size check a single file gets."""
        return sum(path.stat().st_size for path in self.shards.values())


def weight_files(folder: Path, files: dict[str, Path]) -> WeightFiles:
    """The folder's weights: model.safetensors when there is one, else the shards its index
    names, each checked to be a plain file directly in the folder; a PretrainedError else."""
    if WEIGHTS in files:  # as transformers does: the single file wins over an index beside it
        return WeightFiles(WEIGHTS, {WEIGHTS: files[WEIGHTS]}, {})
    index = files[WEIGHTS_INDEX]
    size = index.stat().st_size
    if size > MAX_JSON_BYTES:
        raise TooLargeError(f"{WEIGHTS_INDEX} has {size:,} bytes; at most {MAX_JSON_BYTES:,}")

    def no_repeats(pairs):  # json.loads keeps the last of two equal keys, silently
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise WeightsError(f"{WEIGHTS_INDEX} names {key!r} twice")
            seen[key] = value
        return seen

    try:
        data = json.loads(index.read_text(encoding="utf-8"), object_pairs_hook=no_repeats)
    except (OSError, UnicodeDecodeError, ValueError) as e:  # not WeightsError: a RuntimeError
        raise ConfigError(f"{WEIGHTS_INDEX} is not readable JSON ({e})") from None
    where = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(where, dict) or not where:
        raise WeightsError(f"{WEIGHTS_INDEX} has no weight_map naming the shard of each tensor")
    root = Path(folder).resolve()
    shards: dict[str, Path] = {}
    for shard in dict.fromkeys(where.values()):
        shards[shard] = _shard_path(shard, files, root)
    return WeightFiles(WEIGHTS_INDEX, shards, dict(where))


def _shard_path(shard, files: dict[str, Path], root: Path) -> Path:
    """The path of a shard the index names, if it is a safetensors file directly in the folder
    (scan has already refused non-regular files and code); UnsafeFileError or MissingFileError
    else. A name with a separator or "..", or a link resolving outside the folder, could make the
    index read any file on the server."""
    if not isinstance(shard, str) or not shard.endswith(".safetensors"):
        raise UnsafeFileError(f"{WEIGHTS_INDEX} names a shard {shard!r}: not a .safetensors file")
    if "/" in shard or "\\" in shard or "\x00" in shard or shard.startswith("."):
        raise UnsafeFileError(
            f"{WEIGHTS_INDEX} names the shard {shard!r} outside the folder; shards must be "
            "files beside it"
        )
    if shard not in files:
        raise MissingFileError(
            f"{WEIGHTS_INDEX} names the shard {shard}, which is not in the folder"
        )
    path = files[shard]
    if root not in path.resolve().parents:
        raise UnsafeFileError(
            f"the shard {shard} is a link to a file outside the folder; links are refused"
        )
    return path


@contextmanager
def _open_weights(weights: WeightFiles) -> Iterator[_Tensors]:
    """Every shard's header read (no tensor data), as one mapping of tensor name -> shard."""
    with ExitStack() as stack:
        opened = {
            shard: stack.enter_context(_open_safetensors(path))
            for shard, path in weights.shards.items()
        }
        yield _Tensors(weights, opened)


class _Tensors:
    """The tensors of all the shards, each found in the shard that holds it; WeightsError when
    two shards hold one name, or the index puts a tensor in a shard that lacks it."""

    def __init__(self, weights: WeightFiles, opened: dict):
        self._in: dict[str, object] = {}
        home = {}
        for shard, f in opened.items():
            for key in f.keys():
                if key in self._in:
                    raise WeightsError(f"{key} is in two shards; each tensor must be in one")
                self._in[key], home[key] = f, shard
        for key, shard in home.items():
            if weights.where and weights.where.get(key) != shard:
                raise WeightsError(
                    f"{shard} holds {key}, which {WEIGHTS_INDEX} puts in "
                    f"{weights.where.get(key) or 'no shard'}"
                )
        for key, shard in weights.where.items():
            if key not in self._in:
                raise WeightsError(f"{WEIGHTS_INDEX} puts {key} in {shard}, which lacks it")

    def keys(self):
        return self._in.keys()

    def get_slice(self, name: str):
        return self._in[name].get_slice(name)

    def get_tensor(self, name: str):
        return self._in[name].get_tensor(name)


@dataclass(frozen=True)
class WeightsPlan:
    """What the weights file (or its shards) holds, checked from the headers against
    config.json: nothing read past the headers, nothing allocated."""

    config: ModelConfig
    key_map: dict[str, str]  # Encoder parameter -> tensor name
    head_names: dict[str, str]  # MaskedLMHead parameter -> tensor name; empty: no head
    ignored: tuple[tuple[str, str], ...]  # (tensor name, why it is not used)


def plan_weights(
    weights: WeightFiles, family: Family, arch: Architecture, max_params: int
) -> WeightsPlan:
    """Every size check that needs no tensor data, in order, each before anything larger is
    read: the config against the limits, the file's size against the config, the names in the
    header against the family's key map, each tensor's shape against the config. Shards are
    checked as one file: their total size, the names in all their headers."""
    guess = model_config(arch, has_head=False, max_params=max_params)
    D, V = guess.d_model, guess.vocab_size
    # Largest honest file for this config: every encoder tensor, an untied decoder and head, a
    # pooler and a small fine-tuning head, in float32, plus the header.
    honest = 4 * (guess.n_params + 2 * V * (D + 1) + 3 * D * D + 64 * D) + (4 << 20)
    size = weights.size
    if size > honest:
        what = f"the shards {WEIGHTS_INDEX} names have" if weights.where else f"{weights.name} has"
        raise TooLargeError(
            f"{what} {size:,} bytes; a model of this config.json has at most about {honest:,}"
        )
    with _open_weights(weights) as f:
        names = set(f.keys())
        prefix = _prefix(family, names)
        key_map = family.key_map(guess.n_layers, prefix)
        head_names = _head_names(family, arch, names, weights.name)
        config = model_config(arch, has_head=bool(head_names), max_params=max_params)
        used = set(key_map.values()) | set(head_names.values())
        ignored = _check_names(family, prefix, names, used, weights.name)
        shapes = expected_shapes(config, arch.positions_in_file)
        head_shapes = MaskedLMHead.shapes(config.d_model, config.vocab_size)
        wanted = [(theirs, shapes[ours]) for ours, theirs in key_map.items()]
        wanted += [(theirs, head_shapes[ours]) for ours, theirs in head_names.items()]
        for theirs, shape in wanted:
            found = tuple(f.get_slice(theirs).get_shape())
            if found != shape:
                raise WeightsError(f"{theirs} has shape {found} but config.json implies {shape}")
    return WeightsPlan(config, key_map, head_names, ignored)


def _open_safetensors(path: Path):
    try:
        return safe_open(str(path), framework="pt")  # reads the header only
    except Exception as e:  # safetensors raises its own error type for a malformed header
        raise WeightsError(f"{path.name} is not a readable safetensors file ({e})") from None


def load_weights(
    weights: WeightFiles, family: Family, arch: Architecture, max_params: int
) -> tuple[Encoder, MaskedLMHead | None, tuple[tuple[str, str], ...]]:
    """The encoder, its masked-LM head (or None) and the tensors left out, from model.safetensors
    or its shards, after plan_weights' checks; each tensor's dtype and values checked as it is
    read."""
    plan = plan_weights(weights, family, arch, max_params)
    config = plan.config
    with _open_weights(weights) as f:

        class Lazy(dict):  # each tensor read from the file when asked for, not kept here
            def __missing__(self, key):
                return f.get_tensor(key)

            def __contains__(self, key):
                return key in plan.key_map.values() or key in plan.head_names.values()

        tensors = Lazy()
        model = encoder_from_tensors(
            config, plan.key_map, tensors, arch.position_offset, arch.positions_in_file
        )
        head = None
        if plan.head_names:
            head = MaskedLMHead(
                config.d_model, config.vocab_size, arch.head_activation, config.norm_eps
            )
            state = {}
            for ours, shape in MaskedLMHead.shapes(config.d_model, config.vocab_size).items():
                if ours in plan.head_names:
                    name = plan.head_names[ours]
                    state[ours] = checked(name, tensors[name], shape)
                else:  # tied: the decoder is the word embedding itself
                    state[ours] = model.embed.weight
            head.load_state_dict(state, strict=True, assign=True)
            head = head.eval().requires_grad_(False)
    return model, head, plan.ignored


def _head_names(family: Family, arch: Architecture, names: set, what: str) -> dict[str, str]:
    """MaskedLMHead parameter -> checkpoint tensor, for a checkpoint with a masked-LM head;
    empty without one. All of a head's tensors are there, or none (a decoder tied to the word
    embedding may be left out of the file)."""
    found = {}
    for ours, candidates in family.head_keys.items():
        present = [c for c in candidates if c in names]
        if present:
            found[ours] = present[0]
    if not set(found) - {"decoder.weight"}:
        return {}
    needed = set(family.head_keys) - ({"decoder.weight"} if arch.tie_word_embeddings else set())
    lacking = sorted(needed - set(found))
    if lacking:
        raise WeightsError(
            f"{what} has part of a masked-LM head but not "
            + ", ".join(family.head_keys[k][0] for k in lacking)
        )
    return found


def _check_names(
    family: Family, prefix: str, names: set, used: set, what: str
) -> tuple[tuple[str, str], ...]:
    """(name, why) of each tensor left out; WeightsError for a missing or unexpected one."""
    missing = sorted(used - names)
    ignored, unexpected = [], []
    for name in sorted(names - used):
        why = family.why_ignored(name, prefix)
        if why:
            ignored.append((name, why))
        else:
            unexpected.append(name)
    if missing or unexpected:
        raise WeightsError(
            f"{what} is not a {family.name} checkpoint of this config.json: "
            + (f"missing {', '.join(missing[:3])}" if missing else "")
            + ("; " if missing and unexpected else "")
            + (f"unexpected {', '.join(unexpected[:3])}" if unexpected else "")
        )
    return tuple(ignored)


def _token_name(value) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and 0 < len(value) <= 32 else None


def _has_tokenizer(files: dict[str, Path], family: Family) -> bool:
    """Whether the folder holds a tokenizer its family reads (not whether it is a good one)."""
    return (
        "tokenizer.json" in files
        or ("vocab.txt" in files and family.wordpiece)
        or ("vocab.json" in files and "merges.txt" in files and family.bpe_files)
    )


def _strip_of(value, default: tuple[bool, bool]) -> tuple[bool, bool]:
    """(lstrip, rstrip) of a special token as tokenizer_config.json may write it
    ({"content": "<mask>", "lstrip": true, ...}); default for a plain string."""
    if not isinstance(value, dict):
        return default
    return tuple(
        value[k] if isinstance(value.get(k), bool) else d
        for k, d in zip(("lstrip", "rstrip"), default, strict=True)
    )


def load_tokenizer(files: dict[str, Path], family: Family, max_pieces: int) -> PieceTokenizer:
    """The folder's tokenizer: tokenizer.json, or for WordPiece families a vocab.txt, or for
    byte-level BPE families (RoBERTa) a vocab.json + merges.txt."""
    settings = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        if name in files:
            data = read_json(files[name])
            refuse_remote_code(data, name)
            settings.update(data)
    base = family.specials
    specials = Specials(
        **{
            field: _token_name(settings.get(f"{field}_token")) or getattr(base, field)
            for field in ("cls", "sep", "pad", "unk", "mask")
        }
    )
    for name in TOKENIZER_FILES:
        if name in files and files[name].stat().st_size > MAX_TOKENIZER_BYTES:
            raise TooLargeError(
                f"{name} has {files[name].stat().st_size:,} bytes; at most "
                f"{MAX_TOKENIZER_BYTES:,} are read"
            )
    if "tokenizer.json" in files:
        return PieceTokenizer.from_file(files["tokenizer.json"], max_pieces, specials=specials)
    if "vocab.txt" in files and family.wordpiece:
        lowercase = settings.get("do_lower_case", True)
        strip = settings.get("strip_accents")
        chinese = settings.get("tokenize_chinese_chars", True)
        return PieceTokenizer.from_vocab_txt(
            files["vocab.txt"],
            max_pieces,
            lowercase=lowercase is not False,
            strip_accents=strip if isinstance(strip, bool) else None,
            chinese_chars=chinese is not False,
            specials=specials,
        )
    if family.bpe_files and ("vocab.json" in files or "merges.txt" in files):
        for have, lacks in (("vocab.json", "merges.txt"), ("merges.txt", "vocab.json")):
            if lacks not in files:
                raise MissingFileError(
                    f"the folder has {have} but no {lacks}: {family.name}'s byte-level BPE "
                    "tokenizer needs both (or tokenizer.json)"
                )
        prefix = settings.get("add_prefix_space")
        trim = settings.get("trim_offsets")
        return PieceTokenizer.from_bpe_files(
            files["vocab.json"],
            files["merges.txt"],
            max_pieces,
            add_prefix_space=prefix is True,
            trim_offsets=trim is not False,
            mask_strip=_strip_of(settings.get("mask_token"), (True, False)),
            specials=specials,
        )
    wanted = " or ".join(
        ["tokenizer.json"]
        + (["vocab.txt"] if family.wordpiece else [])
        + (["vocab.json + merges.txt"] if family.bpe_files else [])
    )
    raise MissingFileError(f"the folder has no tokenizer: {family.name} needs {wanted}")


def model_max_pieces(files: dict[str, Path], config: ModelConfig) -> int:
    """Word-pieces the model reads, specials included: its positions, or fewer when a
    sentence-transformers config (max_seq_length) or tokenizer_config.json (model_max_length)
    says so."""
    limit = config.max_len
    for name, key in (
        ("sentence_bert_config.json", "max_seq_length"),
        ("tokenizer_config.json", "model_max_length"),
    ):
        if name in files:
            value = read_json(files[name]).get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 3 <= value < limit:
                limit = value
    return limit


def licence_of(files: dict[str, Path]) -> str | None:
    """The licence a model card's front matter names ("license: apache-2.0"), else a LICENSE
    file's presence, else None."""
    if "README.md" in files and files["README.md"].stat().st_size <= MAX_JSON_BYTES:
        text = files["README.md"].read_text(encoding="utf-8", errors="replace")
        front = re.match(r"---\s*\n(.*?)\n---", text, re.S)
        if front:
            found = re.search(r"^licen[cs]e:\s*(\S.*)$", front.group(1), re.M)
            if found:
                return found.group(1).strip().strip("'\"")[:64]
    for name in ("LICENSE", "LICENSE.txt", "LICENSE.md"):
        if name in files:
            return f"see {name}"
    return None


def _read_config(files: dict[str, Path]) -> tuple[dict, Family, Architecture]:
    raw = read_json(files["config.json"])
    refuse_remote_code(raw, "config.json")
    family = family_of(raw)
    try:
        arch = family.read(raw)
    except PretrainedError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"config.json is not a usable {family.name} config ({e})") from None
    return raw, family, arch


def open_folder(
    folder: str | Path, device: str | torch.device = "cpu", max_params: int = MAX_PARAMS
) -> LoadedEncoder:
    """A model folder as a LoadedEncoder; a PretrainedError subclass saying why not."""
    folder = Path(folder)
    files = scan(folder)
    raw, family, arch = _read_config(files)
    model, head, ignored = load_weights(weight_files(folder, files), family, arch, max_params)
    config = model.config
    max_pieces = model_max_pieces(files, config)
    tokenizer = load_tokenizer(files, family, max_pieces)
    if tokenizer.vocab_size > config.vocab_size:
        raise TokenizerError(
            f"the tokenizer has {tokenizer.vocab_size:,} pieces, the model only "
            f"{config.vocab_size:,}: some pieces would have no embedding"
        )
    return LoadedEncoder(
        name=folder.name,
        family=family.name,
        model_type=raw["model_type"],
        model=model.to(device),
        tokenizer=tokenizer,
        head=None if head is None else head.to(device),
        max_pieces=max_pieces,
        licence=licence_of(files),
        n_params=config.n_params,
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


def describe_folder(folder: str | Path, max_params: int = MAX_PARAMS) -> FolderInfo:
    """A model folder's FolderInfo, with every refusal open_folder would make that needs no
    tensor data (files, config, sizes, names and shapes in the header)."""
    folder = Path(folder)
    files = scan(folder)
    raw, family, arch = _read_config(files)
    weights = weight_files(folder, files)
    plan = plan_weights(weights, family, arch, max_params)
    if not _has_tokenizer(files, family):
        load_tokenizer(files, family, 3)  # raises MissingFileError, saying which file
    return FolderInfo(
        name=folder.name,
        path=folder,
        family=family.name,
        model_type=raw["model_type"],
        config=plan.config,
        n_params=plan.config.n_params,
        masked_lm=bool(plan.head_names),
        max_pieces=model_max_pieces(files, plan.config),
        licence=licence_of(files),
        weights_bytes=weights.size,
    )


@dataclass(frozen=True)
class Refused:
    """A folder under the models folder that is not offered, and why (a message to show)."""

    name: str
    path: Path
    reason: str


def list_folder(root: str | Path, max_params: int = MAX_PARAMS) -> list[FolderInfo | Refused]:
    """Each subfolder of root (e.g. the server's TFVIZ_PRETRAINED_DIR), by name: described, or
    refused with the reason. Nothing is loaded; hidden folders (".cache") are skipped."""
    root = Path(root)
    if not root.is_dir():
        raise MissingFileError(f"{root} is not a folder")
    out: list[FolderInfo | Refused] = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            out.append(describe_folder(sub, max_params))
        except PretrainedError as e:
            out.append(Refused(sub.name, sub, str(e)))
        except OSError as e:  # unreadable files: said, not raised, so the rest is listed
            out.append(Refused(sub.name, sub, f"cannot be read ({e})"))
        if len(out) >= MAX_FILES:
            break
    return out
