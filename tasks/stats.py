"""Statistics for claims: bootstrap confidence intervals over seeds, paired differences, slopes."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats as sps


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95, n_boot: int = 4000,
                 seed: int = 0) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap interval of the mean of ``values`` (shape (n,)).

    With one value the interval is that value: a single seed cannot show spread.
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"bootstrap_ci needs a non-empty 1-D sample, got shape {x.shape}")
    mean = float(x.mean())
    if x.size == 1:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    resampled = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(resampled, [alpha, 1.0 - alpha])
    return mean, float(low), float(high)


def summarize(values: Sequence[float], seed: int = 0) -> dict[str, float]:
    """``{"mean", "ci_low", "ci_high", "std", "n"}`` of a sample over seeds."""
    x = np.asarray(values, dtype=float)
    mean, low, high = bootstrap_ci(x, seed=seed)
    return {"mean": mean, "ci_low": low, "ci_high": high,
            "std": float(x.std(ddof=1)) if x.size > 1 else 0.0, "n": int(x.size)}


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
    """``mean(numerator) / mean(denominator)`` over paired seeds (shapes (n,)), with a paired
    percentile-bootstrap interval (seeds resampled together)."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if num.shape != den.shape or num.ndim != 1 or num.size == 0:
        raise ValueError(f"ratio_of_means needs paired 1-D samples, got {num.shape} and {den.shape}")
    mean = float(num.mean() / den.mean())
    if num.size == 1:
        return {"mean": mean, "ci_low": mean, "ci_high": mean}
    idx = np.random.default_rng(seed).integers(0, num.size, size=(n_boot, num.size))
    boot = num[idx].mean(axis=1) / den[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return {"mean": mean, "ci_low": float(low), "ci_high": float(high)}


def loglog_slope_ci(x: Sequence[float], y_by_seed: np.ndarray, confidence: float = 0.95, n_boot: int = 2000,
                    seed: int = 0) -> dict[str, float]:
    """Log-log slope of the seed-mean of ``y_by_seed`` (shape (len(x), n_seeds)) against ``x``,
    with a percentile-bootstrap interval over seeds."""
    y = np.asarray(y_by_seed, dtype=float)
    if y.ndim != 2 or y.shape[0] != len(x):
        raise ValueError(f"y_by_seed must have shape (len(x), n_seeds), got {y.shape}")
    slope = loglog_slope(x, y.mean(axis=1))
    if y.shape[1] == 1:
        return {"mean": slope, "ci_low": slope, "ci_high": slope}
    idx = np.random.default_rng(seed).integers(0, y.shape[1], size=(n_boot, y.shape[1]))
    lx = np.log(np.asarray(x, dtype=float))
    ly = np.log(np.maximum(y[:, idx].mean(axis=2), 1e-300))  # (len(x), n_boot)
    centred = lx - lx.mean()
    boot = centred @ (ly - ly.mean(axis=0)) / (centred @ centred)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return {"mean": slope, "ci_low": float(low), "ci_high": float(high)}


def median_ratio(num: Sequence[float], den: Sequence[float], censor: float, n_boot: int = 4000, seed: int = 0
                 ) -> dict[str, float]:
    """median(num) / median(den) over paired seeds with a percentile bootstrap (seeds resampled
    together). NaN when both medians are censored (neither condition reached the criterion)."""
    def ratio(a: np.ndarray, b: np.ndarray) -> float:
        ma, mb = np.median(a), np.median(b)
        return float("nan") if (ma >= censor and mb >= censor) else float(ma / mb)

    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    value = ratio(num, den)
    if num.size == 1:
        return {"ratio": value, "ci_low": value, "ci_high": value}
    idx = np.random.default_rng(seed).integers(0, num.size, size=(n_boot, num.size))
    boot = np.array([ratio(num[i], den[i]) for i in idx])
    if np.isnan(boot).mean() > 0.025:      # too many resamples undefined: no interval
        return {"ratio": value, "ci_low": float("nan"), "ci_high": float("nan")}
    low, high = np.nanquantile(boot, [0.025, 0.975])
    return {"ratio": value, "ci_low": float(low), "ci_high": float(high)}


def median_ci(values: Sequence[float], n_boot: int = 4000, seed: int = 0) -> dict[str, float]:
    """Median over seeds with a percentile-bootstrap interval."""
    values = np.asarray(values, dtype=float)
    med = float(np.median(values))
    if values.size == 1:
        return {"median": med, "ci_low": med, "ci_high": med}
    idx = np.random.default_rng(seed).integers(0, values.size, size=(n_boot, values.size))
    low, high = np.quantile(np.median(values[idx], axis=1), [0.025, 0.975])
    return {"median": med, "ci_low": float(low), "ci_high": float(high)}
