"""A folder's tokenizer: tokenizer.json, a WordPiece vocab.txt or a byte-level BPE vocab.json +
merges.txt, with the special tokens and limits tokenizer_config.json and its neighbours name."""

from __future__ import annotations

from pathlib import Path

from tfviz.core.config import ModelConfig
from tfviz.hf.errors import MissingFileError, TooLargeError
from tfviz.hf.family import Family, Specials
from tfviz.hf.files import read_json, refuse_remote_code
from tfviz.hf.tokenizer import PieceTokenizer

MAX_TOKENIZER_BYTES = 64 << 20  # each of TOKENIZER_FILES (XLM-R's tokenizer.json is 17 MB)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "merges.txt")


def _token_name(value) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and 0 < len(value) <= 32 else None


def tokenizer_settings(files: dict[str, Path]) -> dict:
    """special_tokens_map.json and tokenizer_config.json read as one dict (the latter wins),
    each refused if it asks for remote code."""
    settings = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        if name in files:
            data = read_json(files[name])
            refuse_remote_code(data, name)
            settings.update(data)
    return settings


def has_tokenizer(files: dict[str, Path], family: Family) -> bool:
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
    settings = tokenizer_settings(files)
    base = family.specials
    specials = Specials(
        **{
            field: _token_name(settings.get(f"{field}_token")) or getattr(base, field)
            for field in ("cls", "sep", "pad", "unk", "mask")
        }
    )
    for name in TOKENIZER_FILES:
        if name in files and files[name].stat().st_size > MAX_TOKENIZER_BYTES:
            size = files[name].stat().st_size
            raise TooLargeError("file_too_large", file=name, size=size, most=MAX_TOKENIZER_BYTES)
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
                raise MissingFileError("bpe_half", have=have, lacks=lacks, family=family.name)
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
    # Which files would do: tokenizer.json always, vocab.txt for WordPiece, vocab.json +
    # merges.txt for byte-level BPE (the code names the choice, the catalogue words it).
    wordpiece, bpe = family.wordpiece, family.bpe_files
    raise MissingFileError(
        "no_tokenizer_wordpiece_bpe" if wordpiece and bpe
        else "no_tokenizer_wordpiece" if wordpiece
        else "no_tokenizer_bpe" if bpe
        else "no_tokenizer",
        family=family.name,
    )  # fmt: skip


def load_decoder_tokenizer(
    files: dict[str, Path], family: Family, max_pieces: int, add_bos: bool
) -> PieceTokenizer:
    """A decoder's tokenizer.json, with the beginning, end and padding tokens
    tokenizer_config.json names (padding: the end-of-text token when it names none, as is
    usual for GPT-2 and Llama); a BOS token before each text where the family or
    tokenizer_config.json's add_bos_token says so."""
    settings = tokenizer_settings(files)
    for name in TOKENIZER_FILES:
        if name in files and files[name].stat().st_size > MAX_TOKENIZER_BYTES:
            size = files[name].stat().st_size
            raise TooLargeError("file_too_large", file=name, size=size, most=MAX_TOKENIZER_BYTES)
    bos = _token_name(settings.get("bos_token")) or family.bos
    eos = _token_name(settings.get("eos_token")) or family.eos
    pad = _token_name(settings.get("pad_token")) or eos
    unk = _token_name(settings.get("unk_token")) or family.unk or ""
    if isinstance(settings.get("add_bos_token"), bool):
        add_bos = settings["add_bos_token"]
    specials = Specials(cls=bos, sep=eos, pad=pad, unk=unk, mask="")
    options = dict(specials=specials, causal=True, add_bos=add_bos)
    if "tokenizer.json" in files:
        return PieceTokenizer.from_file(files["tokenizer.json"], max_pieces, **options)
    if family.bpe_files and "vocab.json" in files and "merges.txt" in files:
        vocab, merges = files["vocab.json"], files["merges.txt"]
        return PieceTokenizer.from_gpt2_files(vocab, merges, max_pieces, **options)
    raise MissingFileError("no_tokenizer_bpe" if family.bpe_files else "no_tokenizer",
                           family=family.name)  # fmt: skip


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
