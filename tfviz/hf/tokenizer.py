"""Text to word-pieces for a pretrained encoder: [CLS] pieces [SEP] (or <s> pieces </s>), cut to the
model's limit, with notes saying what was cut, unknown, or typed as a special token.

One class for every family: the `tokenizers` library does the splitting from the model's own
tokenizer.json (WordPiece for BERT and DistilBERT, byte-level BPE for RoBERTa, Unigram for XLM-R),
from a BERT vocab.txt, or from a RoBERTa vocab.json + merges.txt. Its added (special) tokens are
removed before any text is split, so text the user types can never produce a special token: a
typed "[SEP]" is "[", "sep", "]". The frame's specials are added here by id. The one exception is
fill-in-the-mask: encode(text, mask=...) turns each occurrence of the named marker into the mask
token, and nothing else.

Byte-level BPE (RoBERTa, GPT-2-style tokenizer.json) spells its pieces in a 256-character
stand-in alphabet for bytes ("Ġcat" is " cat", "æĪĳ" is the bytes of "我"). Pieces are shown
decoded instead (shown_pieces): ids, and so everything the model reads, are unchanged.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
)
from torch import Tensor

from tfviz.core.tasks import InputError
from tfviz.hf.errors import TokenizerError
from tfviz.hf.families import BERT_SPECIALS, ROBERTA_SPECIALS, Specials
from tfviz.hf.files import loads_json

MAX_CHARS = 100_000  # a longer text is refused before tokenising (it would be cut anyway)
MAX_TEXTS = 64  # texts in one batch
MINILM_VOCABULARY = "lower-case English word-pieces"  # what MiniLM's [UNK] note says it lacks


@dataclass(frozen=True)
class Pieces:
    """One text as the model reads it: [CLS], its word-pieces (cut to fit), [SEP]."""

    text: str  # as typed
    ids: tuple[int, ...]  # (T,) word-piece ids, [CLS] first and [SEP] last
    # (T,) the word-pieces as shown: the vocabulary's spelling ("##" marks a piece continuing a
    # word, "▁" one starting after a space), byte-level pieces decoded (see shown_pieces)
    pieces: tuple[str, ...]
    labels: tuple[str, ...]  # (T,) unique axis labels: a repeated piece gets " (position)"
    spans: tuple[tuple[int, int], ...]  # (T,) character span of each piece in text; (0, 0): special
    cut_at: int | None  # characters of text the model read when it was cut; None: all of it
    n_unknown: int  # pieces that are [UNK]: characters the vocabulary lacks
    notes: tuple[str, ...]  # what to tell the reader: the cut, unknown pieces, typed specials
    masked: tuple[int, ...] = ()  # positions holding the mask token (encode(text, mask=...))

    @property
    def truncated(self) -> bool:
        return self.cut_at is not None


@dataclass(frozen=True)
class Batch:
    """Texts padded to one length, ready for Transformer.forward(ids, pad_mask)."""

    ids: Tensor  # (B, T) int64, padded with [PAD]
    pad_mask: Tensor  # (B, T) bool, True where a position is padding
    items: tuple[Pieces, ...]  # (B,) each text's pieces, labels and notes


class PieceTokenizer:
    """A model's tokenizer, framing each text with its specials (BERT: [CLS] ... [SEP]).

    spec: the tokenizer.json contents. specials: the names of the model's special tokens.
    vocabulary: a few words on what the vocabulary holds, for the [UNK] note ("" says nothing).
    """

    def __init__(
        self,
        spec: dict,
        max_pieces: int = 128,
        specials: Specials = BERT_SPECIALS,
        vocabulary: str = "",
        causal: bool = False,
        add_bos: bool = False,
    ):
        if not isinstance(spec, dict):
            raise TokenizerError("not_object", file="tokenizer.json")
        try:
            full = Tokenizer.from_str(json.dumps(spec))
            # Only the normaliser, the pre-tokeniser and the vocabulary are kept for text: typed
            # "[SEP]" is then "[", "sep", "]", and cutting and padding are done (and reported)
            # here. The specials' ids come from the full tokenizer (XLM-R's <mask> exists only
            # as an added token).
            stripped = dict(spec, added_tokens=[], post_processor=None, truncation=None)
            self._tok = Tokenizer.from_str(json.dumps(dict(stripped, padding=None)))
        except Exception as e:  # the tokenizers library raises its own exception types
            raise TokenizerError("tokenizer_unreadable", why=e) from None
        # A decoder's text is framed by at most a beginning-of-sequence token (causal: cls
        # names it, sep its end-of-text token), padded on the left, and its byte-level
        # vocabulary may have no unknown piece at all.
        needed = (specials.cls, specials.sep, specials.pad, specials.unk)
        if causal:
            needed = (specials.cls,) * add_bos + (specials.sep, specials.pad)
        ids = {name: full.token_to_id(name) for name in needed}
        if None in ids.values():
            raise TokenizerError(
                "no_special_piece", pieces=[n for n, i in ids.items() if i is None]
            )
        self.cls_id, self.sep_id = full.token_to_id(specials.cls), full.token_to_id(specials.sep)
        self.pad_id, self.unk_id = full.token_to_id(specials.pad), full.token_to_id(specials.unk)
        self.causal = causal
        # The ids around a text, and their names as the charts show them.
        self.before = (self.cls_id,) if not causal or add_bos else ()
        self.after = () if causal else (self.sep_id,)
        self.mask_id = full.token_to_id(specials.mask)  # None: no masked-LM use
        # Whether the mask token swallows the spaces beside it, as its added-token entry says
        # (RoBERTa's "<mask>" has lstrip: "the <mask>" is "the", "<mask>", not "the", "Ġ", ...).
        entry = next(
            (t for t in spec.get("added_tokens") or () if isinstance(t, dict)
             and t.get("content") == specials.mask),
            {},
        )  # fmt: skip
        self.mask_strip = (bool(entry.get("lstrip")), bool(entry.get("rstrip")))
        self.specials = specials
        self.vocabulary = vocabulary
        # Ids run to the largest one (a vocab.txt with a repeated line has gaps): the model
        # needs an embedding row for each.
        self.vocab_size = max(full.get_vocab(with_added_tokens=True).values(), default=-1) + 1
        self._full = full
        self.byte_level = _is_byte_level(spec)
        # SentencePiece's byte fallback (Llama's tokenizer.json): a character outside the
        # vocabulary is spelled as its UTF-8 bytes, one piece each ("<0xE6>").
        model = spec.get("model")
        self.byte_fallback = isinstance(model, dict) and model.get("byte_fallback") is True
        # A character vocabulary (tfviz's language models: BPE without merges, a piece per
        # character): the library drops a character it lacks without a word, so encode refuses
        # such a text, naming the characters.
        self.alphabet = character_alphabet(spec)
        if max_pieces < len(self.before) + len(self.after) + 1:
            raise ValueError("max_pieces must leave room for [CLS], one piece and [SEP]")
        self.max_pieces = max_pieces

    @classmethod
    def from_file(cls, path: Path, max_pieces: int = 128, **kwargs) -> PieceTokenizer:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise TokenizerError("not_text", file=Path(path).name, why=e) from None
        spec = loads_json(text, Path(path).name, TokenizerError)
        return cls(spec, max_pieces, **kwargs)

    @classmethod
    def from_vocab_txt(
        cls,
        path: Path,
        max_pieces: int = 128,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        chinese_chars: bool = True,
        **kwargs,
    ) -> PieceTokenizer:
        """BERT's tokenizer from a vocab.txt (one piece a line, the line number its id), built
        as transformers' BertTokenizerFast builds it: BERT normaliser, BERT pre-tokeniser,
        WordPiece with "##" continuations."""
        try:
            lines = Path(path).read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as e:
            raise TokenizerError("not_text", file=Path(path).name, why=e) from None
        if lines and lines[-1] == "":
            lines.pop()  # the final newline
        vocab = {}
        for i, piece in enumerate(lines):
            vocab[piece.rstrip("\r")] = i  # a repeated line takes its last id, as in transformers
        specials = kwargs.get("specials", BERT_SPECIALS)
        if specials.unk not in vocab:
            raise TokenizerError("no_unk_line", file=Path(path).name, unk=specials.unk)
        tok = Tokenizer(
            models.WordPiece(vocab, unk_token=specials.unk, max_input_chars_per_word=100)
        )
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=chinese_chars,
            strip_accents=strip_accents,
            lowercase=lowercase,
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece(prefix="##")
        return cls(json.loads(tok.to_str()), max_pieces, **kwargs)

    @classmethod
    def from_bpe_files(
        cls,
        vocab_path: Path,
        merges_path: Path,
        max_pieces: int = 128,
        add_prefix_space: bool = False,
        trim_offsets: bool = True,
        mask_strip: tuple[bool, bool] = (True, False),
        **kwargs,
    ) -> PieceTokenizer:
        """RoBERTa's tokenizer from a vocab.json (piece -> id) and merges.txt (one merge a line),
        as the slow RobertaTokenizer saves them, built as transformers' RobertaTokenizerFast
        builds it: byte-level BPE, ByteLevel pre-tokeniser (add_prefix_space False) and decoder,
        <s> ... </s> around a text, the specials registered as special tokens, the mask token
        swallowing the space before it (mask_strip: its lstrip, rstrip; RobertaTokenizer's
        default is lstrip)."""
        specials = kwargs.get("specials", ROBERTA_SPECIALS)
        try:
            vocab, merges = models.BPE.read_file(str(vocab_path), str(merges_path))
            tok = Tokenizer(
                models.BPE(
                    vocab,
                    merges,
                    unk_token=specials.unk if specials.unk in vocab else None,
                    continuing_subword_prefix="",
                    end_of_word_suffix="",
                    fuse_unk=False,
                )
            )
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
            tok.decoder = decoders.ByteLevel()
            plain = dict.fromkeys((specials.cls, specials.pad, specials.sep, specials.unk))
            plain.pop(specials.mask, None)
            lstrip, rstrip = mask_strip
            tok.add_special_tokens(
                [AddedToken(name, special=True, normalized=False) for name in plain]
                + [
                    AddedToken(
                        specials.mask, lstrip=lstrip, rstrip=rstrip, special=True, normalized=False
                    )
                ]  # fmt: skip
            )
            tok.post_processor = processors.RobertaProcessing(
                (specials.sep, tok.token_to_id(specials.sep)),
                (specials.cls, tok.token_to_id(specials.cls)),
                trim_offsets,
                add_prefix_space,
            )
            spec = json.loads(tok.to_str())
        except Exception as e:  # the tokenizers library raises its own exception types
            raise TokenizerError(
                "not_bpe", vocab=Path(vocab_path).name, merges=Path(merges_path).name, why=e
            ) from None
        return cls(spec, max_pieces, **kwargs)

    @classmethod
    def from_gpt2_files(
        cls, vocab_path: Path, merges_path: Path, max_pieces: int = 128, **kwargs
    ) -> PieceTokenizer:
        """GPT-2's tokenizer from a vocab.json and merges.txt, as the slow GPT2Tokenizer saves
        them: byte-level BPE, ByteLevel pre-tokeniser (no prefix space) and decoder, its
        end-of-text token a special token; nothing around a text."""
        specials = kwargs.get("specials")
        try:
            vocab, merges = models.BPE.read_file(str(vocab_path), str(merges_path))
            tok = Tokenizer(
                models.BPE(vocab, merges, continuing_subword_prefix="", end_of_word_suffix="")
            )
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            tok.decoder = decoders.ByteLevel()
            names = dict.fromkeys(n for n in (specials.cls, specials.sep, specials.pad) if n)
            tok.add_special_tokens([AddedToken(n, special=True, normalized=False) for n in names])
            spec = json.loads(tok.to_str())
        except Exception as e:  # the tokenizers library raises its own exception types
            raise TokenizerError(
                "not_bpe", vocab=Path(vocab_path).name, merges=Path(merges_path).name, why=e
            ) from None
        return cls(spec, max_pieces, **kwargs)

    def piece(self, piece_id: int) -> str:
        """A piece id as the vocabulary spells it ("##s", "Ġcat")."""
        return self._full.id_to_token(piece_id) or f"<{piece_id}>"  # a padded vocabulary has gaps

    def piece_text(self, piece_id: int) -> str:
        """A piece on its own as text (a fill-in-the-mask guess): WordPiece and SentencePiece as
        their decoder gives them ("▁cat" -> "cat"); a byte-level piece as shown_pieces shows it
        ("Ġcat" -> "▁cat", "æĪĳ" -> "我"), with any bytes of an incomplete character marked
        instead of decoded to "\ufffd" (shown_piece)."""
        if self.byte_level:
            piece = self._full.id_to_token(piece_id)
            if piece and all(c in BYTE_OF for c in piece):
                return shown_piece(piece)
        if self.byte_fallback:
            piece = self._full.id_to_token(piece_id) or ""
            if BYTE_PIECE.fullmatch(piece):  # alone a byte says a character only below 0x80
                byte = fallback_byte(piece)
                return _visible(chr(byte)) if byte < 0x80 else piece
        return self._full.decode([piece_id], skip_special_tokens=False).strip()

    def decode_ids(self, ids: list[int]) -> str:
        """Token ids as the text they spell (a decoder's continuation), specials kept."""
        return self._full.decode(list(ids), skip_special_tokens=False)

    def _split(self, text: str, mask: str | None):
        """ids, pieces, spans of text's word-pieces; each occurrence of mask becomes the mask
        token (the whitespace beside it dropped where the mask token's lstrip/rstrip say)."""
        if mask is None:
            enc = self._tok.encode(text, add_special_tokens=False)
            return list(enc.ids), list(enc.tokens), [tuple(s) for s in enc.offsets]
        if self.mask_id is None:
            raise TokenizerError("no_mask_token", mask=self.specials.mask)
        ids, pieces, spans = [], [], []
        start = 0
        parts = text.split(mask)
        lstrip, rstrip = self.mask_strip
        for n, part in enumerate(parts):
            at = start
            if n < len(parts) - 1 and lstrip:
                part = part.rstrip()
            if n > 0 and rstrip:
                at += len(part) - len(part.lstrip())
                part = part.lstrip()
            if part:
                enc = self._tok.encode(part, add_special_tokens=False)
                ids += enc.ids
                pieces += enc.tokens
                spans += [(at + a, at + b) for a, b in enc.offsets]
            if n < len(parts) - 1:
                at = text.index(mask, start)
                ids.append(self.mask_id)
                pieces.append(self.specials.mask)
                spans.append((at, at + len(mask)))
                start = at + len(mask)
        return ids, pieces, spans

    def encode(self, text: str, mask: str | None = None) -> Pieces:
        """Word-pieces of one text; ValueError with a message for text that has none.

        mask: a marker (e.g. "[MASK]") whose occurrences in text become the mask token.
        """
        self._check_text(text)
        all_ids, all_pieces, all_spans = self._split(text, mask)
        spelled = all_pieces  # as the vocabulary spells them, for the charts' hover
        if self.byte_level:
            # Decoded over the whole text before any cut: a character split across pieces is
            # shown by the piece holding its first byte, whatever is cut after it.
            all_pieces = shown_pieces(all_pieces, self.mask_id, all_ids)
        elif self.byte_fallback:
            all_pieces = shown_fallback_pieces(all_pieces)
        if not all_ids:
            raise InputError("no_pieces")
        sp = self.specials
        room = self.max_pieces - len(self.before) - len(self.after)  # [CLS] and [SEP] always fit
        ids, pieces, spans = all_ids[:room], all_pieces[:room], all_spans[:room]
        notes = []
        cut_at = None
        if len(all_ids) > room:
            cut_at = spans[-1][1]
            notes.append(self._cut_note(text, len(all_ids), room, pieces[-1], cut_at))
        n_unknown = 0 if self.unk_id is None else sum(i == self.unk_id for i in ids)
        if n_unknown:
            notes.append(self._unknown_note(text, ids, spans, n_unknown))
        typed = self._typed_note(text, mask)
        if typed:
            notes.append(typed)
        first = len(self.before)
        masked = tuple(
            n + first for n, i in enumerate(ids) if mask is not None and i == self.mask_id
        )
        before = (sp.cls,) * first
        after = (sp.sep,) * len(self.after)
        ids = (*self.before, *ids, *self.after)
        pieces = (*before, *pieces, *after)
        spelled = (*before, *spelled[:room], *after)
        spans = (*((0, 0),) * first, *(tuple(s) for s in spans), *((0, 0),) * len(after))
        return Pieces(
            text=text,
            ids=ids,
            pieces=pieces,
            labels=unique_labels(pieces, spelled),
            spans=spans,
            cut_at=cut_at,
            n_unknown=n_unknown,
            notes=tuple(notes),
            masked=masked,
        )

    def _check_text(self, text: str) -> None:
        """InputError unless text is a string this tokenizer may read: not too long, encodable
        as UTF-8, and within the alphabet where the model has one."""
        if not isinstance(text, str):
            kind = type(text).__name__
            raise InputError("not_text", type=kind)
        if len(text) > MAX_CHARS:
            raise InputError(
                "too_many_chars",
                length=len(text),
                limit=MAX_CHARS,
                pieces=self.max_pieces - 2,
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("not_unicode") from None
        if self.alphabet is not None:
            outside = list(dict.fromkeys(c for c in text if c not in self.alphabet))
            if outside:
                raise InputError(
                    "outside_alphabet",
                    chars=" ".join(map(char_code, outside[:8])) + (" …" if outside[8:] else ""),
                    n=len(outside),
                    size=len(self.alphabet),
                    alphabet="".join(sorted(self.alphabet)).replace("\n", "↵"),
                )

    def _cut_note(self, text: str, n_pieces: int, room: int, last: str, cut_at: int) -> str:
        """Where a text of n_pieces word-pieces was cut to the room the model has, and what of
        it is not read (last: the last piece read)."""
        sp = self.specials
        rest = " ".join(text[cut_at:].split())
        return (
            f"The text has {n_pieces} word-pieces; the model reads at most {room} (plus "
            f"{sp.cls} and {sp.sep}), so it was cut after word-piece {room} ({last!r}), "
            f"at character {cut_at} of {len(text)}. Not read: {_clip(rest, 40)!r}."
        )

    def _unknown_note(self, text: str, ids: list, spans: list, n_unknown: int) -> str:
        """How many of the pieces read are the unknown piece, and the text each stands for."""
        unknown = dict.fromkeys(  # each unknown stretch of text once, in order
            text[a:b] for i, (a, b) in zip(ids, spans, strict=True) if i == self.unk_id
        )
        what = f" ({self.vocabulary})" if self.vocabulary else ""
        return (
            f"{n_unknown} of {len(ids)} word-pieces are {self.specials.unk}: the model's "
            f"vocabulary{what} has no piece for {_clip(' '.join(unknown), 40)}."
        )

    def _typed_note(self, text: str, mask: str | None) -> str | None:
        """A note when text spells a special token's name (mask markers aside): it is read as
        plain characters, not as that token. None when it spells none."""
        sp = self.specials
        upper = text.upper() if mask is None else text.replace(mask, " ").upper()
        typed = [name for name in sp.names if name and name.upper() in upper]
        if not typed:
            return None
        return (
            f"{', '.join(typed)} in the text is read as plain characters (brackets and "
            "letters), not as the model's special token: only the "
            f"{sp.cls} and {sp.sep} around the text are special."
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
        """Already encoded texts padded with [PAD] to the longest, as one Batch: on the right,
        or for a decoder on the left, as transformers pads one, so that every text's next token
        is read in the last column."""
        T = max(len(p.ids) for p in items)
        ids = torch.full((len(items), T), self.pad_id, dtype=torch.long)
        pad_mask = torch.ones(len(items), T, dtype=torch.bool)
        for b, p in enumerate(items):
            at = slice(T - len(p.ids), T) if self.causal else slice(0, len(p.ids))
            ids[b, at] = torch.tensor(p.ids)
            pad_mask[b, at] = False
        return Batch(ids=ids.to(device), pad_mask=pad_mask.to(device), items=tuple(items))


class WordPieceTokenizer(PieceTokenizer):
    """BERT's uncased word-piece tokenizer as all-MiniLM-L6-v2 ships it (tokenizer.json)."""

    def __init__(self, spec: dict, max_pieces: int = 128, **kwargs):
        kwargs.setdefault("vocabulary", MINILM_VOCABULARY)
        super().__init__(spec, max_pieces, **kwargs)


# GPT-2's byte-level alphabet, as `tokenizers` (pre_tokenizers.ByteLevel) and transformers
# build it: printable bytes stand for themselves, the other 68 (space, control characters, a few
# Latin-1 ones) for the characters from U+0100 on, in byte order. BYTE_OF: character -> byte.
_PRINTABLE = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
BYTE_OF = {chr(b): b for b in _PRINTABLE} | {
    chr(0x100 + n): b for n, b in enumerate(b for b in range(256) if b not in _PRINTABLE)
}
WORD_START = "▁"  # shown for a space in a byte-level piece (" cat" -> "▁cat")
BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")  # a SentencePiece byte-fallback piece


def fallback_byte(piece: str) -> int:
    """The byte a byte-fallback piece ("<0xE6>", BYTE_PIECE) stands for."""
    return int(piece[3:5], 16)


CONTINUED = "…"  # shown for the rest of a character whose first byte an earlier piece holds


def character_alphabet(spec: dict) -> dict[str, int] | None:
    """The characters of a character-level vocabulary (a BPE model without merges whose every
    piece but the added tokens is one character) with their ids, or None for any other
    tokenizer."""
    model = spec.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE" or model.get("merges"):
        return None
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not vocab:
        return None
    added = {t.get("content") for t in spec.get("added_tokens") or () if isinstance(t, dict)}
    pieces = {p: i for p, i in vocab.items() if p not in added}
    if not pieces or any(len(p) != 1 for p in pieces):
        return None
    return pieces


def char_code(ch: str) -> str:
    """A character as a refusal names it in any language: itself and its code point, or the
    code point alone when it is invisible ('我' U+6211, U+0007)."""
    code = f"U+{ord(ch):04X}"
    return f"'{ch}' {code}" if ch.isprintable() and not ch.isspace() else code


def _is_byte_level(spec: dict) -> bool:
    """True when the tokenizer.json splits text into bytes (a ByteLevel pre-tokeniser or
    decoder, alone or in a Sequence): its pieces are spelled in the byte alphabet."""

    def has(part) -> bool:
        if not isinstance(part, dict):
            return False
        if part.get("type") == "ByteLevel":
            return True
        inner = part.get("pretokenizers") or part.get("decoders") or ()
        return any(has(p) for p in inner) if isinstance(inner, list) else False

    return has(spec.get("pre_tokenizer")) or has(spec.get("decoder"))


def shown_pieces(pieces: list[str], mask_id: int | None, ids: list[int]) -> list[str]:
    """Byte-level pieces as readable text: "Ġcat" -> "▁cat", "æĪĳ" -> "我".

    Each run of pieces between mask tokens is the UTF-8 of a stretch of the text, so decoding
    the run is exact. A space is shown as "▁", as XLM-R's SentencePiece pieces (and Metaspace)
    show it: the piece really holds the space, a piece starting a word stays distinguishable from
    one continuing it ("Ġcat" vs "cat" in "bobcat"), and a plain space would vanish at the edge of
    an axis label. Byte-level BPE may split one character's bytes across pieces: the piece with
    its first byte shows the character, a later piece "…" in place of the rest, so the pieces
    read left to right spell the text once, never a replacement character. A piece outside the
    byte alphabet (the mask token) is left as it is.
    """

    def byte_piece(piece: str, i: int | None) -> bool:
        return i != mask_id and all(c in BYTE_OF for c in piece)

    return _shown_runs(pieces, ids, byte_piece, lambda p: bytes(BYTE_OF[c] for c in p))


def shown_fallback_pieces(pieces: list[str]) -> list[str]:
    """SentencePiece byte-fallback pieces as readable text: "<0xE6>", "<0x88>", "<0x91>" -> "我",
    "…", "…", as shown_pieces shows a byte-level BPE's (a character outside the vocabulary,
    spelled as its UTF-8 bytes, one piece each). Every other piece is left as it is."""

    def byte_piece(piece: str, _: int | None) -> bool:
        return BYTE_PIECE.fullmatch(piece) is not None

    return _shown_runs(
        pieces, [None] * len(pieces), byte_piece, lambda p: bytes([fallback_byte(p)])
    )


def _shown_runs(pieces: list[str], ids: list, is_byte_piece, bytes_of) -> list[str]:
    """pieces with each run of byte pieces (is_byte_piece(piece, id)) shown as the characters
    their bytes (bytes_of(piece)) spell; every other piece as it is."""
    out = list(pieces)
    run: list[int] = []  # positions of the current run of byte pieces
    for n, (piece, i) in enumerate([*zip(pieces, ids, strict=True), ("", None)]):
        if piece and is_byte_piece(piece, i):
            run.append(n)
            continue
        if run:
            _decode_run(out, run, [bytes_of(out[k]) for k in run])
            run = []
    return out


def _decode_run(out: list[str], run: list[int], data: list[bytes]) -> None:
    """The pieces at run, whose bytes are data, shown as the characters they spell: each by
    the piece holding its first byte, "…" for the rest."""
    try:
        text = b"".join(data).decode("utf-8")
    except UnicodeDecodeError:  # not the bytes of a text (cannot come from encode): as spelled
        return
    # Byte offset at which each character starts -> the character.
    starts, at = {}, 0
    for c in text:
        starts[at] = c
        at += len(c.encode("utf-8"))
    at = 0
    for n, piece_bytes in zip(run, data, strict=True):
        shown = "" if at in starts else CONTINUED
        shown += "".join(starts[b] for b in range(at, at + len(piece_bytes)) if b in starts)
        out[n] = "".join(_visible(c) for c in shown)
        at += len(piece_bytes)


def shown_piece(piece: str) -> str:
    """One byte-level piece, read alone, as readable text: "Ġcat" -> "▁cat", "æĪĳ" -> "我".

    Alone, a piece may hold part of a character only (byte-level BPE splits a CJK character's
    three bytes across pieces). Bytes continuing a character begun before the piece are shown
    as "…", as shown_pieces shows them (followed by the bytes themselves, "…<0x91>", when the
    piece holds nothing else, so two such pieces never read alike); the first bytes of a
    character the piece does not finish, which alone say no character, as byte markers in the
    SentencePiece byte-fallback spelling ("<0xE6><0x88>"). Never "\ufffd" nor the byte alphabet.
    """
    data = bytes(BYTE_OF[c] for c in piece)
    text = data.decode("utf-8", errors="surrogateescape")  # a bad byte b -> U+DC00 + b

    def marker(c: str) -> str:
        return f"<0x{ord(c) - 0xDC00:02X}>"

    lead = 0  # bytes continuing a character begun in an earlier piece (0x80..0xBF)
    while lead < len(text) and 0xDC80 <= ord(text[lead]) <= 0xDCBF:
        lead += 1
    rest = "".join(marker(c) if 0xDC80 <= ord(c) <= 0xDCFF else _visible(c) for c in text[lead:])
    if not lead:
        return rest
    return CONTINUED + (rest or "".join(marker(c) for c in text[:lead]))


def _visible(c: str) -> str:
    """A character as an axis label can show it: a space as "▁", a newline or other invisible
    character as its escape ("\\n"), the rest as it is."""
    if c == " ":
        return WORD_START
    if c.isprintable():
        return c
    return c.encode("unicode_escape").decode("ascii")


class PieceLabel(str):
    """An axis label (a str, shown as it is) of a piece shown otherwise than the vocabulary
    spells it: a byte-level piece decoded ("中" for "ä¸", "…" for "Ń"). `spelled` keeps the
    exact piece, which tfviz.plots adds to a cell's hover (the tick shows the label only)."""

    spelled: str

    def __new__(cls, text: str, spelled: str = "") -> PieceLabel:
        label = super().__new__(cls, text)
        label.spelled = spelled
        return label


def unique_labels(
    pieces: tuple[str, ...], spelled: tuple[str, ...] | None = None
) -> tuple[str, ...]:
    """Axis labels: a piece that occurs more than once gets its position, "the (3)".

    Word-pieces never contain a space, so a label with " (" can't collide with a piece.
    spelled: the pieces as the vocabulary spells them; a label whose piece is shown otherwise
    (byte-level, decoded) is a PieceLabel that keeps it.
    """
    counts = Counter(pieces)
    labels = [p if counts[p] == 1 else f"{p} ({i})" for i, p in enumerate(pieces)]
    if spelled is not None:
        labels = [
            PieceLabel(label, exact) if exact != piece else label
            for label, piece, exact in zip(labels, pieces, spelled, strict=True)
        ]
    return tuple(labels)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
