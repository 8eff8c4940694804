"""What jobs and form checks say, as keys and values: the library words nothing for a page.

A job's progress ("training", "measuring the model on 1000 fresh examples"), how it ended ("saved
as sort_3f9a.safetensors", "cancelled after 40 steps; not saved") and why a form was refused
("steps must be a whole number from 1 to 100,000; got 2.5") are each a `Message`: a key and the
numbers and names its wording takes. The catalogue (tfviz.words, keys "jobs.message.<key>")
words it: `Message.text(lang)` in the page's language for the app, `Message.english()` for logs,
the command line and tests. The catalogue is the only place these sentences are written.

A value named in CHOICES is one of a fixed set (a W_o start, an experiment's condition, a form
field), worded from the catalogue by its own key rather than shown as it is; a value that is
itself a Message (how far a cancelled job got) is worded the same way as its parent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfviz.core import modes
from tfviz.refusal import Refusal
from tfviz.words import DEFAULT, catalogue, placeholders, translate

PREFIX = "jobs.message."  # catalogue key of a message: PREFIX + its key
# key -> English template, read from the catalogue: the vocabulary a Message is checked against
MESSAGES = {k[len(PREFIX) :]: v for k, v in catalogue(DEFAULT).items() if k.startswith(PREFIX)}

# value name -> (catalogue key prefix, the values it takes): values worded from a fixed set
CHOICES = {
    "condition": ("experiment.condition.", modes.CONDITIONS),
    "start": ("train.retrain.start.", (modes.IDENTITY, modes.ZERO, "random", modes.LEARNED)),
    "field": ("jobs.field.", ("steps", "lr", "seed", "seeds", "w_o", "start")),
}


@dataclass(frozen=True)
class Message:
    """One thing a job or a check says: a key of MESSAGES and the values its wording takes.

    Refused at once if the key is unknown or the values do not match its placeholders, so a typo
    fails where it is made, not on a page.
    """

    key: str
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        template = MESSAGES.get(self.key)
        if template is None:
            raise KeyError(f"no job message {self.key!r} (catalogue key {PREFIX}{self.key})")
        if set(self.values) != placeholders(template):
            raise ValueError(
                f"message {self.key!r} takes {sorted(placeholders(template))}, "
                f"got {sorted(self.values)}"
            )
        for name, value in self.values.items():
            if name in CHOICES and value not in CHOICES[name][1]:
                raise ValueError(f"{name} is one of {list(CHOICES[name][1])}, got {value!r}")

    def text(self, lang: str = DEFAULT, name: Callable[[str], str] = str) -> str:
        """The message in lang: a value from a fixed set by its catalogue label, a nested
        message worded likewise, whole numbers with thousands separators, any other value
        through `name` (the app passes md_escape: a model's name is shown inert)."""
        values = {}
        for key, value in self.values.items():
            if isinstance(value, Message):
                values[key] = value.text(lang, name)
            elif isinstance(value, Refusal):  # a library's reason (tfviz.refusal.cause)
                values[key] = value.text(lang, name)
            elif key in CHOICES:
                values[key] = translate(lang, CHOICES[key][0] + value)
            elif isinstance(value, int) and not isinstance(value, bool):
                values[key] = f"{value:,}"
            else:
                values[key] = name(str(value))
        return translate(lang, PREFIX + self.key, **values)

    def english(self) -> str:
        return self.text(DEFAULT)

    __str__ = english


def say(key: str, **values: Any) -> Message:
    """Message(key, values), written as a call."""
    return Message(key, values)


class Said(Refusal):
    """A tfviz.refusal.Refusal said by a Message: its key and values are the refusal's code and
    values (catalogue key "jobs.message.<key>"), worded as the Message words them (a value from
    a fixed set by its label, whole numbers with thousands separators); str(): the English."""

    PREFIX = PREFIX

    def __init__(self, message: Message):
        self.message = message
        super().__init__(message.key, **message.values)

    def text(self, lang: str = DEFAULT, name: Callable[[str], str] = str) -> str:
        return self.message.text(lang, name)

    def __reduce__(self):  # pickled as its message
        return type(self), (self.message,)


class Refused(Said, ValueError):
    """A form's value refused; `message` says why as a Message (str(): the English)."""
