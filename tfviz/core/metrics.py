"""One vocabulary of metrics: the key evaluate() reports, the label a person reads, the format.

Tasks, evaluation, the experiment, the analyses and the views all name the same few numbers; they
look them up here rather than each keeping a table, so "token accuracy" is spelt, ordered and
formatted the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass


def compact(x: float) -> str:
    """A statistic as tables and verdicts print it: 3 significant digits, small ones in
    e-notation (0.0154, 2.44e-04)."""
    return f"{x:.3g}" if x == 0 or abs(x) >= 1e-3 else f"{x:.2e}"


@dataclass(frozen=True)
class Metric:
    """A number a task is judged by."""

    key: str  # as evaluate() and ExperimentResult report it
    label: str  # what a person reads
    higher_is_better: bool
    percent: bool  # a share in 0..1, shown as a percentage

    def format(self, value: float) -> str:
        """The value as shown: shares as a percentage, others to 3 decimals."""
        return f"{100 * value:.1f}%" if self.percent else f"{value:.3f}"

    def format_change(self, diff: float) -> str:
        """A signed change: shares in percentage points, others to 3 decimals."""
        return f"{100 * diff:+.1f} points" if self.percent else f"{diff:+.3f}"


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("token_accuracy", "token accuracy", True, True),
        Metric("sequence_accuracy", "sequence accuracy", True, True),
        Metric("accuracy", "accuracy", True, True),
        Metric("mae", "mean absolute error", False, False),
        Metric("loss", "loss", False, False),
    )
}


def metric(key: str) -> Metric:
    """The Metric named key; ValueError listing the known keys otherwise."""
    try:
        return METRICS[key]
    except (KeyError, TypeError):
        raise ValueError(f"unknown metric {key!r}; known: {', '.join(METRICS)}") from None


def headline(key: str, numbers: dict) -> tuple[str, str] | None:
    """(label, formatted value) of metric key in an evaluate() dict; None if it is absent."""
    if key not in numbers:
        return None
    m = metric(key)
    return m.label, m.format(float(numbers[key]))
