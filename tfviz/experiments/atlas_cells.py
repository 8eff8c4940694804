"""The atlas's names and cells, without torch: what a stored row's key means.

tfviz.experiments.atlas trains the runs and re-exports these; tfviz.experiments.atlas_store and
tfviz.experiments.atlas_stats read and compare stored rows with them, and importing either loads no
model code (torch loads only when a Cell is made, to check its task).
"""

from __future__ import annotations

from dataclasses import dataclass

from tfviz.core import modes
from tfviz.training.recipes import CLASS_SIZES

FORMAT = "tfviz-atlas/1"
ARMS = (*modes.CONDITIONS, "frozen", "identity_readout")
MAIN_ARMS = modes.CONDITIONS  # every cell of the bundled atlas has these
MECHANISM_ARM = "identity_readout"
AGAINST = tuple(a for a in ARMS if a != modes.LEARNED)  # what the learned W_o is compared with


@dataclass(frozen=True, order=True)
class Cell:
    """One architecture on one task: a square of the atlas."""

    task: str
    n_layers: int = 2
    ffn: bool = True
    n_heads: int = 4
    d_model: int = CLASS_SIZES["d_model"]
    norm: str = "post"

    def __post_init__(self) -> None:
        from tfviz.core.tasks import (
            atlas_task,  # the tasks need torch: only when a cell is made
        )

        atlas_task(self.task)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by {self.n_heads} heads")
        if self.norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' or 'pre', got {self.norm!r}")

    @property
    def key(self) -> str:
        ffn = "ffn" if self.ffn else "noffn"
        return f"{self.task}/L{self.n_layers}/{ffn}/H{self.n_heads}/D{self.d_model}/{self.norm}"

    @property
    def arch(self) -> str:
        """The architecture part of the key (the atlas's row)."""
        return self.key.split("/", 1)[1]

    @classmethod
    def from_key(cls, key: str) -> Cell:
        try:
            task, layers, ffn, heads, d_model, norm = key.split("/")
            return cls(task, int(layers[1:]), ffn == "ffn", int(heads[1:]), int(d_model[1:]), norm)
        except ValueError as e:
            raise ValueError(f"not an atlas cell key: {key!r} ({e})") from None

    def model_config(self):
        from tfviz.core.tasks import atlas_task

        d_ff = 2 * self.d_model  # the class recipe's ratio (64 -> 128)
        return atlas_task(self.task).model_config(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=d_ff,
            n_layers=self.n_layers,
            dropout=0.0,
            norm=self.norm,
            ffn=self.ffn,
        )


# ---- the language atlas (tfviz.experiments.language_atlas) --------------------------------------
LANGUAGE_FORMAT = "tfviz-language-atlas/1"
# W_o learned, none, one map per head, left at its random start, and learned after a per-head
# sigmoid gate on each head's output (Qiu et al. 2025): the language atlas's arms, in that order.
LANGUAGE_ARMS = (modes.LEARNED, modes.IDENTITY, modes.BLOCK_DIAGONAL, "frozen", "gated")


@dataclass(frozen=True, order=True)
class LanguageCell:
    """One architecture of the language atlas: a causal character model of the bundled corpus,
    pre-norm. task and norm are fixed, so that labels written for the toy atlas's cells serve."""

    n_layers: int = 2
    ffn: bool = False
    n_heads: int = 4
    d_model: int = 64
    task = "language"
    norm = "pre"

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by {self.n_heads} heads")

    @property
    def key(self) -> str:
        ffn = "ffn" if self.ffn else "noffn"
        return f"language/L{self.n_layers}/{ffn}/H{self.n_heads}/D{self.d_model}"

    @property
    def arch(self) -> str:
        return self.key.split("/", 1)[1]

    @classmethod
    def from_key(cls, key: str) -> LanguageCell:
        try:
            task, layers, ffn, heads, d_model = key.split("/")
            if task != "language" or ffn not in ("ffn", "noffn"):
                raise ValueError("not a language cell")
            return cls(int(layers[1:]), ffn == "ffn", int(heads[1:]), int(d_model[1:]))
        except ValueError as e:
            raise ValueError(f"not a language atlas cell key: {key!r} ({e})") from None
