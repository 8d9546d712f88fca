"""Statistics for claims: bootstrap confidence intervals over seeds, paired differences, ratios, slopes.

Every interval comes from one percentile bootstrap over seeds (:func:`_bootstrap_interval`) and every
result names its point estimate after the statistic (``mean``, ``median``, ``ratio``, ``slope``) beside
``ci_low`` and ``ci_high``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps


def _bootstrap_interval(statistic: Callable[..., np.ndarray], samples: Sequence[np.ndarray], estimate: float,
                        confidence: float, n_boot: int, seed: int) -> tuple[float, float]:
    """The one bootstrap of this module: resample the last axis of every sample with the same indices
    (paired seeds stay together), apply ``statistic`` to the resampled arrays (each gets a resample
    axis before the last: (n_boot, n) for a 1-D sample) and return the percentile interval.

    With one seed the interval is the estimate itself: a single seed cannot show spread. Where the
    statistic is undefined (NaN) on more than half the tail mass of the resamples, there is no interval.
    """
    n = samples[0].shape[-1]
    if n == 1:
        return estimate, estimate
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    boot = np.asarray(statistic(*(s[..., idx] for s in samples)), dtype=float)
    alpha = (1.0 - confidence) / 2.0
    undefined = np.isnan(boot)
    if undefined.any():
        if undefined.mean() > alpha:
            return float("nan"), float("nan")
        low, high = np.nanquantile(boot, [alpha, 1.0 - alpha])
    else:
        low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return float(low), float(high)


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


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, n_boot: int = 4000,
                 seed: int = 0) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap interval of the mean of ``values`` (shape (n,))."""
    x = _sample(values, "bootstrap_ci")
    mean = float(x.mean())
    return (mean, *_bootstrap_interval(lambda r: r.mean(axis=-1), [x], mean, confidence, n_boot, seed))


def summarize(values: Sequence[float], seed: int = 0) -> dict[str, float]:
    """``{"mean", "ci_low", "ci_high", "std", "n"}`` of a sample over seeds."""
    x = np.asarray(values, dtype=float)
    mean, low, high = bootstrap_ci(x, seed=seed)
    return {"mean": mean, "ci_low": low, "ci_high": high,
            "std": float(x.std(ddof=1)) if x.size > 1 else 0.0, "n": int(x.size)}


def summarize_by(frame: pd.DataFrame, by: str | Sequence[str], values: str | Sequence[str],
                 seed: int = 0) -> dict[str, Any]:
    """Per-seed rows -> a nested dict of :func:`summarize` results, one level per column of ``by``.

    ``summarize_by(rows, "method", "acc")`` gives ``{"sgd": {"mean", "ci_low", ...}, ...}``;
    with a list of values the leaves are ``{"acc": {...}, "loss": {...}}``. Group keys become
    strings, and rows keep their order within a group (the bootstrap resamples them in that order).
    """
    by = [by] if isinstance(by, str) else list(by)
    if not by:
        if isinstance(values, str):
            return summarize(frame[values].to_numpy(), seed=seed)
        return {column: summarize(frame[column].to_numpy(), seed=seed) for column in values}
    return {str(key[0] if isinstance(key, tuple) else key): summarize_by(group, by[1:], values, seed)
            for key, group in frame.groupby(by[0], sort=False)}


def paired_difference(a: Sequence[float], b: Sequence[float], seed: int = 0) -> dict[str, float]:
    """Summary of ``a - b`` over paired seeds, plus a two-sided paired t-test p-value."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in shape: {a.shape} vs {b.shape}")
    out = summarize(a - b, seed=seed)
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


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation; NaN when either side is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(sps.spearmanr(x, y).statistic)


def ratio_of_means(numerator: Sequence[float], denominator: Sequence[float], confidence: float = 0.95,
                   n_boot: int = 4000, seed: int = 0) -> dict[str, float]:
    """``{"ratio", "ci_low", "ci_high"}``: ``mean(numerator) / mean(denominator)`` over paired seeds
    (shapes (n,)), with a paired percentile-bootstrap interval (seeds resampled together)."""
    num, den = _paired(numerator, denominator, "ratio_of_means")
    ratio = float(num.mean() / den.mean())
    low, high = _bootstrap_interval(lambda a, b: a.mean(axis=-1) / b.mean(axis=-1), [num, den], ratio,
                                    confidence, n_boot, seed)
    return {"ratio": ratio, "ci_low": low, "ci_high": high}


def loglog_slope_ci(x: Sequence[float], y_by_seed: np.ndarray, confidence: float = 0.95, n_boot: int = 2000,
                    seed: int = 0) -> dict[str, float]:
    """``{"slope", "ci_low", "ci_high"}``: log-log slope of the seed-mean of ``y_by_seed`` (shape
    (len(x), n_seeds)) against ``x``, with a percentile-bootstrap interval over seeds."""
    y = np.asarray(y_by_seed, dtype=float)
    if y.ndim != 2 or y.shape[0] != len(x):
        raise ValueError(f"y_by_seed must have shape (len(x), n_seeds), got {y.shape}")
    slope = loglog_slope(x, y.mean(axis=1))
    lx = np.log(np.asarray(x, dtype=float))
    centred = lx - lx.mean()

    def slopes(resampled: np.ndarray) -> np.ndarray:  # (len(x), n_boot, n_seeds) -> (n_boot,)
        ly = np.log(np.maximum(resampled.mean(axis=2), 1e-300))
        return centred @ (ly - ly.mean(axis=0)) / (centred @ centred)

    low, high = _bootstrap_interval(slopes, [y], slope, confidence, n_boot, seed)
    return {"slope": slope, "ci_low": low, "ci_high": high}


def median_ratio(num: Sequence[float], den: Sequence[float], censor: float, n_boot: int = 4000, seed: int = 0
                 ) -> dict[str, float]:
    """``{"ratio", "ci_low", "ci_high"}``: median(num) / median(den) over paired seeds with a percentile
    bootstrap (seeds resampled together). NaN where both medians are censored (neither condition
    reached the criterion); no interval when that happens in too many resamples."""
    a, b = _paired(num, den, "median_ratio")

    def ratios(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        mx, my = np.median(x, axis=-1), np.median(y, axis=-1)
        return np.where((mx >= censor) & (my >= censor), np.nan, mx / my)

    ratio = float(ratios(a, b))
    low, high = _bootstrap_interval(ratios, [a, b], ratio, 0.95, n_boot, seed)
    return {"ratio": ratio, "ci_low": low, "ci_high": high}


def median_ci(values: Sequence[float], n_boot: int = 4000, seed: int = 0) -> dict[str, float]:
    """``{"median", "ci_low", "ci_high"}``: the median over seeds with a percentile-bootstrap interval."""
    x = _sample(values, "median_ci")
    median = float(np.median(x))
    low, high = _bootstrap_interval(lambda r: np.median(r, axis=-1), [x], median, 0.95, n_boot, seed)
    return {"median": median, "ci_low": low, "ci_high": high}
