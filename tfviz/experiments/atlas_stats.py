"""The atlas's numbers: per cell and arm, the learned W_o against the other arm, with intervals
and Holm's correction across cells. Values and codes only; the app words them (both languages).

Measures (MEASURES), each as learned - other over seeds, Welch 95% interval:
- "steps": steps to reach the task's target; a run that never did counts at its budget, so for
  such cells the difference is a bound (Comparison.censored counts those runs);
- "final_loss": mean training loss over the last 5% of the steps a run made;
- "metric": the task's metric on fresh examples when the run stopped.

A cell whose learned arm did not reach its target in every seed is "not_trained": nothing is read
from it. Otherwise, per arm and measure, the two-sided Welch p-values of all trained cells are
adjusted together with Holm's method (m = the number of trained cells compared), and a cell's
verdict (VERDICTS) says W_o "helps" or "hurts" only where the adjusted p < ALPHA; else "unclear".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tfviz.experiments.atlas_cells import MECHANISM_ARM, Cell
from tfviz.experiments.stats import Interval, holm, welch_interval, welch_p_value

MEASURES = ("steps", "final_loss", "metric")
HEADLINE = "steps"  # what the atlas grid is coloured by
ALPHA = 0.05
VERDICTS = ("helps", "hurts", "unclear", "not_trained", "missing")


@dataclass(frozen=True)
class Comparison:
    """One measure of one cell: the learned W_o against another arm."""

    cell: str
    arm: str
    measure: str
    learned: tuple[float, ...]  # per seed, in seed order
    other: tuple[float, ...]
    interval: Interval | None  # of learned - other; None with fewer than 2 seeds a side
    p: float | None  # two-sided Welch p-value
    p_holm: float | None = None  # adjusted across the cells of this arm and measure
    censored: int = 0  # runs of the two arms that never reached the target (steps only)
    lower_is_better: bool = True

    @property
    def difference(self) -> float:
        return float(np.mean(self.learned) - np.mean(self.other))

    @property
    def verdict(self) -> str:
        """ "helps": the learned W_o does better, Holm-adjusted p < ALPHA; "hurts": worse;
        "unclear": otherwise."""
        if self.p_holm is None or self.p_holm >= ALPHA:
            return "unclear"
        better = (self.difference < 0) == self.lower_is_better
        return "helps" if better else "hurts"


@dataclass(frozen=True)
class CellResult:
    """What the atlas knows of one cell."""

    cell: Cell
    seeds: int  # seeds of the learned arm
    learned_reached: int  # of them, how many reached the target
    arms: tuple[str, ...]  # arms with rows
    comparisons: dict  # (arm, measure) -> Comparison

    @property
    def trained(self) -> bool:
        return self.seeds > 0 and self.learned_reached == self.seeds

    def verdict(self, arm: str = "identity", measure: str = HEADLINE) -> str:
        if not self.trained:
            return "not_trained"
        c = self.comparisons.get((arm, measure))
        return "missing" if c is None else c.verdict


def _value(row: dict, measure: str) -> float:
    if measure == "steps":
        s = row["steps_to_target"]
        return float(row["budget"] if s is None else s)
    if measure == "final_loss":
        return float(row["final_loss"])
    return float(row["metric_value"])


def compared(
    cell: str,
    arm: str,
    measure: str,
    learned: list[float],
    other: list[float],
    lower_is_better: bool = True,
    censored: int = 0,
) -> Comparison:
    """The learned arm's values against another's (paired by seed, in seed order), with Welch's
    interval and p where each side has two seeds or more."""
    enough = len(learned) >= 2
    return Comparison(
        cell=cell,
        arm=arm,
        measure=measure,
        learned=tuple(learned),
        other=tuple(other),
        interval=welch_interval(learned, other) if enough else None,
        p=welch_p_value(learned, other) if enough else None,
        censored=censored,
        lower_is_better=lower_is_better,
    )


def analyse(rows: dict[str, dict] | list[dict]) -> dict[str, CellResult]:
    """Every cell with rows, by cell key, with its comparisons and Holm-adjusted p-values."""
    rows = list(rows.values()) if isinstance(rows, dict) else list(rows)
    by_cell: dict[str, dict[str, dict[int, dict]]] = {}
    for row in rows:
        by_cell.setdefault(row["cell"], {}).setdefault(row["arm"], {})[int(row["seed"])] = row
    results = {}
    for key, arms in sorted(by_cell.items()):
        learned = arms.get("learned", {})
        reached = sum(r["steps_to_target"] is not None for r in learned.values())
        comparisons = {}
        for arm, others in arms.items():
            if arm == "learned":
                continue
            seeds = sorted(set(learned) & set(others))  # paired by seed: same data, same init
            for measure in MEASURES:
                a = [_value(learned[s], measure) for s in seeds]
                b = [_value(others[s], measure) for s in seeds]
                metric = learned[seeds[0]]["metric"] if seeds else "accuracy"
                censored = 0
                if measure == "steps":
                    censored = sum(
                        r[s]["steps_to_target"] is None for r in (learned, others) for s in seeds
                    )
                comparisons[(arm, measure)] = compared(
                    key, arm, measure, a, b, measure != "metric" or metric == "mae", censored
                )
        results[key] = CellResult(
            cell=Cell.from_key(key),
            seeds=len(learned),
            learned_reached=reached,
            arms=tuple(sorted(arms)),
            comparisons=comparisons,
        )
    return _with_holm(results)


def _with_holm(results: dict[str, CellResult]) -> dict[str, CellResult]:
    """Adjust each (arm, measure)'s p-values across the trained cells that have them."""
    families: dict[tuple, list[tuple[str, Comparison]]] = {}
    for key, res in results.items():
        if not res.trained:
            continue
        for what, comp in res.comparisons.items():
            if comp.p is not None:
                families.setdefault(what, []).append((key, comp))
    for what, members in families.items():
        adjusted = holm([c.p for _, c in members])
        for (key, comp), p_adj in zip(members, adjusted, strict=True):
            results[key].comparisons[what] = replace(comp, p_holm=p_adj)
    return results


