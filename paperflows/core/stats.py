"""Statistics for claims: confidence intervals over seeds that keep their coverage at 3-10 seeds.

Each result names its point estimate after the statistic (``mean``, ``median``, ``ratio``, ``slope``) beside
``ci_low`` and ``ci_high``. The intervals, chosen for small n (``tests/test_stats.py`` simulates the coverage
of each at n = 3, 5 and 10 on normal and log-normal samples and shows that the percentile bootstrap used
before fails it):

* **mean, paired difference**: Student-t, exact for normal samples at any n. A percentile bootstrap covers
  75% at 3 seeds and 83% at 5 for a nominal 95%, because it knows no better than the seeds' range.
* **ratio of means, log-log slope**: the jackknife over seeds with Student-t quantiles on n - 1 degrees of
  freedom (a ratio of positive means on the log scale). For a mean the jackknife-t interval *is* the t
  interval; for these smooth statistics it is its delta-method generalisation.
* **median, ratio of medians, k-th largest of several medians**: distribution-free order statistics (a binomial
  argument, no shape assumed; Bonferroni where several medians must hold together).
  Below 6 seeds no pair of order statistics covers the median with 95%, and the interval is NaN (no
  interval: a claim on it is inconclusive) rather than one that claims a coverage it does not have.
* **proportion of independent items** (k of n items pooled, not a mean over seeds): Clopper-Pearson, exact
  (conservative) at any n; the tests compute its coverage at the item counts used.

One seed gives no interval (NaN): a single seed cannot show spread. Zero spread (every seed equal, as for an
exact computation) gives the point itself.

A claim reads a two-sided 95% interval strictly on its side of the threshold (:mod:`paperflows.core.claims`), which is a
one-sided test at the 2.5% level; every claim in the project uses that one rule.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

CONFIDENCE = 0.95
NAN_INTERVAL = (float("nan"), float("nan"))
_LEVEL: ContextVar[float] = ContextVar("confidence", default=CONFIDENCE)


@contextmanager
def confidence_level(confidence: float) -> Iterator[None]:
    """Every interval built inside the block (by a function here whose ``confidence`` is left out) has level
    ``confidence``: how an evaluation is run at a sequential look's level (:mod:`paperflows.core.sequential`) without
    threading the level through every paper's code."""
    token = _LEVEL.set(confidence)
    try:
        yield
    finally:
        _LEVEL.reset(token)


def _level(confidence: float | None) -> float:
    return _LEVEL.get() if confidence is None else confidence


def _sample(values: Sequence[float], name: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name} needs a non-empty 1-D sample, got shape {x.shape}")
    return x


def _paired(a: Sequence[float], b: Sequence[float], name: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"{name} needs paired 1-D samples, got shapes {x.shape} and {y.shape}")
    return x, y


def _t_quantile(n: int, confidence: float | None) -> float:
    return float(sps.t.ppf(0.5 + _level(confidence) / 2.0, n - 1))


def t_interval(values: Sequence[float], confidence: float | None = None) -> tuple[float, float]:
    """Student-t interval of the mean of ``values`` (shape (n,)); NaN for n = 1."""
    x = _sample(values, "t_interval")
    if x.size < 2:
        return NAN_INTERVAL
    mean, half = float(x.mean()), _t_quantile(x.size, confidence) * float(x.std(ddof=1)) / float(np.sqrt(x.size))
    return mean - half, mean + half


def jackknife_t_interval(statistic: Callable[..., float], samples: Sequence[np.ndarray], estimate: float,
                         confidence: float | None = None) -> tuple[float, float]:
    """``estimate`` +- t_{n-1} x the jackknife standard error of ``statistic`` over the last axis of every
    sample (paired seeds are left out together). NaN for n = 1 or where a leave-one-out value is undefined."""
    n = samples[0].shape[-1]
    if n < 2:
        return NAN_INTERVAL
    keep = ~np.eye(n, dtype=bool)
    leave_one_out = np.array([statistic(*(s[..., keep[i]] for s in samples)) for i in range(n)], dtype=float)
    if not np.all(np.isfinite(leave_one_out)):
        return NAN_INTERVAL
    se = float(np.sqrt((n - 1) / n * np.sum((leave_one_out - leave_one_out.mean()) ** 2)))
    half = _t_quantile(n, confidence) * se
    return float(estimate - half), float(estimate + half)


def mean_ci(values: Sequence[float], confidence: float | None = None) -> tuple[float, float, float]:
    """Mean and Student-t interval of the mean of ``values`` (shape (n,))."""
    x = _sample(values, "mean_ci")
    return (float(x.mean()), *t_interval(x, confidence))


