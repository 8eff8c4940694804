"""A folder's weights: one model.safetensors or the shards its index names, checked from the
headers against config.json before any tensor is read, then read into tfviz's Transformer.

Every check that can be made from sizes is made before anything is allocated: the config's sizes
against tfviz's limits and a parameter budget, the weights' size against what the config implies,
every tensor's name, shape and dtype from the safetensors header before its data is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from safetensors import safe_open

from tfviz.core.config import ConfigValueError, ModelConfig
from tfviz.core.model import Transformer
from tfviz.hf.errors import (
    ConfigError,
    MissingFileError,
    PretrainedError,
    TooLargeError,
    UnsafeFileError,
    WeightsError,
)
from tfviz.hf.families import Architecture, Family
from tfviz.hf.files import MAX_JSON_BYTES, WEIGHTS, WEIGHTS_INDEX, loads_json
from tfviz.hf.mlm import MaskedLMHead
from tfviz.hf.weights import checked, encoder_from_tensors, expected_shapes

# Limits of what a classroom server opens. XLM-R base (278 M parameters, 1.1 GB in float32) is
# the largest model a class is meant to open; BERT-large and larger are refused by
# tfviz.core.config.LIMITS (12 layers, D <= 1024) before this budget is even reached.
MAX_PARAMS = 300_000_000


def refused_config(e: ValueError) -> PretrainedError:
    """A folder's config that ModelConfig refused: too large where a size is past its limit,
    else invalid; the reason worded by the catalogue."""
    if isinstance(e, ConfigValueError) and e.code.startswith("out_of_range"):
        return TooLargeError("config_invalid", why=e)
    return ConfigError("config_invalid", why=e)


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
        raise refused_config(e) from None
    head = config.d_model * (config.d_model + 3) + config.vocab_size if has_head else 0
    total = config.n_params + head  # the decoder is counted once: tied to the embedding
    if total > max_params:
        raise TooLargeError("too_many_params", n=total, most=max_params)
    return config


def _prefix(family: Family, names) -> str:
    """The prefix the encoder's tensors carry: the family's ("bert.") when a head was saved
    with them (BertForMaskedLM), none for a bare encoder (BertModel, MiniLM)."""
    if family.prefix + family.embedding in names:
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
        raise TooLargeError("file_too_large", file=WEIGHTS_INDEX, size=size, most=MAX_JSON_BYTES)

    try:
        text = index.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError("cannot_read", file=WEIGHTS_INDEX, why=e) from None
    data = loads_json(text, WEIGHTS_INDEX)
    where = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(where, dict) or not where:
        raise WeightsError("no_weight_map", file=WEIGHTS_INDEX)
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
        raise UnsafeFileError("shard_not_safetensors", file=WEIGHTS_INDEX, shard=repr(shard))
    if "/" in shard or "\\" in shard or "\x00" in shard or shard.startswith("."):
        raise UnsafeFileError("shard_outside", file=WEIGHTS_INDEX, shard=repr(shard))
    if shard not in files:
        raise MissingFileError("shard_missing", file=WEIGHTS_INDEX, shard=shard)
    path = files[shard]
    if root not in path.resolve().parents:
        raise UnsafeFileError("shard_link_outside", shard=shard)
    return path


@contextmanager
def open_weights(weights: WeightFiles) -> Iterator[_Tensors]:
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
                    raise WeightsError("tensor_in_two_shards", tensor=key)
                self._in[key], home[key] = f, shard
        for key, shard in home.items():
            if weights.where and weights.where.get(key) != shard:
                put = weights.where.get(key)
                if put:
                    raise WeightsError(
                        "tensor_elsewhere", shard=shard, tensor=key, file=WEIGHTS_INDEX, put=put
                    )
                raise WeightsError("tensor_unindexed", shard=shard, tensor=key, file=WEIGHTS_INDEX)
        for key, shard in weights.where.items():
            if key not in self._in:
                raise WeightsError(
                    "shard_lacks_tensor", file=WEIGHTS_INDEX, tensor=key, shard=shard
                )

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
    key_map: dict[str, str]  # Transformer parameter -> tensor name
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
        raise TooLargeError(
            "shards_too_large" if weights.where else "weights_too_large",
            file=weights.name, size=size, most=honest,
        )  # fmt: skip
    with open_weights(weights) as f:
        names = set(f.keys())
        prefix = _prefix(family, names)
        key_map = family.key_map(guess.n_layers, prefix)
        head_names = _head_names(family, arch, names, weights.name)
        config = model_config(arch, has_head=bool(head_names), max_params=max_params)
        used = set(key_map.values()) | set(head_names.values())
        ignored = check_names(family, prefix, names, used, weights.name)
        shapes = expected_shapes(config, arch.positions_in_file)
        head_shapes = MaskedLMHead.shapes(config.d_model, config.vocab_size)
        wanted = [(theirs, shapes[ours]) for ours, theirs in key_map.items()]
        wanted += [(theirs, head_shapes[ours]) for ours, theirs in head_names.items()]
        for theirs, shape in wanted:
            found = tuple(f.get_slice(theirs).get_shape())
            if found != shape:
                raise WeightsError("wrong_shape", tensor=theirs, found=found, shape=shape)
    return WeightsPlan(config, key_map, head_names, ignored)


def _open_safetensors(path: Path):
    try:
        return safe_open(str(path), framework="pt")  # reads the header only
    except Exception as e:  # safetensors raises its own error type for a malformed header
        raise WeightsError("not_safetensors", file=path.name, why=e) from None


def load_weights(
    weights: WeightFiles, family: Family, arch: Architecture, max_params: int
) -> tuple[Transformer, MaskedLMHead | None, tuple[tuple[str, str], ...]]:
    """The encoder, its masked-LM head (or None) and the tensors left out, from model.safetensors
    or its shards, after plan_weights' checks; each tensor's dtype and values checked as it is
    read."""
    plan = plan_weights(weights, family, arch, max_params)
    config = plan.config
    with open_weights(weights) as f:

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
            "partial_head", file=what, lacking=[family.head_keys[k][0] for k in lacking]
        )
    return found


def check_names(
    family: Family, prefix: str, names: set, used: set, what: str
) -> tuple[tuple[str, str], ...]:
    """(name, why) of each tensor left out; WeightsError for a missing or unexpected one. family:
    an encoder family, or a decoder family (tfviz.hf.decoders): each says why it may leave a
    tensor out."""
    missing = sorted(used - names)
    ignored, unexpected = [], []
    for name in sorted(names - used):
        why = family.why_ignored(name, prefix)
        if why:
            ignored.append((name, why))
        else:
            unexpected.append(name)
    if missing or unexpected:
        values = {"missing": missing[:3]} if missing else {}
        values |= {"unexpected": unexpected[:3]} if unexpected else {}
        raise WeightsError(
            "wrong_tensors_missing_unexpected" if missing and unexpected
            else "wrong_tensors_missing" if missing else "wrong_tensors_unexpected",
            file=what, family=family.name, **values,
        )  # fmt: skip
    return tuple(ignored)
