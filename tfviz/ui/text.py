"""Text the views show in monospace: answers side by side with the wrong tokens marked.

Pure functions (no streamlit), so they are tested without a page.
"""

from __future__ import annotations

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