def summarize(values: Sequence[float]) -> dict[str, float]:
    """``{"mean", "ci_low", "ci_high", "std", "n"}`` of a sample over seeds (Student-t interval)."""
    x = np.asarray(values, dtype=float)
    mean, low, high = mean_ci(x)
    return {"mean": mean, "ci_low": low, "ci_high": high,
            "std": float(x.std(ddof=1)) if x.size > 1 else 0.0, "n": int(x.size)}


def summarize_by(frame: pd.DataFrame, by: str | Sequence[str], values: str | Sequence[str]) -> dict[str, Any]:
    """Per-seed rows -> a nested dict of :func:`summarize` results, one level per column of ``by``.

    ``summarize_by(rows, "method", "acc")`` gives ``{"sgd": {"mean", "ci_low", ...}, ...}``;
    with a list of values the leaves are ``{"acc": {...}, "loss": {...}}``. Group keys become strings.
    """
    by = [by] if isinstance(by, str) else list(by)
    if not by:
        if isinstance(values, str):
            return summarize(frame[values].to_numpy())
        return {column: summarize(frame[column].to_numpy()) for column in values}
    return {str(key[0] if isinstance(key, tuple) else key): summarize_by(group, by[1:], values)
            for key, group in frame.groupby(by[0], sort=False)}


def paired_difference(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Summary of ``a - b`` over paired seeds (Student-t interval), plus a two-sided paired t-test p-value."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in shape: {a.shape} vs {b.shape}")
    out = summarize(a - b)
    out["p_value"] = float(sps.ttest_rel(a, b).pvalue) if a.size > 1 and np.ptp(a - b) > 0 else float("nan")
    return out


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log y against log x (the exponent of a power law y ~ x^slope)."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    if lx.size < 2:
        raise ValueError("a slope needs at least two points")
    return float(np.polyfit(lx, ly, 1)[0])