def family_size(results: dict[str, CellResult], arm: str, measure: str = HEADLINE) -> int:
    """m of Holm's correction for an arm and measure: the trained cells compared."""
    return sum(
        1
        for r in results.values()
        if r.trained and (c := r.comparisons.get((arm, measure))) and c.p is not None
    )


@dataclass(frozen=True)
class Mechanism:
    """The mechanism run in one cell: does an identity W_o with its own readout of the
    attention output recover the learned arm? (the hypothesis: yes, where W_o helps)."""

    cell: str
    identity: Comparison  # learned - identity
    readout: Comparison  # learned - identity_readout

    @property
    def recovers(self) -> bool | None:
        """True: W_o helps here and the readout arm is not told apart from the learned one;
        False: W_o helps and the readout arm is still worse; None: W_o does not help here."""
        if self.identity.verdict != "helps":
            return None
        iv = self.readout.interval
        return iv is not None and iv.low <= 0 <= iv.high or self.readout.verdict == "hurts"


def mechanism(results: dict[str, CellResult], measure: str = HEADLINE) -> list[Mechanism]:
    """The cells that ran the mechanism arm, trained, with both comparisons."""
    out = []
    for key, res in results.items():
        ident = res.comparisons.get(("identity", measure))
        readout = res.comparisons.get((MECHANISM_ARM, measure))
        if res.trained and ident is not None and readout is not None:
            out.append(Mechanism(key, ident, readout))
    return out


def curves(
    rows: dict[str, dict] | list[dict], cell: str, field: str = "curve"
) -> dict[str, list[tuple[int, list]]]:
    """A cell's curves: arm -> [(seed, the row's field)]; by default the training loss, the mean
    of every CURVE_EVERY steps (the language atlas's "valid_curve" is [[step, loss], ...])."""
    rows = list(rows.values()) if isinstance(rows, dict) else list(rows)
    out: dict[str, list[tuple[int, list]]] = {}
    for row in sorted(rows, key=lambda r: (r["arm"], r["seed"])):
        if row["cell"] == cell:
            out.setdefault(row["arm"], []).append((int(row["seed"]), list(row[field])))
    return out


def relative(comp: Comparison, budget: float) -> float:
    """The difference scaled for a colour: other - learned over the budget (steps), or over the
    larger mean (loss, metric); positive where the learned W_o does better."""
    d = -comp.difference if comp.lower_is_better else comp.difference
    if comp.measure == "steps":
        return d / budget
    scale = max(abs(np.mean(comp.learned)), abs(np.mean(comp.other)), 1e-12)
    return float(d / scale) if math.isfinite(d) else 0.0


