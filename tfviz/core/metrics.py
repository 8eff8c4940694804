"""One vocabulary of metrics: the key evaluate() reports, the name a person reads, the format.

Tasks, evaluation, the experiment, the analyses and the views all name the same few numbers; they
look them up here rather than each keeping a table, so "token accuracy" is spelt, ordered and
formatted the same everywhere. A metric's name is in the catalogue (tfviz.words), in every
language, under the key its Metric gives (`name_key`: "metric.mae.name"; `short_key` where a
table's column has less room: "metric.mae.short", MAE); the views word it through
tfviz.ui.labels.metric_name, the library's English (`label`) is the same entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfviz.words import english

NAMES = "metric."  # a metric's catalogue keys: NAMES + key + ".name" (and ".short")


def compact(x: float) -> str:
    """A statistic as tables and verdicts print it: 3 significant digits, small ones in
    e-notation (0.0154, 2.44e-04)."""
    return f"{x:.3g}" if x == 0 or abs(x) >= 1e-3 else f"{x:.2e}"


@dataclass(frozen=True)
class Metric:
    """A number a task is judged by."""

    key: str  # as evaluate() and ExperimentResult report it
    higher_is_better: bool
    percent: bool  # a share in 0..1, shown as a percentage

    @property
    def name_key(self) -> str:
        """The catalogue key of its name, as a sentence says it ("token accuracy")."""
        return f"{NAMES}{self.key}.name"

    @property
    def short_key(self) -> str:
        """The catalogue key of its short name, where the catalogue has one ("MAE")."""
        return f"{NAMES}{self.key}.short"

    @property
    def label(self) -> str:
        """Its name in English (the command line, a report): the catalogue's."""
        return english(self.name_key)

    def format(self, value: float) -> str:
        """The value as shown: shares as a percentage, others to 3 decimals."""
        return f"{100 * value:.1f}%" if self.percent else f"{value:.3f}"

    def format_change(self, diff: float) -> str:
        """A signed change: shares in percentage points, others to 3 decimals."""
        return f"{100 * diff:+.1f} points" if self.percent else f"{diff:+.3f}"


METRICS: dict[str, Metric] = {
    m.key: m
    for m in (
        Metric("token_accuracy", True, True),
        Metric("sequence_accuracy", True, True),
        Metric("accuracy", True, True),
        Metric("mae", False, False),
        Metric("loss", False, False),
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
