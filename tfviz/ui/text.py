"""Text the views show in monospace: answers side by side with the wrong tokens marked.

Pure functions (no streamlit), so they are tested without a page.
"""

from __future__ import annotations

from collections.abc import Sequence


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
    widths = [max((len(t[i]) for _, t in rows if i < len(t)), default=1) for i in range(n)]
    name_width = max(len(name) for name, _ in rows)
    marked = rows[marked_row][1]
    wrong = set(changed_tokens(marked, answer)) if len(marked) == len(answer) else set(range(n))

    def line(name: str, cells: Sequence[str]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells, widths, strict=False)]
        return f"{name.ljust(name_width)}  {' '.join(padded)}".rstrip()

    lines = [line(name, tokens) for name, tokens in rows]
    if wrong:
        marks = ["^" if i in wrong else "" for i in range(len(marked))]
        lines.append(line("", marks))
    return "\n".join(lines)
