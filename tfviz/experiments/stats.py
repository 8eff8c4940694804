"""Student's t distribution and Welch's confidence interval, without scipy (not a dependency).

tfviz.experiments.experiment compares the runs of two conditions with `welch_interval`: the
difference of their means with a Welch t interval, whose quantile comes from the exact t CDF
(`t_quantile`, by bisection on `t_cdf`, from the regularised incomplete beta function `betainc`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    # The continued fraction converges fast only on one side of the mean; use the symmetry there.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: float) -> float:
    """t_cdf's value, not remembered: t_quantile's bisection asks it for points it never asks
    again."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


# t_cdf and t_quantile are pure functions of two floats, each call dozens of continued fractions
# in Python, and every analysis of the same rows (the bundled atlases, read by a session, a
# lesson, a report) asks them the same questions again: remembered, bounded.
@functools.lru_cache(maxsize=65536)
def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df (> 0, not necessarily integer) degrees of freedom."""
    return _t_cdf(t, df)


@functools.lru_cache(maxsize=65536)
def t_quantile(p: float, df: float) -> float:
    """The t with t_cdf(t, df) = p, by bisection on the exact CDF (scipy is not a dependency)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class Interval:
    """Difference of two means (a - b) with a Welch confidence interval."""

    difference: float
    low: float
    high: float
    df: float
    confidence: float


def welch_interval(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Interval:
    """Welch's t interval for mean(a) - mean(b); needs at least two values on each side.

    df = (s_a^2/n_a + s_b^2/n_b)^2 / ((s_a^2/n_a)^2/(n_a-1) + (s_b^2/n_b)^2/(n_b-1))
    (Welch-Satterthwaite). If both samples have no spread, the interval is the difference itself.
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if len(a) < 2 or len(b) < 2:
        raise ValueError("a confidence interval needs at least two runs per condition")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff = float(a.mean() - b.mean())
    se2 = va + vb
    if se2 == 0:
        return Interval(diff, diff, diff, float(len(a) + len(b) - 2), confidence)
    df = se2**2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(se2)
    return Interval(diff, diff - half, diff + half, float(df), confidence)


def welch_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t test of mean(a) = mean(b) (1.0 when neither has spread
    and the means are equal, 0.0 when neither has spread and they differ)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if len(a) < 2 or len(b) < 2:
        raise ValueError("a t test needs at least two runs per condition")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff = float(a.mean() - b.mean())
    if va + vb == 0:
        return 1.0 if diff == 0 else 0.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t = abs(diff) / math.sqrt(va + vb)
    return min(1.0, 2.0 * (1.0 - t_cdf(t, df)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest of m is
    multiplied by m - i (i from 0), made monotone, capped at 1. Rejecting where the adjusted
    p < alpha keeps the chance of any false claim among the m at most alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
