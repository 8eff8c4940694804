"""Why a file is refused, as a code and values: the catalogue words it, in either language.

A model folder, a zip, a checkpoint or a timeline a student brings is refused for one of many
reasons ("config.json has 3 keys written twice", "the zip entry '../x' would leave the folder").
The library raises a `Refusal` subclass with a code and the values its sentence names, e.g.
`ConfigError("not_object", file="config.json")`; the catalogue (tfviz.words, key PREFIX + code)
holds the sentence in every language. str(error) is the English (logs, the command line, tests),
`error.text(lang)` the page's language. The sentence itself is written only in the catalogue.
Refusal is the one error type that carries a catalogue key: a typed input's (InputError), a
form's (tfviz.messages.Refused), a lesson's, a full job queue's are subclasses too, and the app
words every one the same way (tfviz.ui.i18n.why; tests/project/test_one_route.py holds it).

Values may come from a hostile folder (a file name that is not UTF-8, a 1 MB model_type): each
text value is made encodable (`shown`) and clipped when the error is made, so no sentence can
carry a lone surrogate or grow without bound. The page still shows the sentence inert (md_escape).
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable
from typing import Any

from tfviz.words import DEFAULT, translate

MAX_VALUE = 160  # characters of one text value: a 1 MB model_type is not echoed whole
MAX_TEXT = 400  # characters of a whole sentence, in any language


def shown(text: str) -> str:
    """text safe to put in a message: a file name that is not UTF-8 comes from the file system
    with lone surrogates ("\\udcff"), which a web page cannot encode; they are written as
    escapes ("\\xff") instead."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def kept(value: Any, limit: int | None = MAX_VALUE) -> Any:
    """A value as a refusal keeps it: numbers as they are (the catalogue formats them), another
    refusal as it is (worded in the same language as its parent), another error as its `cause`,
    a list as its items joined by commas, anything else (a tensor's shape, a tuple) as its
    str(): encodable text of at most `limit` characters (None: whole)."""
    if isinstance(value, BaseException) and not isinstance(value, Refusal):
        value = cause(value)
    if isinstance(value, Refusal):
        return value.detached()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, list):
        value = ", ".join(map(str, value))
    return clipped(shown(str(value)), limit)


def clipped(text: str, limit: int | None) -> str:
    """text, or its first limit - 1 characters and "…" if it is longer (None: never cut)."""
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _rebuilt(cls: type, code: str, values: dict) -> Refusal:
    return cls(code, **values)


class Refusal(Exception):
    """A refusal: `code` names the catalogue key PREFIX + code, `values` fill its placeholders.

    The one error type that carries a catalogue key: every error the library or the app words
    for a person (a file refused, a typed input, a form's value, a full queue) is a subclass,
    and the app words each one the same way (tfviz.ui.i18n.why). Subclasses set PREFIX (one
    part of the catalogue per kind of refusal). A code's sentence and its placeholders are
    checked against both catalogues by tests/project/test_refusal_words.py, which reads every raise
    site, so a typo fails there rather than on a page.
    """

    PREFIX = "refusal."
    MAX_VALUE: int | None = MAX_VALUE  # a text value's characters kept (None: all of it)
    MAX_TEXT: int | None = MAX_TEXT  # a sentence's characters shown (None: all of it)

    def __init__(self, code: str, **values: Any):
        self.code = code
        self.values = {name: kept(value, self.MAX_VALUE) for name, value in values.items()}
        super().__init__(self.text(DEFAULT))

    @property
    def key(self) -> str:
        return self.PREFIX + self.code

    def text(self, lang: str = DEFAULT, name: Callable[[str], str] = str) -> str:
        """The sentence in lang (at most MAX_TEXT characters); a value that is itself a
        refusal is worded in lang too. name: applied to every text value (the app passes
        md_escape, so that a file's name is shown inert while the catalogue's own markup, a file
        name in backticks, is kept)."""
        return clipped(translate(lang, self.key, **self.shown_values(lang, name)), self.MAX_TEXT)

    def shown_values(self, lang: str, name: Callable[[str], str]) -> dict[str, Any]:
        """The values as the sentence in lang shows them: a refusal worded in lang, text
        through name, numbers as they are (the catalogue formats them)."""
        return {
            key: value.text(lang, name)
            if isinstance(value, Refusal)
            else name(value)
            if isinstance(value, str)
            else value
            for key, value in self.values.items()
        }

    def detached(self) -> Refusal:
        """This refusal without its traceback and the error it was raised while handling: one
        kept (a cache's answer, a session's message) must not keep their frames alive, and
        with them the bytes of the file it refused."""
        self.__traceback__ = self.__context__ = self.__cause__ = None
        return self

    def __reduce__(self):  # pickled (a worker process) as its code and values, not its text
        return _rebuilt, (type(self), self.code, self.values)


