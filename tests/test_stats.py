import numpy as np
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
