"""Toy tasks a person can type: small alphabets, seeded generators, exact answers and clear errors.

A task turns typed text into token ids (refusing, with a message a student can act on, anything it
cannot take), draws random training batches, knows the right answer (`solve`) and reads the model's
answer off its logits (`predict`). Ids: the alphabet's characters are 0..A-1, then BOS (if the task
uses one), then PAD. BOS gives attention a fixed place to rest and counting tasks a reference point
(it plays BERT's [CLS] role for pooled tasks).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from tfviz.core.config import ModelConfig
from tfviz.refusal import Refusal
from tfviz.words import catalogue, translate

IGNORE = -100  # target value for positions without a target (BOS, padding)
BOS_LABEL = "BOS"


class InputError(Refusal, ValueError):
    """A typed input refused, as a code and the values its wording names: the catalogue words it
    (key "input.<code>": "not_text", "empty", "too_long", "bad_char", "too_short", ...), in
    English for str(error), in the page's language for the app; a {task} by its name in that
    language (task.<name>.name)."""

    PREFIX = "input."
    # Shown whole: the alphabet a student is told to type from, however long, is the answer.
    MAX_VALUE = MAX_TEXT = None

    def shown_values(self, lang: str, name: Callable[[str], str]) -> dict[str, Any]:
        values = super().shown_values(lang, name)
        if isinstance(task := self.values.get("task"), str):
            key = f"task.{task.replace(' ', '_')}.name"
            values["task"] = name(translate(lang, key) if key in catalogue(lang) else task)
        return values


class Accepted(str):
    """A text its task accepted: what a task's validate returns. The same task takes it again
    without checking it (validate returns it as it is), so a typed text is checked once, in the
    box it was typed in, not again by the trace and the encoding that follow."""

    def __new__(cls, text: str, task: object) -> Accepted:
        accepted = super().__new__(cls, text)
        accepted.task = task
        return accepted

    def __reduce__(self):
        # Pickled or copied, it comes back a plain str, checked again where it is used: its task
        # (a tokenizer and its caches, for a pretrained model) does not travel with it.
        return str, (str(self),)

    def accepted_by(self, task: object) -> bool:
        return self.task is task


@dataclass(frozen=True)
class Batch:
    """A batch of examples as tensors: ids (B, T), pad_mask (B, T) True at padding, target."""

    ids: Tensor
    pad_mask: Tensor
    target: Tensor  # (B, T) class ids for token tasks, (B,) class ids or (B,) floats otherwise
    lengths: Tensor  # (B,) typed characters per example (BOS not counted)


class Task:
    """Base class: subclasses set the class attributes and implement `_targets`."""

    name: str = ""
    description: str = ""
    alphabet: str = ""
    kind: str = "token"  # "token": one answer per character; "classify"; "regress"
    model_kind: str = "toy"  # which kind of model reads it (tfviz.hf's text tasks: others)
    bos: bool = True
    min_len: int = 1
    max_len: int = 16
    metric: str = "token_accuracy"
    sep: str = ""  # joins answer tokens into the text a person would write
    pool: str = "none"  # the model pooling this task needs
    examples: tuple[str, ...] = ()

    # ---- sizes ---------------------------------------------------------------------------
    @property
    def bos_id(self) -> int:
        return len(self.alphabet)

    @property
    def pad_id(self) -> int:
        return len(self.alphabet) + int(self.bos)

    @property
    def vocab_size(self) -> int:
        return self.pad_id + 1

    @property
    def n_out(self) -> int:
        return len(self.alphabet)

    @property
    def positions(self) -> int:
        """Positions a model for this task needs: the longest input plus BOS."""
        return self.max_len + int(self.bos)

    @property
    def learns_causally(self) -> bool:
        """Whether a causal model (each token reads only itself and earlier tokens) can learn
        this task: a pooled answer, read at the last token, which sees the whole sequence. The
        per-token tasks here (reverse, sort, histogram) answer at position i with what comes
        later too."""
        return self.pool != "none"

    def model_pool(self, causal: bool = False) -> str:
        """The pooling a model of this task reads its answer with: a causal model's pooled answer
        is read at the last real token, the only one that has seen every token."""
        return "last" if causal and self.pool != "none" else self.pool

    def model_config(self, **sizes) -> ModelConfig:
        """A ModelConfig whose vocabulary, outputs, positions and pooling fit this task."""
        sizes.setdefault("max_len", self.positions)
        pool = self.model_pool(bool(sizes.get("causal", False)))
        return ModelConfig(vocab_size=self.vocab_size, n_out=self.n_out, pool=pool, **sizes)

    def check_config(self, config: ModelConfig) -> None:
        """Raise ValueError if a model of this config cannot do this task."""
        pool = self.model_pool(config.causal)
        want = {"vocab_size": self.vocab_size, "n_out": self.n_out, "pool": pool}
        for key, value in want.items():
            if getattr(config, key) != value:
                raise ValueError(
                    f"task {self.name!r} needs {key}={value!r}, the model has "
                    f"{getattr(config, key)!r}"
                )
        if config.max_len < self.positions:
            raise ValueError(
                f"task {self.name!r} needs {self.positions} positions, the model "
                f"has {config.max_len}"
            )
        if config.embed == "value" and (self.bos or self.alphabet != "0123456789"):
            raise ValueError(
                "embed='value' feeds digit values and works only for digit tasks without BOS"
            )

    # ---- text <-> ids ------------------------------------------------------------------------
    def validate(self, text: str) -> Accepted:
        """Return text if this task accepts it (as Accepted: checked once), else raise
        ValueError saying what is wrong."""
        if isinstance(text, Accepted) and text.accepted_by(self):
            return text
        self.check_rules(text)
        return Accepted(text, self)

    def check_rules(self, text: str) -> None:
        """Raise ValueError (InputError) unless text keeps this task's rules."""
        if not isinstance(text, str):
            kind = type(text).__name__
            raise InputError("not_text", type=kind)
        # Every refusal ends by saying what is allowed, so one message is enough to fix the input.
        rules = dict(task=self.name, min_len=self.min_len, max_len=self.max_len)
        rules["alphabet"] = self.alphabet
        if not text:
            raise InputError("empty", **rules)
        if len(text) > self.max_len:
            raise InputError("too_long", length=len(text), **rules)
        for i, ch in enumerate(text):
            if ch not in self.alphabet:
                raise InputError("bad_char", char=describe_char(ch), position=i + 1, **rules)
        if len(text) < self.min_len:
            raise InputError("too_short", length=len(text), task=self.name, min_len=self.min_len)

    def encode(self, text: str) -> list[int]:
        """Token ids of a typed sequence (BOS first if the task uses one)."""
        self.validate(text)
        ids = [self.alphabet.index(ch) for ch in text]
        return [self.bos_id] + ids if self.bos else ids

    def decode(self, ids) -> str:
        """Typed text back from ids (BOS and PAD dropped)."""
        return "".join(self.alphabet[i] for i in ids if 0 <= int(i) < len(self.alphabet))

    def random_example(self, rng: np.random.Generator) -> str:
        """A random sequence the task accepts, drawn as its training data are."""
        return self.decode(self.sample(1, rng).ids[0].tolist())

    def labels(self, text: str) -> list[str]:
        """One axis label per model position, unique so plots never merge two equal tokens."""
        labels = [f"{ch}·{i + 1}" for i, ch in enumerate(self.validate(text))]
        return [BOS_LABEL] + labels if self.bos else labels

    def encode_batch(self, texts: list[str], device=None) -> tuple[Tensor, Tensor]:
        """ids (B, T) and pad_mask (B, T) for several texts, padded to the longest."""
        rows = [self.encode(t) for t in texts]
        T = max(len(r) for r in rows)
        ids = torch.full((len(rows), T), self.pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
        ids = ids.to(device) if device is not None else ids
        return ids, ids == self.pad_id

    # ---- data -------------------------------------------------------------------------------
    def _draw(self, rng: np.random.Generator, lengths: np.ndarray) -> np.ndarray:
        """Symbols (n, max(lengths)) as alphabet indices; positions past a length are ignored."""
        return rng.integers(0, len(self.alphabet), size=(len(lengths), int(lengths.max())))

    def _targets(self, sym: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Right answers as classes (token tasks: (n, T) with IGNORE past each length)."""
        raise NotImplementedError

    def sample(
        self,
        n: int,
        rng: np.random.Generator,
        min_len: int | None = None,
        max_len: int | None = None,
    ) -> Batch:
        """n random examples with lengths drawn uniformly from [min_len, max_len]."""
        lo = self.min_len if min_len is None else min_len
        hi = self.max_len if max_len is None else max_len
        if not self.min_len <= lo <= hi <= self.max_len:
            raise ValueError(
                f"lengths for {self.name} must satisfy {self.min_len} <= min_len <= "
                f"max_len <= {self.max_len}, got {lo}..{hi}"
            )
        lengths = rng.integers(lo, hi + 1, size=n)
        sym = self._draw(rng, lengths)
        return self._batch(sym, lengths)

    def _batch(self, sym: np.ndarray, lengths: np.ndarray) -> Batch:
        n, T = sym.shape
        pad = np.arange(T)[None, :] >= lengths[:, None]
        ids = np.where(pad, self.pad_id, sym)
        target = self._targets(np.where(pad, 0, sym), lengths)
        if self.kind == "token":
            target = np.where(pad, IGNORE, target)
        if self.bos:
            ids = np.concatenate([np.full((n, 1), self.bos_id), ids], axis=1)
            pad = np.concatenate([np.zeros((n, 1), bool), pad], axis=1)
            if self.kind == "token":
                target = np.concatenate([np.full((n, 1), IGNORE), target], axis=1)
        dtype = torch.float32 if self.kind == "regress" else torch.long
        return Batch(
            ids=torch.as_tensor(ids, dtype=torch.long),
            pad_mask=torch.as_tensor(pad),
            target=torch.as_tensor(target, dtype=dtype),
            lengths=torch.as_tensor(lengths, dtype=torch.long),
        )

    def batch_from_texts(self, texts: list[str]) -> Batch:
        """A Batch (with right answers) for typed texts."""
        for t in texts:
            self.validate(t)
        lengths = np.array([len(t) for t in texts])
        sym = np.zeros((len(texts), int(lengths.max())), dtype=np.int64)
        for i, t in enumerate(texts):
            sym[i, : len(t)] = [self.alphabet.index(ch) for ch in t]
        return self._batch(sym, lengths)

    # ---- answers ------------------------------------------------------------------------------
    def answer_tokens(self, classes) -> list[str]:
        """Answer tokens for one example's target or prediction (BOS/padding already removed)."""
        return [self.alphabet[int(c)] for c in classes]

    def answer_from_target(self, target: Tensor, length: int) -> list[str]:
        """The answer tokens one example's target row (a batch's target[i]) stands for, the
        example being length tokens long: what a model is trained to output for it."""
        if self.kind == "token":
            start = int(self.bos)
            return self.answer_tokens(target[start : start + length].tolist())
        return self.answer_tokens([target.item()])

    def solve_tokens(self, text: str) -> list[str]:
        """The right answer, one token per answer position."""
        batch = self.batch_from_texts([text])
        return self.answer_from_target(batch.target[0], len(text))

    def solve(self, text: str) -> str:
        """The right answer, written as a person would."""
        return self.sep.join(self.solve_tokens(text))

    def output_classes(self, logits: Tensor) -> Tensor:
        """Predicted classes (or values) from logits: argmax, or the regressed number."""
        return logits.argmax(dim=-1)

    def answer_from_logits(self, logits: Tensor, length: int) -> list[str]:
        """The answer tokens one example's logits stand for: (n_out,), or (T, n_out) per token."""
        return self.answer_from_target(self.output_classes(logits), length)

    def predict_tokens(self, model, text: str, **switches) -> list[str]:
        """The model's answer, one token per answer position; switches as in Transformer.forward."""
        ids, pad = self.encode_batch([text], device=model.device)
        with torch.no_grad():
            logits = model(ids, pad, trace=False, **switches).logits
        return self.answer_from_logits(logits[0], len(text))

    def predict(self, model, text: str, **switches) -> str:
        """The model's answer, written as solve() writes the right one."""
        return self.sep.join(self.predict_tokens(model, text, **switches))

    # ---- training signal and metric ------------------------------------------------------------
    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        if self.kind == "regress":
            return F.mse_loss(logits.squeeze(-1), target)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=IGNORE
        )

    def score(self, logits: Tensor, target: Tensor) -> dict[str, float]:
        """Metrics of one batch: sums and counts, so batches can be pooled exactly."""
        pred = self.output_classes(logits)
        if self.kind == "token":
            real = target != IGNORE
            ok = (pred == target) & real
            return {
                "correct": ok.sum().item(),
                "count": real.sum().item(),
                "seq_correct": (ok | ~real).all(dim=1).sum().item(),
                "seqs": len(target),
            }
        if self.kind == "classify":
            return {"correct": (pred == target).sum().item(), "count": len(target)}
        return {"abs_err": (pred - target).abs().sum().item() * self.scale, "count": len(target)}


class SumTask(Task):
    """Seed 002's task: the sum of the digits, regressed (the model predicts sum / 10)."""

    name = "sum"
    description = "Sum of the digits (seed 002's regression task; the model predicts sum/10)."
    alphabet = "0123456789"
    kind = "regress"
    bos = False
    pool = "mean"
    metric = "mae"
    scale = 10.0  # seed 002 regresses sum / 10 to keep targets near 1
    examples = ("31415926", "99999999", "01234567", "5", "1234567890123456")

    @property
    def n_out(self) -> int:
        return 1

    def _targets(self, sym, lengths):
        return sym.sum(axis=1) / self.scale

    def output_classes(self, logits):
        return logits.squeeze(-1)

    def answer_tokens(self, classes):
        return [str(int(round(float(c) * self.scale))) for c in classes]


class ReverseTask(Task):
    name = "reverse"
    description = "Write the sequence backwards: position i takes the character at T+1-i."
    alphabet = "abcdefghij"
    examples = ("abcdefgh", "abc", "jihgfedcba", "aabbccddeeffgghh")

    def _targets(self, sym, lengths):
        idx = lengths[:, None] - 1 - np.arange(sym.shape[1])[None, :]
        return np.take_along_axis(sym, np.clip(idx, 0, None), axis=1)


class SortTask(Task):
    name = "sort"
    description = "Sort the digits in ascending order."
    alphabet = "0123456789"
    examples = ("31415926", "97531", "5555", "9876543210987654")

    def _targets(self, sym, lengths):
        past = np.arange(sym.shape[1])[None, :] >= lengths[:, None]
        return np.sort(np.where(past, len(self.alphabet), sym), axis=1)  # padding sorts last


class MaxPositionTask(Task):
    name = "max_position"
    description = "Position (1-based) of the largest digit; the first one if it appears twice."
    alphabet = "0123456789"
    kind = "classify"
    pool = "first"
    metric = "accuracy"
    examples = ("31415926", "90000000", "12345678", "7")

    @property
    def n_out(self) -> int:
        return self.max_len

    def _targets(self, sym, lengths):
        past = np.arange(sym.shape[1])[None, :] >= lengths[:, None]
        return np.argmax(np.where(past, -1, sym), axis=1)  # argmax returns the first maximum

    def answer_tokens(self, classes):
        return [str(int(c) + 1) for c in classes]


class HistogramTask(Task):
    name = "histogram"
    description = "For each character, how many times it occurs in the whole sequence."
    alphabet = "abcdefgh"
    sep = " "
    examples = ("abcabca", "aaaa", "abcdefgh", "hhhhhhhhaaaaaaab")

    @property
    def n_out(self) -> int:
        return self.max_len + 1

    def _targets(self, sym, lengths):
        past = np.arange(sym.shape[1])[None, :] >= lengths[:, None]
        real = np.where(past, -1, sym)
        return (real[:, :, None] == real[:, None, :]).sum(axis=2)  # (n, T): count of each token

    def answer_tokens(self, classes):
        return [str(int(c)) for c in classes]


class BalancedTask(Task):
    name = "balanced"
    description = "Are the brackets balanced? Every '(' closed by a later ')', none left open."
    alphabet = "()"
    kind = "classify"
    pool = "first"
    metric = "accuracy"
    examples = ("(()())", "())(()", "((((", "()", ")(")

    @property
    def n_out(self) -> int:
        return 2

    def _draw(self, rng, lengths):
        # Random strings are almost never balanced, so half of the even-length examples are drawn
        # balanced and half as "near misses" with equal counts: the hard cases a person tries.
        sym = rng.integers(0, 2, size=(len(lengths), int(lengths.max())))
        for i, n in enumerate(lengths):
            if n % 2 == 0:
                u = rng.random()
                if u < 0.5:
                    sym[i, :n] = _random_dyck(rng, n)
                elif u < 0.8:
                    sym[i, :n] = rng.permutation(np.repeat([0, 1], n // 2))
        return sym

    def _targets(self, sym, lengths):
        past = np.arange(sym.shape[1])[None, :] >= lengths[:, None]
        step = np.where(past, 0, np.where(sym == 0, 1, -1))
        depth = np.cumsum(step, axis=1)
        return ((depth.min(axis=1) >= 0) & (depth[:, -1] == 0)).astype(np.int64)

    def answer_tokens(self, classes):
        return ["balanced" if int(c) else "unbalanced" for c in classes]


class DifferenceTask(Task):
    """Designed for the W_o atlas (tfviz.experiments.atlas), not offered as a model to train in the
    app.

    The answer, (first digit - last digit) mod 10, needs two tokens' information combined before
    any non-linearity: no sum f(first) + g(last) of logits gets it right more than a fraction of
    the time (tests/experiments/test_atlas.py fits the best such sum), so in one layer one head
    reading the
    first digit and one reading the last must meet in a linear map (W_o, or the feed-forward
    net's first layer) followed by a non-linearity. A single head averaging the two sees
    e(first) + e(last), which is the same for (a, b) and (b, a) while the answer is not.
    """

    name = "difference"
    description = "(first digit - last digit) mod 10."
    alphabet = "0123456789"
    kind = "classify"
    pool = "first"
    metric = "accuracy"
    min_len = 2
    max_len = 8
    examples = ("31415926", "90", "12345678")

    @property
    def n_out(self) -> int:
        return 10

    def _targets(self, sym, lengths):
        last = np.take_along_axis(sym, (lengths - 1)[:, None], axis=1)[:, 0]
        return (sym[:, 0] - last) % 10

    def answer_tokens(self, classes):
        return [str(int(c)) for c in classes]


def _random_dyck(rng: np.random.Generator, n: int) -> np.ndarray:
    """A random balanced string of n (even) brackets, 0 = '(' and 1 = ')'."""
    out, depth, opens = [], 0, n // 2  # opens: '(' still to place
    for _ in range(n):
        if depth == 0 or (opens > 0 and rng.random() < 0.5):
            out.append(0)
            opens, depth = opens - 1, depth + 1
        else:
            out.append(1)
            depth -= 1
    return np.array(out)


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        SumTask(),
        ReverseTask(),
        SortTask(),
        MaxPositionTask(),
        HistogramTask(),
        BalancedTask(),
    )
}


# The six tasks of the app and the one designed for the W_o atlas (its answer needs two heads'
# information combined before a non-linearity: see DifferenceTask).
ATLAS_TASKS: dict[str, Task] = {**TASKS, "difference": DifferenceTask()}


def atlas_task(name: str) -> Task:
    """An atlas task by name, or a ValueError that lists the known ones."""
    try:
        return ATLAS_TASKS[name]
    except (KeyError, TypeError):
        known = ", ".join(ATLAS_TASKS)
        raise ValueError(f"unknown atlas task {name!r}; known: {known}") from None


def list_tasks() -> list[str]:
    """Names of every task, in a stable order."""
    return list(TASKS)


def get_task(name: str) -> Task:
    """The task called name, or a ValueError that lists the known ones."""
    try:
        return TASKS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}") from None


def describe_char(ch: str) -> str:
    """A character named so a person can see it, even if it is invisible or a control code."""
    name = unicodedata.name(ch, None)
    code = f"U+{ord(ch):04X}"
    if ch.isprintable() and not ch.isspace():
        return f"'{ch}' ({code} {name})" if name else f"'{ch}' ({code})"
    return f"{code} {name}" if name else code
