"""Why a pretrained model folder (or zip) is not opened: one exception class per reason.

Every class derives from PretrainedError, a tfviz.refusal.Refusal: raised with a code and
values, worded by the catalogue (keys "refusal.model.<code>") as a sentence saying what was found,
why it is refused and what would work; str() is the English, text(lang) the page's language.
tfviz.hf.pretrained re-exports PretrainedError, so a caller catching that one class catches every
refusal of this package too.
"""

from __future__ import annotations

from tfviz.refusal import Refusal


class PretrainedError(Refusal, RuntimeError):
    """The pretrained model's files are missing or not what this module expects."""

    PREFIX = "refusal.model."


class MissingFileError(PretrainedError):
    """A file the model needs (config.json, model.safetensors, a tokenizer) is not there."""


class UnsafeFileError(PretrainedError):
    """The folder holds something that would run code: a pickle, a .py file, remote code."""


class UnknownFamilyError(PretrainedError):
    """config.json names a model_type (or a variant of one) that tfviz cannot run exactly."""


class ConfigError(PretrainedError):
    """config.json is unreadable, incomplete, or not a config tfviz's Transformer can run."""


class TooLargeError(PretrainedError):
    """The config (or a file) claims sizes past what a classroom server loads; refused before
    anything is allocated."""


class WeightsError(PretrainedError):
    """The weights file lacks tensors, has unexpected ones, or shapes that disagree with the
    config, or holds NaN or infinite values."""


class TokenizerError(PretrainedError):
    """The tokenizer files are unreadable or do not fit the model (specials, vocabulary size)."""


class ZipRefusedError(PretrainedError):
    """A zipped folder is refused: too large once unpacked, too compressed (a zip bomb), too many
    files, or entries that would land outside the folder (path traversal, links)."""


class UnreadableError(PretrainedError):
    """Reading the folder failed in a way no check above names (a file vanished, a disk error,
    a value no reader expected): said for this folder alone, never raised past it."""
