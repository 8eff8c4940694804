"""What one comparison of an experiment shows, as values: the app words them in the page's
language, tfviz.experiments.experiment_report in English (the shipped README, the command line).

A `Verdict` holds the scope (runs per condition, steps, sizes, whether it was cancelled), one
tfviz.experiments.experiment.Row per quantity, each with its `outcome` (better, worse, unclear,
no_interval: no more than its interval allows), and the bundled model's target when no run reached
it (the models are then partly trained, and the comparison says nothing about fully trained ones).
"""

from __future__ import annotations

from dataclasses import dataclass

from tfviz.experiments import atlas  # the atlas's targets: one definition of "learned"
from tfviz.experiments.experiment import ExperimentResult, Row, check_against, compare


@dataclass(frozen=True)
class Target:
    """A bundled model's target on its task's metric, e.g. token_accuracy >= 0.98."""

    metric: str
    op: str  # ">=" or "<="
    bound: float


@dataclass(frozen=True)
class Verdict:
    """One comparison of the learned W_o with `against`, as values."""

    task: str
    against: str
    n_learned: int  # finished runs with the learned W_o
    n_against: int
    steps: int | None
    batch_size: int | None
    lr: float | None
    d_model: int | None
    n_layers: int | None
    n_heads: int | None
    cancelled: bool  # stopped before the end: only finished runs are counted
    rows: tuple[Row, ...]  # one per quantity; empty when a condition has no finished run
    # the target a run with the learned W_o did not reach; None when every one did
    unreached: Target | None

    @property
    def comparable(self) -> bool:
        """Both conditions have a finished run."""
        return min(self.n_learned, self.n_against) > 0


def verdict_of(result: ExperimentResult, against: str = "identity") -> Verdict:
    """The values of what result shows for the learned W_o against `against`."""
    check_against(against)
    s = result.settings
    sizes = s.get("sizes", {})
    n_learned, n_against = (len(result.runs_of(c)) for c in ("learned", against))
    comparable = min(n_learned, n_against) > 0
    return Verdict(
        task=result.task,
        against=against,
        n_learned=n_learned,
        n_against=n_against,
        steps=s.get("steps"),
        batch_size=s.get("batch_size"),
        lr=s.get("lr"),
        d_model=sizes.get("d_model"),
        n_layers=sizes.get("n_layers"),
        n_heads=sizes.get("n_heads"),
        cancelled=result.cancelled,
        rows=tuple(compare(result, against=against)) if comparable else (),
        unreached=unreached_target(result) if comparable else None,
    )


def unreached_target(result: ExperimentResult) -> Target | None:
    """The task's target when a run with the learned W_o did not reach it: the atlas's rule
    (tfviz.experiments.atlas.TARGET, tfviz.experiments.atlas_stats): a comparison is read only when
    every learned run learned the task; otherwise it compares models that did not learn, and says
    so."""
    task = result.task
    if task not in atlas.TARGET:
        return None
    metric = result.metric
    values = [r.metrics[metric] for r in result.runs_of("learned") if metric in r.metrics]
    if not values or all(atlas.reached(task, v) for v in values):
        return None
    return Target(metric, "<=" if metric == "mae" else ">=", atlas.TARGET[task])
