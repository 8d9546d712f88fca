"""tasks.smoothing against independent references: scipy's beta quantiles, the closed-form smoothed
probability and radius of a linear classifier, and the error rates the bounds promise."""

import numpy as np
import pytest
import torch
from scipy.stats import beta, norm

from tasks import smoothing


class Linear(torch.nn.Module):
    """f(x) = 1 if w.x + b > 0 else 0, as two logits; its smoothed p(1) is Phi((w.x + b) / (sigma |w|))."""

    def __init__(self, w: torch.Tensor, b: float):
        super().__init__()
        self.w, self.b = w, b

    def forward(self, x):
        s = x.flatten(1) @ self.w + self.b
        return torch.stack([-s, s], dim=1)


def _linear(d=5, seed=0):
    w = torch.randn(d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return Linear(w, 0.3), w


def _points_at(w, b, margins):
    """Points whose signed distance to the hyperplane w.x + b = 0 is ``margins``."""
    unit = w / w.norm()
    return torch.as_tensor(margins, dtype=torch.float64)[:, None] * unit - b * unit / w.norm()


def test_clopper_pearson_matches_scipy_beta_quantiles():
    n = np.array([10, 50, 200, 1000, 1000, 7])
    k = np.array([0, 17, 199, 500, 1000, 7])
    alpha = 0.01
    lower, upper = smoothing.cp_lower(k, n, alpha), smoothing.cp_upper(k, n, alpha)
    ref_lower = np.where(k == 0, 0.0, beta.ppf(alpha, np.maximum(k, 1), n - k + 1))
    ref_upper = np.where(k == n, 1.0, beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)))
    np.testing.assert_allclose(lower, ref_lower, atol=1e-12)
    np.testing.assert_allclose(upper, ref_upper, atol=1e-12)
    assert np.all(lower <= k / n) and np.all(upper >= k / n)


def test_sample_counts_follow_the_smoothed_probability_of_a_linear_classifier():
    model, w = _linear()
    sigma, n = 0.7, 20_000
    margins = np.array([-1.0, -0.2, 0.0, 0.3, 1.2])
    counts = smoothing.sample_counts(model, _points_at(w, 0.3, margins), sigma, n, batch_size=30_000, seed=1)
    assert counts.shape == (5, 2) and np.all(counts.sum(1) == n)
    p = norm.cdf(margins / sigma)
    # 5 standard errors: fails only if the noise or the counting is wrong
    assert np.all(np.abs(counts[:, 1] / n - p) < 5 * np.sqrt(p * (1 - p) / n) + 1e-9)
    # the same seed gives the same counts; chunking does not change the distribution's support
    again = smoothing.sample_counts(model, _points_at(w, 0.3, margins), sigma, n, batch_size=30_000, seed=1)
    np.testing.assert_array_equal(counts, again)


def test_shared_counts_equal_each_models_own_counts():
    models = [_linear(seed=s)[0] for s in (0, 1, 4)]
    _, w = _linear()
    x = _points_at(w, 0.3, np.array([-0.5, 0.0, 0.2, 0.9, -1.1, 0.4, 0.05]))
    # several chunks of points and of draws per point
    shared = smoothing.sample_counts_shared(lambda z: [model(z) for model in models], x, 0.6, 700, 500, seed=5)
    for model, counts in zip(models, shared):
        np.testing.assert_array_equal(counts, smoothing.sample_counts(model, x, 0.6, 700, 500, seed=5))


def test_certified_radius_lies_just_below_the_linear_closed_form():
    model, w = _linear(d=8, seed=2)
    sigma = 0.5
    margins = np.array([0.1, -0.25, 0.4, -0.6, 0.8])   # |distance| to the decision boundary
    cert = smoothing.certify(model, _points_at(w, 0.3, margins), sigma, n0=100, n=100_000, alpha=0.001,
                             batch_size=50_000, seed=3)
    exact = np.abs(margins)   # the smoothed classifier of a linear f is f itself: radius = distance
    np.testing.assert_array_equal(cert.prediction, (margins > 0).astype(int))
    assert np.all(cert.radius < exact)
    # the Clopper-Pearson slack at n = 1e5 costs a few hundredths of sigma at most
    assert np.all(cert.radius > exact - 0.05 * sigma), (cert.radius, exact)


def test_certify_abstains_on_the_boundary_at_least_as_often_as_the_bound_says():
    model, w = _linear(d=4, seed=4)
    alpha, reps = 0.05, 400
    x = _points_at(w, 0.3, np.zeros(reps))   # p_A = 1/2 exactly: any certificate would be wrong
    cert = smoothing.certify(model, x, 0.5, n0=50, n=500, alpha=alpha, batch_size=50_000, seed=5)
    abstain = np.mean(cert.prediction == smoothing.ABSTAIN)
    assert abstain >= 1 - alpha - 3 * np.sqrt(alpha * (1 - alpha) / reps)
    assert np.all(cert.radius[cert.prediction == smoothing.ABSTAIN] == 0)
    # power: well inside a class the same settings certify almost always
    far = smoothing.certify(model, _points_at(w, 0.3, np.full(50, 1.0)), 0.5, n0=50, n=500, alpha=alpha,
                            batch_size=50_000, seed=6)
    assert np.mean(far.prediction == 1) > 0.95


def test_predict_returns_a_wrong_class_at_most_alpha_of_the_time():
    model, w = _linear(d=4, seed=7)
    alpha, reps, sigma = 0.1, 500, 1.0
    x = _points_at(w, 0.3, np.full(reps, 0.05))   # g(x) = 1 with p_A = 0.52: hard to tell apart
    pred = smoothing.predict(model, x, sigma, n=200, alpha=alpha, batch_size=50_000, seed=8)
    wrong = np.mean(pred == 0)
    assert wrong <= alpha
    assert np.mean(pred == smoothing.ABSTAIN) > 0.5   # mostly abstains this close to the boundary
    clear = smoothing.predict(model, _points_at(w, 0.3, np.full(50, 1.5)), sigma, n=200, alpha=alpha,
                              batch_size=50_000, seed=9)
    assert np.all(clear == 1)


def test_binomial_abstain_matches_scipy_binomtest():
    from scipy.stats import binomtest

    tops, seconds = np.array([60, 55, 10, 30, 0]), np.array([40, 45, 0, 29, 0])
    got = smoothing.binomial_abstain(tops, seconds, 0.05)
    ref = [True if t + s == 0 else binomtest(t, t + s, 0.5).pvalue > 0.05 for t, s in zip(tops, seconds)]
    assert list(got) == ref


def test_certify_from_counts_matches_cohen_formula():
    selection = np.array([[90, 10, 0], [5, 5, 90], [50, 50, 0]])
    estimation = np.array([[950, 50, 0], [0, 10, 990], [500, 500, 0]])
    cert = smoothing.certify_from_counts(selection, estimation, sigma=0.25, alpha=0.001)
    p = beta.ppf(0.001, estimation[[0, 1], [0, 2]], 1000 - estimation[[0, 1], [0, 2]] + 1)
    np.testing.assert_allclose(cert.radius[:2], 0.25 * norm.ppf(p))
    assert list(cert.prediction) == [0, 2, smoothing.ABSTAIN] and cert.radius[2] == 0


@pytest.mark.parametrize("bad", [{"n": 0}, {"sigma": 0.0}])
def test_sample_counts_rejects_bad_arguments(bad):
    model, w = _linear()
    kwargs = {"sigma": 0.5, "n": 10, **bad}
    with pytest.raises(ValueError):
        smoothing.sample_counts(model, torch.zeros(1, 5, dtype=torch.float64), **kwargs)
