import numpy as np
import pandas as pd
import pytest

from tasks import stats


def test_bootstrap_ci_brackets_the_mean_and_narrows_with_more_data():
    rng = np.random.default_rng(0)
    small = rng.normal(2.0, 1.0, size=10)
    large = rng.normal(2.0, 1.0, size=1000)
    mean, low, high = stats.bootstrap_ci(small)
    assert low < mean < high and mean == pytest.approx(small.mean())
    _, low_l, high_l = stats.bootstrap_ci(large)
    assert high_l - low_l < high - low
    # the normal-theory interval of the large sample is an independent reference
    half = 1.96 * large.std(ddof=1) / np.sqrt(large.size)
    assert high_l - low_l == pytest.approx(2 * half, rel=0.15)


def test_single_value_has_a_degenerate_interval():
    assert stats.bootstrap_ci([3.0]) == (3.0, 3.0, 3.0)
    with pytest.raises(ValueError):
        stats.bootstrap_ci([])


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
    assert stats.spearman([1, 2, 3, 4], [10, 20, 25, 100]) == pytest.approx(1.0)
    assert stats.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(stats.spearman([1, 1, 1], [1, 2, 3]))


def test_ratio_of_means_and_its_interval():
    num, den = np.array([2.0, 4.0, 6.0]), np.array([1.0, 2.0, 3.0])
    assert stats.ratio_of_means(num, den) == {"ratio": 2.0, "ci_low": 2.0, "ci_high": 2.0}
    rng = np.random.default_rng(1)
    noisy = stats.ratio_of_means(rng.normal(10, 1, 30), rng.normal(5, 1, 30))
    assert noisy["ci_low"] < 2.0 < noisy["ci_high"]
    with pytest.raises(ValueError):
        stats.ratio_of_means([1.0], [1.0, 2.0])


def test_loglog_slope_ci_matches_polyfit_on_each_resample():
    x = np.array([10.0, 100.0, 1000.0])
    rng = np.random.default_rng(2)
    y = np.outer(x**0.5, np.ones(6)) * rng.uniform(0.8, 1.2, size=(3, 6))
    out = stats.loglog_slope_ci(x, y)
    assert out["slope"] == pytest.approx(stats.loglog_slope(x, y.mean(axis=1)))
    assert out["ci_low"] < out["slope"] < out["ci_high"] and 0.3 < out["ci_low"] and out["ci_high"] < 0.7
    # the vectorised resampling equals polyfit on each resample of seeds
    idx = np.random.default_rng(0).integers(0, 6, size=(2000, 6))
    by_polyfit = [stats.loglog_slope(x, y[:, i].mean(axis=1)) for i in idx]
    assert (out["ci_low"], out["ci_high"]) == pytest.approx(tuple(np.quantile(by_polyfit, [0.025, 0.975])))
    exact = stats.loglog_slope_ci(x, np.outer(x**2, np.ones(4)))
    assert exact["ci_low"] == pytest.approx(2.0) and exact["ci_high"] == pytest.approx(2.0)


def test_median_ratio_handles_censoring_and_brackets_the_ratio():
    num, den = np.array([10.0, 12.0, 8.0, 11.0]), np.array([20.0, 22.0, 18.0, 21.0])
    out = stats.median_ratio(num, den, censor=100.0)
    assert out["ratio"] == pytest.approx(10.5 / 20.5) and out["ci_low"] <= out["ratio"] <= out["ci_high"]
    censored = stats.median_ratio(np.full(4, 100.0), np.full(4, 100.0), censor=100.0)
    assert np.isnan(censored["ratio"]) and np.isnan(censored["ci_low"])
    assert stats.median_ratio([5.0], [100.0], censor=100.0)["ratio"] == 0.05


def test_median_ci():
    out = stats.median_ci([1.0, 2.0, 3.0, 4.0, 100.0])
    assert out["median"] == 3.0 and out["ci_low"] <= 3.0 <= out["ci_high"] and out["ci_high"] <= 100.0


def test_every_interval_comes_from_one_bootstrap_with_the_same_resamples():
    """The same seeds give the same resample indices whatever the statistic: a mean interval over
    ``a / b`` pairs and the ratio-of-means interval use identical rows of resampled seeds."""
    rng = np.random.default_rng(5)
    a, b = rng.normal(10, 2, 8), rng.normal(5, 1, 8)
    idx = np.random.default_rng(0).integers(0, 8, size=(4000, 8))
    ratio = stats.ratio_of_means(a, b)
    expected = np.quantile(a[idx].mean(1) / b[idx].mean(1), [0.025, 0.975])
    assert (ratio["ci_low"], ratio["ci_high"]) == pytest.approx(tuple(expected), rel=1e-12)
    median = stats.median_ci(a)
    assert (median["ci_low"], median["ci_high"]) == pytest.approx(tuple(np.quantile(np.median(a[idx], axis=1), [0.025, 0.975])), rel=1e-12)


def test_summarize_by_nests_one_level_per_column_and_keeps_row_order():
    frame = pd.DataFrame({"method": ["x", "x", "x", "y", "y", "y"], "k": [1, 2, 1, 1, 2, 1],
                          "acc": [0.1, 0.5, 0.3, 0.9, 0.7, 0.8], "loss": [3.0, 2.0, 1.0, 0.5, 0.4, 0.3]})
    one = stats.summarize_by(frame, "method", "acc")
    assert set(one) == {"x", "y"} and one["x"] == stats.summarize([0.1, 0.5, 0.3])
    two = stats.summarize_by(frame, ["method", "k"], ["acc", "loss"])
    assert two["y"]["1"]["loss"] == stats.summarize([0.5, 0.3])
    assert two["x"]["2"]["acc"]["n"] == 1 and set(two["x"]) == {"1", "2"}


def test_ci_names_the_interval_that_summarize_writes():
    from tasks.claims import metric_value
    from tasks.contract import ci

    metrics = {"speedup": stats.summarize_by(pd.DataFrame({"m": ["a", "a", "a", "b", "b", "b"],
                                                           "x": [1.0, 2.0, 3.0, 5.0, 6.0, 9.0]}), "m", "x")}
    low, high = (metric_value(metrics, name) for name in ci("speedup.b"))
    assert (low, high) == (metrics["speedup"]["b"]["ci_low"], metrics["speedup"]["b"]["ci_high"])
    assert 5.0 <= low < high <= 9.0