def worded(reason: Any, lang: str = DEFAULT, name: Callable[[str], str] = str) -> str:
    """Why something was refused, in lang: a Refusal through the catalogue, another error
    through `cause`, anything else as str(). name: applied to the text that does not come from
    the catalogue (a Refusal's text values, another reason's own words)."""
    if isinstance(reason, BaseException) and not isinstance(reason, Refusal):
        reason = cause(reason)
    return reason.text(lang, name) if isinstance(reason, Refusal) else name(str(reason))


class Cause(Refusal):
    """Why a library (json, the operating system, zipfile, safetensors) failed, as a code the
    catalogue words (refusal.cause.<code>): a refusal's {why} then reads in the page's language
    instead of the library's English."""

    PREFIX = "refusal.cause."


# json's messages (JSONDecodeError.msg) -> code; the line and column are values.
JSON_CAUSES = {
    "Expecting value": "json_value",
    "Expecting ',' delimiter": "json_comma",
    "Expecting ':' delimiter": "json_colon",
    "Expecting property name enclosed in double quotes": "json_name",
    "Extra data": "json_extra",
    "Unterminated string starting at": "json_unterminated",
    "Invalid control character at": "json_control",
    "Invalid \\escape": "json_escape",
    "Invalid \\uXXXX escape": "json_escape",
}
OS_CAUSES = {
    errno.ENOENT: "os_missing",
    errno.EACCES: "os_permission",
    errno.EPERM: "os_permission",
    errno.EISDIR: "os_is_folder",
    errno.ENOTDIR: "os_not_folder",
    errno.ENAMETOOLONG: "os_name_too_long",
    errno.ELOOP: "os_link_loop",
    errno.ENOSPC: "os_disk_full",
    errno.EDQUOT: "os_disk_full",
    errno.EEXIST: "os_exists",
    errno.EROFS: "os_read_only",
    errno.EIO: "os_io",
    errno.EMFILE: "os_too_many_open",
    errno.ENFILE: "os_too_many_open",
}
# A part of a library's message -> code, by the error's class name (safetensors' class is
# matched by name: this module imports no numeric library).
MESSAGE_CAUSES = {
    "SafetensorError": (
        ("header too small", "safetensors_header_small"),
        ("header too large", "safetensors_header_large"),
        ("invalid JSON in header", "safetensors_header_json"),
        ("incomplete metadata", "safetensors_incomplete"),
        ("invalid offset", "safetensors_offset"),
    ),
    "BadZipFile": (
        ("File is not a zip file", "zip_not_zip"),
        ("Bad CRC-32", "zip_crc"),
        ("span multiple disks", "zip_multi_disk"),
        ("", "zip_damaged"),  # any other: a damaged directory or header
    ),
}
LINE_COLUMN = re.compile(r"line (\d+) column (\d+)")


def cause(error: BaseException) -> Refusal | str:
    """error as a Cause the catalogue words, where it is one of the kinds above; else its own
    words (str), the rare case: better the library's English than no reason at all."""
    if isinstance(error, json.JSONDecodeError) and error.msg in JSON_CAUSES:
        return Cause(JSON_CAUSES[error.msg], line=error.lineno, column=error.colno)
    if isinstance(error, RecursionError):
        return Cause("too_deep")
    if isinstance(error, UnicodeDecodeError):
        return Cause("not_utf8", position=error.start)
    if isinstance(error, EOFError):
        return Cause("truncated")
    if isinstance(error, KeyError) and len(error.args) == 1:
        return Cause("missing_key", key=repr(error.args[0]))
    if isinstance(error, OSError) and error.errno in OS_CAUSES:
        return Cause(OS_CAUSES[error.errno])
    text = str(error)
    for part, code in MESSAGE_CAUSES.get(type(error).__name__, ()):
        if part in text:
            place = LINE_COLUMN.search(text) if code == "safetensors_header_json" else None
            if place:
                return Cause(code + "_at", line=int(place[1]), column=int(place[2]))
            return Cause(code)
    if isinstance(error, OSError) and error.strerror:
        return error.strerror  # without the path, which str(error) would show
    return text
