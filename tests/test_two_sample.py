"""The two-sample distances against brute force and closed forms; the tests reject what they should."""

import numpy as np
import pytest
import scipy.linalg
import scipy.stats

from tasks import two_sample


@pytest.fixture
def samples():
    rng = np.random.default_rng(0)
    return rng.standard_normal((60, 3)), rng.standard_normal((50, 3)) + 0.3


def test_energy_distance_matches_scipy_in_one_dimension():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(200), rng.standard_normal(150) * 2
    # scipy returns the square root of the energy distance, with the same V-statistic convention
    assert two_sample.energy_distance(x, y) == pytest.approx(scipy.stats.energy_distance(x, y) ** 2, rel=1e-10)


def test_mmd_matches_a_double_loop(samples):
    x, y = samples
    h = 0.7
    k = lambda a, b: np.exp(-np.sum((a - b) ** 2) / (2 * h * h))  # noqa: E731
    mean = lambda a, b: np.mean([[k(u, v) for v in b] for u in a])  # noqa: E731
    assert two_sample.mmd_rbf(x, y, bandwidth=h) == pytest.approx(mean(x, x) + mean(y, y) - 2 * mean(x, y), rel=1e-10)


def test_sliced_wasserstein_is_exact_w2_in_one_dimension():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(300), rng.exponential(size=300)
    w2 = np.sqrt(np.mean((np.sort(x) - np.sort(y)) ** 2))
    assert two_sample.sliced_wasserstein(x, y, n_projections=8) == pytest.approx(w2, rel=1e-12)


def test_sliced_wasserstein_of_a_shift_is_the_projected_shift():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((500, 2))
    shift = np.array([3.0, 0.0])
    # a pure translation moves every projection by <shift, u>: SW² = E_u <shift,u>² = |shift|²/d
    assert two_sample.sliced_wasserstein(x, x + shift, n_projections=4000) == pytest.approx(3.0 / np.sqrt(2), rel=0.03)


def test_permutation_tests_reject_a_shift_and_accept_the_same_law():
    rng = np.random.default_rng(4)
    same = two_sample.energy_permutation_test(rng.standard_normal((200, 2)), rng.standard_normal((200, 2)), seed=0)
    shifted = two_sample.energy_permutation_test(rng.standard_normal((200, 2)), rng.standard_normal((200, 2)) + 0.5,
                                                 seed=0)
    assert same["p_value"] > 0.05
    assert shifted["p_value"] < 0.01


def test_batched_permutation_tests_agree_with_the_generic_one():
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((60, 3)), rng.standard_normal((50, 3)) + 0.1  # a p-value far from the extremes
    batched = two_sample.kernel_permutation_tests(x, y, n_permutations=50, seed=5)
    for name, statistic in (("energy", two_sample.energy_distance), ("mmd", two_sample.mmd_rbf)):
        generic = two_sample.permutation_test(x, y, statistic, n_permutations=50, seed=5)
        assert batched[name] == pytest.approx(generic["statistic"], rel=1e-9)
        assert batched[f"{name}_p"] == pytest.approx(generic["p_value"])
    assert 0.03 < batched["energy_p"] < 0.97 and 0.03 < batched["mmd_p"] < 0.97


def test_frechet_distance_matches_scipy_sqrtm(samples):
    x, y = samples
    cov_x, cov_y = np.cov(x, rowvar=False), np.cov(y, rowvar=False)
    expected = (np.sum((x.mean(0) - y.mean(0)) ** 2) + np.trace(cov_x + cov_y)
                - 2 * np.trace(scipy.linalg.sqrtm(cov_x @ cov_y).real))
    assert two_sample.frechet_distance(x, y) == pytest.approx(expected, rel=1e-8)


def test_classifier_score_is_chance_for_one_law_and_high_for_two():
    rng = np.random.default_rng(6)
    same = two_sample.classifier_two_sample_accuracy(rng.standard_normal((400, 2)), rng.standard_normal((400, 2)))
    apart = two_sample.classifier_two_sample_accuracy(rng.standard_normal((400, 2)),
                                                      rng.standard_normal((400, 2)) + 3.0)
    assert abs(same - 0.5) < 0.08
    assert apart > 0.95


def test_sliced_wasserstein_with_unequal_sizes_matches_the_equal_size_value():
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((3000, 2)), rng.standard_normal((3000, 2)) + [1.0, 0.0]
    equal = two_sample.sliced_wasserstein(x, y, n_projections=64)
    unequal = two_sample.sliced_wasserstein(x, y[:2000], n_projections=64)
    assert unequal == pytest.approx(equal, rel=0.05)
