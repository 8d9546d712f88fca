import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from paperflows.core import stats
from tasks.correlation import spearman


def test_mean_ci_is_the_student_t_interval():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    mean, low, high = stats.mean_ci(x)
    half = sps.t.ppf(0.975, 3) * x.std(ddof=1) / 2.0  # closed form: t_{n-1} s / sqrt(n)
    assert mean == 3.5 and (low, high) == pytest.approx((3.5 - half, 3.5 + half))
    large = np.random.default_rng(0).normal(2.0, 1.0, size=1000)
    _, low_l, high_l = stats.mean_ci(large)
    assert high_l - low_l < high - low and high_l - low_l == pytest.approx(2 * 1.96 / np.sqrt(1000), rel=0.1)


def test_one_seed_has_no_interval_and_equal_seeds_the_point():
    mean, low, high = stats.mean_ci([3.0])
    assert mean == 3.0 and np.isnan(low) and np.isnan(high)
    assert stats.mean_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        stats.mean_ci([])


def test_summarize_and_paired_difference():
    s = stats.summarize([1.0, 2.0, 3.0])
    assert s["mean"] == 2.0 and s["std"] == pytest.approx(1.0) and s["n"] == 3
    d = stats.paired_difference([2.0, 3.0, 5.0], [1.0, 1.0, 1.0])
    assert d["mean"] == pytest.approx(7 / 3) and d["p_value"] < 0.2
    with pytest.raises(ValueError):
        stats.paired_difference([1.0], [1.0, 2.0])


def test_loglog_slope_recovers_a_power_law():
    x = np.array([10.0, 100.0, 1000.0])
    assert stats.loglog_slope(x, 3 * x**0.5) == pytest.approx(0.5)
    assert stats.loglog_slope(x, x**2) == pytest.approx(2.0)