def geometric_mean(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    if np.any(x <= 0):
        raise ValueError("geometric mean needs positive values")
    return float(np.exp(np.log(x).mean()))


def ratio_of_means(numerator: Sequence[float], denominator: Sequence[float],
                   confidence: float | None = None) -> dict[str, float]:
    """``{"ratio", "ci_low", "ci_high"}``: ``mean(numerator) / mean(denominator)`` over paired seeds
    (shapes (n,)), with a jackknife-t interval: on the log scale when both means are positive (a ratio's
    sampling distribution is closer to normal there), on the ratio's own scale otherwise."""
    num, den = _paired(numerator, denominator, "ratio_of_means")
    ratio = float(num.mean() / den.mean())
    if num.mean() > 0 and den.mean() > 0:
        def log_ratio(a: np.ndarray, b: np.ndarray) -> float:
            ma, mb = a.mean(), b.mean()
            return float(np.log(ma / mb)) if ma > 0 and mb > 0 else float("nan")

        low, high = np.exp(jackknife_t_interval(log_ratio, [num, den], float(np.log(ratio)), confidence))
    else:
        low, high = jackknife_t_interval(lambda a, b: float(a.mean() / b.mean()), [num, den], ratio, confidence)
    return {"ratio": ratio, "ci_low": float(low), "ci_high": float(high)}


def loglog_slope_ci(x: Sequence[float], y_by_seed: np.ndarray, confidence: float | None = None) -> dict[str, float]:
    """``{"slope", "ci_low", "ci_high"}``: log-log slope of the seed-mean of ``y_by_seed`` (shape
    (len(x), n_seeds)) against ``x``, with a jackknife-t interval over seeds."""
    y = np.asarray(y_by_seed, dtype=float)
    if y.ndim != 2 or y.shape[0] != len(x):
        raise ValueError(f"y_by_seed must have shape (len(x), n_seeds), got {y.shape}")
    slope = loglog_slope(x, y.mean(axis=1))
    low, high = jackknife_t_interval(lambda ys: loglog_slope(x, ys.mean(axis=1)), [y], slope, confidence)
    return {"slope": slope, "ci_low": low, "ci_high": high}


def order_statistic_ranks(n: int, confidence: float | None = None) -> tuple[int, int] | None:
    """0-based ranks (k, n - 1 - k) of the narrowest symmetric pair of order statistics that covers the
    median of any continuous distribution with at least ``confidence``; None when even (min, max) does not
    (n < 6 at 95%): P(x_(k) <= median <= x_(n-1-k)) = 1 - 2 P(Binomial(n, 1/2) <= k)."""
    best = None
    for k in range(n // 2):
        if 1.0 - 2.0 * sps.binom.cdf(k, n, 0.5) >= _level(confidence):
            best = (k, n - 1 - k)
        else:
            break
    return best


def median_ci(values: Sequence[float], confidence: float | None = None) -> dict[str, float]:
    """``{"median", "ci_low", "ci_high"}``: the median over seeds with a distribution-free order-statistic
    interval (NaN below the seed count that can reach ``confidence``: 6 at 95%)."""
    x = _sample(values, "median_ci")
    median = float(np.median(x))
    ranks = order_statistic_ranks(x.size, confidence)
    if ranks is None:
        return {"median": median, "ci_low": float("nan"), "ci_high": float("nan")}
    ordered = np.sort(x)
    return {"median": median, "ci_low": float(ordered[ranks[0]]), "ci_high": float(ordered[ranks[1]])}


def ranked_median(samples: np.ndarray, rank: int, confidence: float | None = None) -> dict[str, float]:
    """``{"value", "ci_low", "ci_high"}``: the ``rank``-th largest (1 = the largest) of the medians of the rows of
    ``samples`` (shape (groups, n seeds)), e.g. "at least 2 of 3 attacks reach t" is ``rank=2`` >= t.

    The interval is that statistic of the rows' order-statistic intervals, each at confidence
    1 - (1 - confidence) / groups (Bonferroni: all hold together with at least ``confidence``). An order statistic
    of several numbers is non-decreasing in each of them, so whenever every row's interval covers its median the
    ranked lows and highs bracket the ranked true medians. NaN below the seed count that reaches the per-row level
    (7 seeds for 3 rows at 95%).
    """
    x = np.asarray(samples, dtype=float)
    if x.ndim != 2 or not 1 <= rank <= x.shape[0]:
        raise ValueError(f"ranked_median needs (groups, n) samples and 1 <= rank <= groups, got shape {x.shape}, "
                         f"rank {rank}")
    each = 1.0 - (1.0 - _level(confidence)) / x.shape[0]
    rows = [median_ci(row, each) for row in x]

    def ranked(key: str) -> float:
        return float(np.sort([r[key] for r in rows])[-rank])

    return {"value": ranked("median"), "ci_low": ranked("ci_low"), "ci_high": ranked("ci_high")}


def median_ratio(num: Sequence[float], den: Sequence[float], censor: float,
                 confidence: float | None = None) -> dict[str, float]:
    """``{"ratio", "ci_low", "ci_high"}``: median(num) / median(den) of positive times, where a value at or
    above ``censor`` means "never reached the criterion".

    The ratio is NaN where both medians are censored. The interval divides the two medians' order-statistic
    intervals, each at confidence (1 + confidence) / 2 (Bonferroni: both hold together with at least
    ``confidence``); a censored upper bound is unbounded (inf), so it leaves the ratio unbounded on that side.
    """
    a, b = _paired(num, den, "median_ratio")
    ma, mb = float(np.median(a)), float(np.median(b))
    ratio = float("nan") if ma >= censor and mb >= censor else ma / mb
    each = (1.0 + _level(confidence)) / 2.0
    ia, ib = median_ci(a, each), median_ci(b, each)
    if any(np.isnan(v) for v in (ia["ci_low"], ib["ci_low"])) or np.isnan(ratio):
        return {"ratio": ratio, "ci_low": float("nan"), "ci_high": float("nan")}

    def bound(value: float) -> float:
        return float("inf") if value >= censor else value

    low = ia["ci_low"] / bound(ib["ci_high"])
    high = bound(ia["ci_high"]) / ib["ci_low"]
    return {"ratio": ratio, "ci_low": float(low), "ci_high": float(high)}


def proportion_ci(k: int, n: int, confidence: float | None = None) -> dict[str, float]:
    """``{"mean", "ci_low", "ci_high", "n", "k"}``: the proportion ``k / n`` of ``n`` independent items (items
    pooled, e.g. over seeds, not one value per seed) with the Clopper-Pearson interval, at the block's level
    (:func:`confidence_level`) unless ``confidence`` is given. NaN with no items.

    Only for items that are independent given the proportion: items that share a seed's model and differ in
    their proportions between seeds make the interval too narrow (then take one proportion per seed and
    :func:`summarize` them). Clopper-Pearson inverts two exact binomial tests, so its coverage is at least
    ``confidence`` at every n and proportion (``tests/test_stats.py`` computes it at the item counts used).
    The Wilson score interval is narrower but its coverage oscillates below nominal: 0.929 at 7 of 84, the
    count delphi_autointerp's claim reads, for a nominal 0.95.
    """
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"proportion_ci needs 0 <= k <= n, got k = {k}, n = {n}")
    if n == 0:
        return {"mean": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "n": 0, "k": 0}
    tail = (1.0 - _level(confidence)) / 2.0
    low = float(sps.beta.ppf(tail, k, n - k + 1)) if k > 0 else 0.0
    high = float(sps.beta.ppf(1.0 - tail, k + 1, n - k)) if k < n else 1.0
    return {"mean": k / n, "ci_low": low, "ci_high": high, "n": int(n), "k": int(k)}
