"""Text as the views show it: what a user gave, made inert for markdown (md_escape), and answers
side by side in monospace with the wrong tokens marked.

Pure functions (no streamlit), so they are tested without a page.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence


def width(text: str) -> int:
    """Columns text takes in a monospace font: a wide character (Chinese) takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, columns: int) -> str:
    """text with spaces after it to fill `columns` monospace columns."""
    return text + " " * (columns - width(text))


def changed_tokens(a: Sequence[str], b: Sequence[str]) -> list[int]:
    """Positions (0-based) where two answers of the same length differ."""
    if len(a) != len(b):
        raise ValueError(f"answers have {len(a)} and {len(b)} tokens; cannot compare them")
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def prediction_table(
    rows: Sequence[tuple[str, Sequence[str]]], answer: Sequence[str], marked_row: int = -1
) -> str:
    """Rows of tokens in aligned columns, with '^' under each token of marked_row not in answer.

    Args:
        rows: (row name, tokens) pairs, e.g. [("input", ...), ("answer", ...), ("model", ...)].
        answer: the right tokens; the marked row is compared with it position by position.
        marked_row: index into rows of the row to mark (default: the last).
    Returns:
        Plain text for a monospace block; every token is shown literally.
    """
    rows = [(name, [str(t) for t in tokens]) for name, tokens in rows]
    n = max(len(tokens) for _, tokens in rows)
    widths = [max((width(t[i]) for _, t in rows if i < len(t)), default=1) for i in range(n)]
    name_width = max(width(name) for name, _ in rows)
    marked = rows[marked_row][1]
    wrong = set(changed_tokens(marked, answer)) if len(marked) == len(answer) else set(range(n))

    def line(name: str, cells: Sequence[str]) -> str:
        padded = [pad(c, w) for c, w in zip(cells, widths, strict=False)]
        return f"{pad(name, name_width)}  {' '.join(padded)}".rstrip()

    lines = [line(name, tokens) for name, tokens in rows]
    if wrong:
        marks = ["^" if i in wrong else "" for i in range(len(marked))]
        lines.append(line("", marks))
    return "\n".join(lines)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:&=])")


# Where Streamlit's markdown (GFM) makes a link of plain text: "http://" and "https://", "www."
# and name@domain. It looks for them in the text after the escapes are resolved, so a backslash
# cannot stop it: an invisible WORD_JOINER inside each one does ("https:<WJ>//", "www<WJ>.",
# "a@<WJ>b.c"), and the text still reads the same.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)(?=[-\w])", re.IGNORECASE)


WORD_JOINER = "\u2060"


def md_escape(text: str) -> str:
    """Text for a markdown-rendering element (st.error, st.caption, a label...) shown exactly as
    written and inert: no markdown, no HTML, no link (not even a bare address or e-mail address,
    which GFM would link). Every echo of what a user gave (a link's values, a file or model name,
    a typed sequence) goes through here, or into st.code / st.text."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, str(text)))


def cut(text: str, n: int) -> str:
    """text, or its first n - 3 characters and '...' if it is longer than n."""
    return text if len(text) <= n else text[: n - 3] + "..."