def test_geometric_mean_and_spearman():
    assert stats.geometric_mean([1.0, 4.0, 16.0]) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        stats.geometric_mean([1.0, 0.0])
    assert spearman([1, 2, 3, 4], [10, 20, 25, 100]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_ratio_of_means_and_its_interval():
    num, den = np.array([2.0, 4.0, 6.0]), np.array([1.0, 2.0, 3.0])
    assert stats.ratio_of_means(num, den) == pytest.approx({"ratio": 2.0, "ci_low": 2.0, "ci_high": 2.0})
    rng = np.random.default_rng(1)
    noisy = stats.ratio_of_means(rng.normal(10, 1, 30), rng.normal(5, 1, 30))
    assert noisy["ci_low"] < 2.0 < noisy["ci_high"]
    negative = stats.ratio_of_means([-2.0, -3.0, -2.5], [1.0, 1.1, 0.9])  # not on the log scale
    assert negative["ci_low"] < negative["ratio"] < negative["ci_high"] < 0
    with pytest.raises(ValueError):
        stats.ratio_of_means([1.0], [1.0, 2.0])


def test_jackknife_t_of_a_mean_is_the_t_interval():
    """For a linear statistic the jackknife standard error is exactly s / sqrt(n): an independent check."""
    x = np.random.default_rng(3).normal(size=7)
    got = stats.jackknife_t_interval(lambda v: float(v.mean()), [x], float(x.mean()))
    assert got == pytest.approx(stats.t_interval(x))


def test_loglog_slope_ci_brackets_a_power_law_and_is_exact_without_noise():
    x = np.array([10.0, 100.0, 1000.0])
    rng = np.random.default_rng(2)
    y = np.outer(x**0.5, np.ones(6)) * rng.uniform(0.8, 1.2, size=(3, 6))
    out = stats.loglog_slope_ci(x, y)
    assert out["slope"] == pytest.approx(stats.loglog_slope(x, y.mean(axis=1)))
    assert out["ci_low"] < out["slope"] < out["ci_high"] and 0.3 < out["ci_low"] and out["ci_high"] < 0.7
    exact = stats.loglog_slope_ci(x, np.outer(x**2, np.ones(4)))
    assert exact["ci_low"] == pytest.approx(2.0) and exact["ci_high"] == pytest.approx(2.0)


def test_median_ratio_handles_censoring_and_brackets_the_ratio():
    rng = np.random.default_rng(4)
    num, den = rng.uniform(8, 12, 10), rng.uniform(18, 22, 10)
    out = stats.median_ratio(num, den, censor=100.0)
    assert out["ratio"] == pytest.approx(np.median(num) / np.median(den))
    assert out["ci_low"] <= out["ratio"] <= out["ci_high"]
    # order statistics at 97.5% each (ranks 1 and 8 of 10), divided crosswise
    assert out["ci_low"] == pytest.approx(np.sort(num)[1] / np.sort(den)[8])
    censored_num = num.copy()
    censored_num[np.argsort(num)[-2:]] = 100.0  # the upper order statistic is censored: unbounded above
    assert stats.median_ratio(censored_num, den, censor=100.0)["ci_high"] == np.inf
    censored = stats.median_ratio(np.full(10, 100.0), np.full(10, 100.0), censor=100.0)
    assert np.isnan(censored["ratio"]) and np.isnan(censored["ci_low"])
    assert stats.median_ratio([5.0], [100.0], censor=100.0)["ratio"] == 0.05


def test_median_ci_order_statistics_and_no_interval_below_six_seeds():
    assert stats.order_statistic_ranks(5) is None and stats.order_statistic_ranks(6) == (0, 5)
    assert stats.order_statistic_ranks(10) == (1, 8)  # 1 - 2 P(Bin(10, 1/2) <= 1) = 0.979 >= 0.95 > 0.891 at k = 2
    out = stats.median_ci([1.0, 2.0, 3.0, 4.0, 100.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    assert out["median"] == 5.5 and (out["ci_low"], out["ci_high"]) == (2.0, 9.0)
    few = stats.median_ci([1.0, 2.0, 3.0, 4.0, 100.0])
    assert few["median"] == 3.0 and np.isnan(few["ci_low"]) and np.isnan(few["ci_high"])



def test_ranked_median_brackets_the_kth_largest_median_with_bonferroni_rows():
    """Second largest of three medians: 10 seeds reach the per-row level 1 - 0.05/3 only with (min, max) (0.998;
    (second, ninth) gives 0.979), so the interval is the second largest of the rows' minima and maxima."""
    rows = np.array([np.arange(10.0), np.arange(10.0) + 20, np.arange(10.0) - 20])
    out = stats.ranked_median(rows, 2)
    assert (out["value"], out["ci_low"], out["ci_high"]) == (4.5, 0.0, 9.0)
    assert stats.ranked_median(rows, 1)["value"] == 24.5
    assert np.isnan(stats.ranked_median(rows[:, :6], 2)["ci_low"])  # 6 seeds: 1 - 2/64 < 1 - 0.05/3
    with pytest.raises(ValueError, match="rank"):
        stats.ranked_median(rows, 4)

def percentile_bootstrap_mean(x: np.ndarray) -> tuple[float, float]:
    """The interval this project used before (percentile bootstrap of the mean over seeds), kept here only
    to show that the coverage test below fails it."""
    idx = np.random.default_rng(0).integers(0, x.size, size=(2000, x.size))
    low, high = np.quantile(x[idx].mean(axis=1), [0.025, 0.975])
    return float(low), float(high)


SKEW = 0.25  # log-normal sigma of the skewed samples (skewness 0.78); see the module docstring of paperflows.core.stats


def _draw(rng: np.random.Generator, shape, skewed: bool) -> np.ndarray:
    return rng.lognormal(0.0, SKEW, shape) if skewed else rng.normal(1.0, 0.25, shape)


def _interval_functions():
    """name -> (draw one replicate and return (low, high), the true value)."""
    x3 = np.array([10.0, 100.0, 1000.0])
    lognormal_mean = float(np.exp(SKEW**2 / 2))
    return {
        "mean": (lambda rng, n, sk: stats.summarize(_draw(rng, n, sk)), lambda sk: lognormal_mean if sk else 1.0),
        "paired_difference": (lambda rng, n, sk: stats.paired_difference(_draw(rng, n, sk) + 0.5, _draw(rng, n, sk)),
                              lambda sk: 0.5),
        "ratio_of_means": (lambda rng, n, sk: stats.ratio_of_means(2 * _draw(rng, n, sk), _draw(rng, n, sk)),
                           lambda sk: 2.0),
        "loglog_slope_ci": (lambda rng, n, sk: stats.loglog_slope_ci(x3, np.outer(x3**0.5, np.ones(n))
                                                                     * _draw(rng, (3, n), sk)), lambda sk: 0.5),
        "median_ci": (lambda rng, n, sk: stats.median_ci(_draw(rng, n, sk)), lambda sk: 1.0),
        "median_ratio": (lambda rng, n, sk: stats.median_ratio(2 * _draw(rng, n, sk), _draw(rng, n, sk),
                                                               censor=np.inf), lambda sk: 2.0),
        # the second largest of three medians (1, 1.5 and 2 times a sample whose median is 1)
        "median_ranked": (lambda rng, n, sk: stats.ranked_median(np.array([[1.0], [1.5], [2.0]]) * _draw(rng, (3, n), sk), 2),
                          lambda sk: 1.5),
    }


REPLICATES = 1500


def coverage(interval, truth: float, n: int, skewed: bool) -> float | None:
    """Share of replicates whose interval covers ``truth``; None where the function gives no interval."""
    rng = np.random.default_rng([n, int(skewed)])
    covered = []
    for _ in range(REPLICATES):
        out = interval(rng, n, skewed)
        low, high = (out["ci_low"], out["ci_high"]) if isinstance(out, dict) else out
        if np.isnan(low):
            return None
        covered.append(low < truth < high)
    return float(np.mean(covered))


@pytest.mark.parametrize("skewed", [False, True], ids=["normal", "lognormal"])
@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("name", list(_interval_functions()))
def test_every_interval_keeps_its_coverage_at_small_seed_counts(name, n, skewed):
    """Simulated coverage of each interval function of paperflows.core.stats at 3, 5 and 10 seeds: at least 0.93 for a
    nominal 0.95 (1,500 replicates: the standard error of a 0.95 coverage is 0.006). The order-statistic
    intervals give none below 6 seeds rather than one that under-covers."""
    interval, truth = _interval_functions()[name]
    got = coverage(interval, truth(skewed), n, skewed)
    if name.startswith("median") and n < 6 or name == "median_ranked" and n < 7:
        assert got is None
    else:
        assert got is not None and got >= 0.93, f"{name}: coverage {got} at n={n}"


@pytest.mark.parametrize("n", [3, 5])
def test_the_coverage_test_fails_the_percentile_bootstrap(n):
    """The same simulation rejects the percentile bootstrap that every interval used before (75% at 3 seeds,
    83% at 5): the coverage test has the power to catch an under-covering interval."""
    got = coverage(lambda rng, k, sk: percentile_bootstrap_mean(_draw(rng, k, sk)), 1.0, n, False)
    assert got < 0.90


def test_summarize_by_nests_one_level_per_column_and_keeps_row_order():
    frame = pd.DataFrame({"method": ["x", "x", "x", "y", "y", "y"], "k": [1, 2, 1, 1, 2, 1],
                          "acc": [0.1, 0.5, 0.3, 0.9, 0.7, 0.8], "loss": [3.0, 2.0, 1.0, 0.5, 0.4, 0.3]})
    one = stats.summarize_by(frame, "method", "acc")
    assert set(one) == {"x", "y"} and one["x"] == stats.summarize([0.1, 0.5, 0.3])
    two = stats.summarize_by(frame, ["method", "k"], ["acc", "loss"])
    assert two["y"]["1"]["loss"] == stats.summarize([0.5, 0.3])
    assert two["x"]["2"]["acc"]["n"] == 1 and set(two["x"]) == {"1", "2"}


def test_ci_names_the_interval_that_summarize_writes():
    from paperflows.core.claims import metric_value
    from paperflows.core.contract import ci

    metrics = {"speedup": stats.summarize_by(pd.DataFrame({"m": ["a", "a", "a", "b", "b", "b"],
                                                           "x": [1.0, 2.0, 3.0, 5.0, 6.0, 9.0]}), "m", "x")}
    low, high = (metric_value(metrics, name) for name in ci("speedup.b"))
    assert (low, high) == (metrics["speedup"]["b"]["ci_low"], metrics["speedup"]["b"]["ci_high"])
    assert low < metrics["speedup"]["b"]["mean"] < high



@pytest.mark.parametrize("n", [64, 67, 72, 84])
def test_proportion_ci_covers_at_the_item_counts_used(n):
    """delphi_autointerp pools 64-84 items (latents) per flip rate, proportions near its 0.10 threshold. The
    exact binomial coverage of proportion_ci (Clopper-Pearson) over proportions 0.02-0.5 is at least 0.95
    everywhere; the Wilson interval it replaced dips to 0.929 (at 7 of 84), below the 0.93 every interval here
    must keep."""
    p_grid = np.linspace(0.02, 0.5, 241)
    bounds = np.array([[stats.proportion_ci(k, n)[b] for b in ("ci_low", "ci_high")] for k in range(n + 1)])
    exact = np.array([sps.binom.pmf(np.arange(n + 1), n, p)[(bounds[:, 0] <= p) & (p <= bounds[:, 1])].sum()
                      for p in p_grid])
    assert exact.min() >= 0.95 - 1e-9
    rng = np.random.default_rng(n)  # and a simulation at the proportions observed, as for the seed intervals
    for p in (0.08, 0.10, 0.11):
        k = rng.binomial(n, p, size=REPLICATES)
        assert ((bounds[k, 0] <= p) & (p <= bounds[k, 1])).mean() >= 0.93


def test_proportion_ci_edges_and_level():
    assert np.isnan(stats.proportion_ci(0, 0)["ci_low"]) and stats.proportion_ci(0, 0)["n"] == 0
    assert stats.proportion_ci(0, 10)["ci_low"] == 0.0 and stats.proportion_ci(10, 10)["ci_high"] == 1.0
    out = stats.proportion_ci(7, 84)
    assert out["mean"] == pytest.approx(7 / 84) and out["ci_low"] < 7 / 84 < out["ci_high"]
    with stats.confidence_level(0.975):
        wider = stats.proportion_ci(7, 84)
    assert wider["ci_low"] < out["ci_low"] and wider["ci_high"] > out["ci_high"]
    with pytest.raises(ValueError):
        stats.proportion_ci(5, 4)