@dataclass(frozen=True)
class ArmMeans:
    """A measure's mean over seeds, per cell and arm, with the half-width of its 95% interval
    (Student's t over the seeds): what the lesson's mechanism chart draws."""

    cells: tuple[str, ...]
    arms: tuple[str, ...]
    mean: np.ndarray  # (cells, arms); NaN where an arm has no runs in a cell
    half_width: np.ndarray  # (cells, arms); 0 with fewer than two runs


def arm_means(
    rows: dict[str, dict] | list[dict], cells: list[str], arms: tuple[str, ...], measure: str
) -> ArmMeans:
    from tfviz.experiments.stats import t_quantile

    rows = list(rows.values()) if isinstance(rows, dict) else list(rows)
    mean = np.full((len(cells), len(arms)), np.nan)
    half = np.zeros((len(cells), len(arms)))
    for i, cell in enumerate(cells):
        for j, arm in enumerate(arms):
            x = np.array(
                [_value(r, measure) for r in rows if r["cell"] == cell and r["arm"] == arm]
            )
            if len(x):
                mean[i, j] = x.mean()
            if len(x) > 1:
                half[i, j] = t_quantile(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return ArmMeans(tuple(cells), tuple(arms), mean, half)


def verdict_counts(
    results: dict[str, CellResult], arm: str, measure: str = HEADLINE, **where
) -> dict[str, int]:
    """How many cells have each verdict for an arm on a measure, among the cells whose Cell fields
    equal `where` (e.g. ffn=False); every verdict of VERDICTS is a key."""
    counts = dict.fromkeys(VERDICTS, 0)
    for res in results.values():
        if all(getattr(res.cell, k) == v for k, v in where.items()):
            counts[res.verdict(arm, measure)] += 1
    return counts


def largest_difference(
    results: dict[str, CellResult], arm: str, measure: str = HEADLINE, **where
) -> Comparison | None:
    """Among the trained cells (whose Cell fields equal `where`) with an interval for the learned
    W_o against arm: the comparison whose difference is largest in size, what a lesson quotes
    with its interval and Holm-adjusted p; None when there is none."""
    found = [
        c
        for res in results.values()
        if res.trained and all(getattr(res.cell, k) == v for k, v in where.items())
        for c in [res.comparisons.get((arm, measure))]
        if c is not None and c.interval is not None
    ]
    return max(found, key=lambda c: abs(c.difference), default=None)


@dataclass(frozen=True)
class Hint:
    """The mechanism run in the cells that did not train (partly trained models): what their
    final loss suggests, from unadjusted 95% intervals: a hint, not a finding."""

    cells: tuple[str, ...]  # untrained cells with the mechanism arm
    helped: tuple[str, ...]  # of them, where the learned W_o's loss is lower than no W_o's
    recovered: tuple[str, ...]  # of those, where the readout arm is not told apart from learned


def mechanism_hint(results: dict[str, CellResult], measure: str = "final_loss") -> Hint:
    cells, helped, recovered = [], [], []
    for key, res in results.items():
        ident = res.comparisons.get(("identity", measure))
        readout = res.comparisons.get((MECHANISM_ARM, measure))
        if res.trained or ident is None or readout is None or ident.interval is None:
            continue
        cells.append(key)
        better = (ident.difference < 0) == ident.lower_is_better
        if better and not ident.interval.low <= 0 <= ident.interval.high:
            helped.append(key)
            iv = readout.interval
            if iv is not None and iv.low <= 0 <= iv.high:
                recovered.append(key)
    return Hint(tuple(cells), tuple(helped), tuple(recovered))


# ---- the cells that did not train, given a longer budget ---------------------------------------
# What a cell that did not train within its recipe's steps became with a longer budget (the rows of
# tfviz.experiments.atlas_store.LONGER, analysed on their own: their own Holm family):
# "read": the learned W_o reached the target in every seed, and the cell is read at that budget;
# "trains": it did, but only the learned arm ran there (nothing to compare yet); "partly": it
# reached the target in some seeds; "none": in none; "pending": no longer runs yet.
LONGER_STATES = ("read", "trains", "partly", "none", "pending")


@dataclass(frozen=True)
class Longer:
    """One cell that did not train within its recipe, at the longer budget."""

    cell: str
    state: str  # one of LONGER_STATES
    budget: int | None  # the longer runs' steps (None: pending)
    seeds: int  # learned-arm runs at that budget
    reached: int  # of them, how many reached the target
    result: CellResult | None  # the cell at that budget (None: pending)


def longer(results: dict[str, CellResult], longer_rows: dict[str, dict] | list[dict]) -> dict:
    """Every cell of results that did not train, by key, as the longer rows leave it (Longer)."""
    rows = list(longer_rows.values()) if isinstance(longer_rows, dict) else list(longer_rows)
    at = analyse(rows)
    budgets: dict[str, int] = {}
    for row in rows:
        budgets[row["cell"]] = max(budgets.get(row["cell"], 0), int(row["budget"]))
    out = {}
    for key, res in results.items():
        if res.trained:
            continue
        got = at.get(key)
        if got is None or got.seeds == 0:
            out[key] = Longer(key, "pending", None, 0, 0, None)
            continue
        if got.trained:
            state = "read" if got.comparisons else "trains"
        else:
            state = "partly" if got.learned_reached else "none"
        out[key] = Longer(key, state, budgets[key], got.seeds, got.learned_reached, got)
    return out


def longer_counts(read: dict) -> dict[str, int]:
    """How many cells are in each of LONGER_STATES."""
    counts = dict.fromkeys(LONGER_STATES, 0)
    for item in read.values():
        counts[item.state] += 1
    return counts


# ---- the language atlas (tfviz.experiments.language_atlas) -----------------------------------
# Its measures, each learned - other over seeds with Welch's interval and Holm's correction across
# the cells of an arm: the validation loss (nats per character) at the end of the budget and half
# way (the curve's slice), the final training loss, and the best head's induction score.
LANGUAGE_MEASURES = ("valid_loss", "valid_mid", "final_loss", "induction")
LANGUAGE_HEADLINE = "valid_loss"


def _language_value(row: dict, measure: str) -> float:
    if measure == "valid_mid":
        half = row["steps"] // 2
        return float(next(v for step, v in row["valid_curve"] if step >= half))
    if measure == "induction":
        return float(row["induction"]["score"])
    return float(row[measure])


def analyse_language(rows: dict[str, dict] | list[dict]) -> dict[str, CellResult]:
    """Every cell of the language atlas with rows, by cell key: each arm against the learned one
    on each measure (LANGUAGE_MEASURES), seeds paired, Holm-adjusted across cells. There is no
    target: every cell counts as trained (CellResult.trained)."""
    from tfviz.experiments.atlas_cells import LanguageCell

    rows = list(rows.values()) if isinstance(rows, dict) else list(rows)
    by_cell: dict[str, dict[str, dict[int, dict]]] = {}
    for row in rows:
        by_cell.setdefault(row["cell"], {}).setdefault(row["arm"], {})[int(row["seed"])] = row
    results = {}
    for key, arms in sorted(by_cell.items()):
        learned = arms.get("learned", {})
        comparisons = {}
        for arm, others in arms.items():
            if arm == "learned":
                continue
            seeds = sorted(set(learned) & set(others))
            for measure in LANGUAGE_MEASURES:
                a = [_language_value(learned[s], measure) for s in seeds]
                b = [_language_value(others[s], measure) for s in seeds]
                comparisons[(arm, measure)] = compared(
                    key, arm, measure, a, b, lower_is_better=measure != "induction"
                )
        results[key] = CellResult(
            cell=LanguageCell.from_key(key),
            seeds=len(learned),
            learned_reached=len(learned),
            arms=tuple(sorted(arms)),
            comparisons=comparisons,
        )
    return _with_holm(results)


def language_arm_values(
    rows: dict[str, dict] | list[dict], cell: str, arm: str, measure: str
) -> list[float]:
    """One arm's values of a measure in one cell, in seed order."""
    rows = list(rows.values()) if isinstance(rows, dict) else list(rows)
    found = sorted(
        (r for r in rows if r["cell"] == cell and r["arm"] == arm), key=lambda r: r["seed"]
    )
    return [_language_value(r, measure) for r in found]


def language_values_by_arm(rows: dict[str, dict] | list[dict], measure: str) -> dict[str, list]:
    """Every run's value of a measure, by arm, over all cells (e.g. the induction scores the
    runs of each arm reached)."""
    rows = list(rows.values()) if isinstance(rows, dict) else list(rows)
    out: dict[str, list[float]] = {}
    for row in sorted(rows, key=lambda r: (r["arm"], r["cell"], r["seed"])):
        out.setdefault(row["arm"], []).append(_language_value(row, measure))
    return out
