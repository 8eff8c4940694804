"""Checks of what a form or an upload sends, refused with a message a student can act on.

Form fields arrive as floats, or as anything a crafted request sends (NaN, inf, 1e30, a string).
Each check returns the value in the type the work needs, or raises `Refused` (a ValueError) whose
`message` names the field and the allowed range as a tfviz.messages.Message, for the app to
word in the page's language.

Uploaded checkpoints are held to the same size budget as trained ones (settings.MAX_PARAMS), which
load_checkpoint checks against the config before any model is built (`load_upload`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer
from tfviz.messages import Refused, say
from tfviz.settings import MAX_PARAMS
from tfviz.training.checkpoint import CheckpointMeta, load_checkpoint


def _shown(value) -> str:
    """A typed value as a short text for a message: 1e+30, nan, 2.5, 'abc'."""
    if isinstance(value, float):
        return f"{value:g}"
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def whole_number(value, field: str, low: int, high: int, *, int_only: bool = False) -> int:
    """value as an int if it is a whole number in [low, high], else Refused saying so.

    field: which one (a key of tfviz.messages.CHOICES["field"]). 2.0 is fine from a form; a
    spec built in code passes int_only, where 2.0 is refused too (the trainer counts in ints).
    """
    ok = (
        _finite_number(value)
        and value == int(value)
        and low <= value <= high
        and (isinstance(value, int) or not int_only)
    )
    if not ok:
        raise Refused(say("whole_number", field=field, low=low, high=high, got=_shown(value)))
    return int(value)


def number_in_range(value, field: str, low: float, high: float) -> float:
    """value as a float if it is a finite number in [low, high], else Refused saying so."""
    if not (_finite_number(value) and low <= value <= high):
        raise Refused(
            say("number_in_range", field=field, low=f"{low:g}", high=f"{high:g}", got=_shown(value))
        )
    return float(value)


def positive_at_most(value, field: str, high: float) -> float:
    """value as a float if it is a finite number in (0, high], else Refused saying so."""
    if not (_finite_number(value) and 0 < value <= high):
        raise Refused(say("positive_at_most", field=field, high=f"{high:g}", got=_shown(value)))
    return float(value)


def one_of(value, field: str, options: Sequence[str]) -> str:
    """value if it is one of options, else Refused naming them."""
    if value not in options:
        listed = ", ".join(options)
        raise Refused(say("one_of", field=field, options=listed, got=_shown(value)))
    return value


def check_size(config: ModelConfig, max_params: int = MAX_PARAMS) -> int:
    """The parameter count of config, or Refused if it is over max_params."""
    n = config.n_params
    if n > max_params:
        raise Refused(say("too_big", n=n, most=max_params))
    return n


def load_upload(
    data: bytes, max_bytes: int, max_params: int = MAX_PARAMS, device: str = "cpu"
) -> tuple[Transformer, CheckpointMeta]:
    """An uploaded checkpoint's (model, meta), under the upload's byte limit and the size budget.

    Raises:
        CheckpointError: anything wrong with the file, with a message that says what.
    """
    return load_checkpoint(data, max_bytes=max_bytes, device=device, max_params=max_params)
