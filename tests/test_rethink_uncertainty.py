"""Unit tests of flows/rethink_uncertainty/method.py against independent references: hand-computed
values, numerical integration (scipy quad), Monte Carlo, and identities the paper states."""

import math

import numpy as np
import pytest
from conftest import params_for
from scipy import integrate, stats

from flows.rethink_uncertainty import method as M
from flows.rethink_uncertainty.params import SMOKE, Params


def est_params():
    return params_for("rethink_uncertainty", n_examples=[1, 10, 100], p_true=0.5, mu_true=1.0, sigma_true=1.0,
                      beta_prior=[5.0, 5.0], normal_gamma_prior=[1.0, 5.0, 1.0, 0.0], mc_samples=5)


def al_params():
    return params_for("rethink_uncertainty", al_test_size=0.3, al_init_labels=20, al_members=3, al_hidden=[16],
                      al_lr=0.01, al_weight_decay=1e-4, al_steps=20, al_rounds=2, al_batch=5)


# ------------------------------------------------------------------ information-theoretic estimates
def test_bald_of_a_bernoulli_ensemble_by_hand():
    """Two members with P(z=1) = 0.1 and 0.9: the mean is 0.5, so H[mean] = ln 2, each member has
    H = -(0.1 ln 0.1 + 0.9 ln 0.9), and BALD is the difference."""
    probs = M.bernoulli_probs(np.array([0.1, 0.9]))            # (K=2, C=2)
    h_member = -(0.1 * math.log(0.1) + 0.9 * math.log(0.9))
    assert M.predictive_entropy(probs) == pytest.approx(math.log(2), abs=1e-15)
    assert M.expected_entropy(probs) == pytest.approx(h_member, abs=1e-15)
    assert M.bald(probs) == pytest.approx(math.log(2) - h_member, abs=1e-15)


def test_bald_is_zero_when_members_agree_and_batched_shapes():
    probs = np.random.default_rng(0).dirichlet(np.ones(4), size=(1, 7))      # (1, 7, 4)
    agree = np.repeat(probs, 5, axis=0)                                      # (5, 7, 4)
    assert M.bald(agree) == pytest.approx(np.zeros(7), abs=1e-12)
    mixed = np.random.default_rng(1).dirichlet(np.ones(4), size=(5, 7))
    b = M.bald(mixed)
    assert b.shape == (7,) and np.all(b >= 0) and np.all(b <= np.log(5) + 1e-12)   # I(theta; y) <= H[theta]


# ------------------------------------------------------------------ decision-theoretic quantities
@pytest.mark.parametrize("loss", ["log", "squared"])
def test_decomposition_sums_to_the_total(loss):
    """h[p_n] = E_theta h[p(z|theta)] + E_theta[E_{p(z|theta)} l(a*_n, z) - h[p(z|theta)]] for any loss."""
    rng = np.random.default_rng(2)
    cond, w, support = rng.dirichlet(np.ones(5), size=6), rng.random(6), np.arange(5.0)
    d = M.decompose(cond, w, support, loss)
    assert d["total"] == pytest.approx(d["expected_conditional"] + d["expected_divergence"], abs=1e-12)
    assert d["expected_divergence"] >= 0
    p_n = (w / w.sum()) @ cond
    if loss == "log":   # the information-theoretic split: entropy = expected entropy + BALD
        assert d["total"] == pytest.approx(M.entropy(p_n), abs=1e-12)
        assert d["expected_divergence"] == pytest.approx(M.entropy(p_n) - (w / w.sum()) @ M.entropy(cond), abs=1e-12)
    else:               # law of total variance
        means = cond @ support
        var = cond @ support ** 2 - means ** 2
        wn = w / w.sum()
        assert d["expected_conditional"] == pytest.approx(wn @ var, abs=1e-12)
        assert d["expected_divergence"] == pytest.approx(wn @ means ** 2 - (wn @ means) ** 2, abs=1e-12)


def test_bayes_action_minimises_expected_loss_by_grid_search():
    p, support = np.array([0.2, 0.5, 0.3]), np.array([0.0, 1.0, 4.0])
    grid = np.linspace(-1, 5, 60001)
    sq = [(p * (a - support) ** 2).sum() for a in grid[::100]]
    assert M.uncertainty(p, support, "squared") == pytest.approx(min(sq), abs=1e-4)
    # log loss: among distributions q on a grid of the simplex, E_p[-log q] is minimal at q = p
    qs = np.random.default_rng(3).dirichlet(np.ones(3), size=20000)
    assert M.uncertainty(p, support, "log") <= M.expected_loss(qs, p, support, "log").min()


def test_expected_score_is_dispersion_plus_discrepancy():
    """Log loss: cross-entropy = H[p_eval] + KL(p_eval || p_model); squared: (mean gap)^2 + variance."""
    pm, pe, support = np.array([0.6, 0.4]), np.array([0.3, 0.7]), np.array([0.0, 1.0])
    s = M.expected_score(pm, pe, support, "log")
    assert s["discrepancy"] == pytest.approx(stats.entropy(pe, pm), abs=1e-12)
    s = M.expected_score(pm, pe, support, "squared")
    assert s["score"] == pytest.approx((0.4 - 0.7) ** 2 + 0.7 * 0.3, abs=1e-12)


# ------------------------------------------------------------------ discrete problem: closed forms
@pytest.mark.parametrize("a,b", [(5.0, 5.0), (6.0, 5.0), (13.0, 7.0), (2.5, 40.0)])
def test_beta_closed_forms_against_quadrature(a, b):
    ee = integrate.quad(lambda t: stats.beta(a, b).pdf(t) * float(M.bernoulli_entropy(t)), 0, 1, epsabs=1e-13)[0]
    assert M.beta_expected_bernoulli_entropy(a, b) == pytest.approx(ee, abs=1e-9)
    assert M.beta_entropy(a, b) == pytest.approx(stats.beta(a, b).entropy(), abs=1e-12)


@pytest.mark.parametrize("a,b", [(5.0, 5.0), (6.0, 5.0), (13.0, 7.0)])
def test_bald_equals_the_models_own_parameter_eig(a, b):
    """Mutual information is symmetric: H[y] - E_theta H[y|theta] = H[theta] - E_{p_n(y)} H[theta|y]."""
    q = M.discrete_quantities(a, b, 0.5)
    assert q["bald"] == pytest.approx(q["eig_model"], abs=1e-12)


def test_true_eig_uses_the_true_data_distribution():
    """With p_true = p_n the true and the model's EIG coincide; otherwise they differ."""
    q = M.discrete_quantities(6.0, 4.0, 0.6)
    assert q["eig_true"] == pytest.approx(q["eig_model"], abs=1e-14)
    assert abs(M.discrete_quantities(6.0, 4.0, 0.5)["eig_true"] - q["eig_model"]) > 1e-4


# ------------------------------------------------------------------ continuous problem: closed forms
def test_student_t_entropy_matches_scipy():
    for df, scale in [(3.0, 2.2), (21.0, 1.05), (2001.0, 1.0)]:
        assert M.student_t_entropy(df, scale) == pytest.approx(stats.t(df, scale=scale).entropy(), abs=1e-9)


def test_normal_gamma_entropy_against_monte_carlo():
    """H(mu, lambda) = -E[log p(mu, lambda)] from 200k joint draws (the official code's docstring check)."""
    a, b, k, m = 3.0, 2.0, 4.0, 0.5
    rng = np.random.default_rng(4)
    lam = rng.gamma(a, 1.0 / b, size=200_000)
    mu = m + rng.standard_normal(lam.size) / np.sqrt(k * lam)
    logp = stats.gamma(a, scale=1.0 / b).logpdf(lam) + stats.norm(m, 1 / np.sqrt(k * lam)).logpdf(mu)
    est, se = -logp.mean(), logp.std() / np.sqrt(lam.size)
    assert abs(M.normal_gamma_entropy(a, b, k) - est) < 4 * se
    assert abs(M.normal_gamma_entropy_official(a, b, k) - est) > 20 * se     # the scale/rate mix-up


@pytest.mark.parametrize("n", [1, 10, 100])
def test_continuous_bald_equals_model_eig_by_quadrature(n):
    """BALD (Student-t entropy minus expected Gaussian entropy) equals H[theta] - E_{y ~ p_n(y)} H[theta | y],
    the latter integrated numerically: this holds only with the correct Normal-Gamma entropy."""
    data = 1.0 + np.random.default_rng(n).standard_normal(n)
    a, b, k, m = M.normal_gamma_update(data, 1.0, 5.0, 1.0, 0.0)
    q = M.continuous_quantities(a, b, k, m, 1.0, 1.0)
    df, loc, scale = M.student_t_params(a, b, k, m)

    def post_entropy(y):
        return M.normal_gamma_entropy(a + 0.5, b + k * (y - m) ** 2 / (2 * (k + 1)), k + 1)

    expected = integrate.quad(lambda y: stats.t.pdf(y, df, loc, scale) * post_entropy(y), -np.inf, np.inf,
                              epsabs=1e-12, limit=200)[0]
    assert q["bald"] == pytest.approx(M.normal_gamma_entropy(a, b, k) - expected, abs=1e-7)


def test_true_eig_quadrature_against_scipy_quad():
    a, b, k, m = 1.5, 5.4, 2.0, 0.7
    q = M.continuous_quantities(a, b, k, m, 1.0, 1.0)
    post = integrate.quad(lambda y: stats.norm.pdf(y, 1, 1) * M.normal_gamma_entropy(
        a + 0.5, b + k * (y - m) ** 2 / (2 * (k + 1)), k + 1), -np.inf, np.inf, epsabs=1e-12)[0]
    assert q["eig_true"] == pytest.approx(M.normal_gamma_entropy(a, b, k) - post, abs=1e-9)


def test_squared_loss_law_of_total_variance_in_the_normal_gamma_model():
    """Var of the Student-t predictive = E_theta Var(z|theta) + Var_theta(mu): b(k+1)/(k(a-1))."""
    a, b, k, m = 4.0, 3.0, 5.0, 0.2
    q = M.continuous_quantities(a, b, k, m, 1.0, 1.0)
    df, loc, scale = M.student_t_params(a, b, k, m)
    assert q["sq_uncertainty"] == pytest.approx(stats.t(df, loc, scale).var(), rel=1e-12)
    assert q["sq_epistemic"] == pytest.approx(b / (k * (a - 1)), rel=1e-12)     # Var(mu) = E[1/(k lambda)]


# ------------------------------------------------------------------ Monte-Carlo estimators
def test_monte_carlo_bald_converges_to_the_closed_form_and_is_biased_low_for_small_k():
    a, b = 6.0, 5.0
    exact = M.discrete_quantities(a, b, 0.5)["bald"]
    rng = np.random.default_rng(5)
    assert M.mc_bald_beta(a, b, 400_000, rng) == pytest.approx(exact, rel=5e-3)
    small = np.array([M.mc_bald_beta(a, b, 5, rng) for _ in range(4000)])
    # E[BALD_K] = I - E[KL(mean of K || p_n)] < I (the estimator is a lower bound in expectation)
    assert small.mean() < exact and small.mean() + 4 * small.std() / np.sqrt(small.size) < exact


def test_monte_carlo_expected_entropy_matches_closed_form():
    theta = np.random.default_rng(6).beta(13.0, 7.0, size=400_000)
    mc = float(M.expected_entropy(M.bernoulli_probs(theta)))
    assert mc == pytest.approx(M.beta_expected_bernoulli_entropy(13.0, 7.0), abs=2e-3)


# ------------------------------------------------------------------ estimation experiment
def test_official_code_variants_reproduce_the_published_figure_at_n1():
    """n = 1 in the discrete problem gives Beta(6, 5) or Beta(5, 6): eps_theta is then 6.5e-7 with the
    expectation over y, and (6.46e-5 + 9.30e-5)/2 ~ 7.9e-5 with the official code's single y = 1, the
    value read off the published figure (~8e-5)."""
    errs = [(q["bald"] - q["eig_true_official_code"]) ** 2 for q in
            (M.discrete_quantities(6.0, 5.0, 0.5), M.discrete_quantities(5.0, 6.0, 0.5))]
    assert np.mean(errs) == pytest.approx(7.878e-5, rel=1e-3)
    q = M.discrete_quantities(6.0, 5.0, 0.5)
    assert (q["bald"] - q["eig_true"]) ** 2 == pytest.approx(6.457e-7, rel=1e-3)


def test_estimation_seed_is_deterministic_and_complete():
    p = est_params()
    r1, r2 = M.run_estimation_seed(p, 3), M.run_estimation_seed(p, 3)
    assert r1 == r2
    assert M.run_estimation_seed(p, 4) != r1
    assert len(r1["rows"]) == 2 * len(p.n_examples)
    for r in r1["rows"]:
        assert r["eps_z"] == pytest.approx((r["expected_entropy"] - r["data_entropy"]) ** 2)
        assert r["pred_entropy"] == pytest.approx(r["expected_entropy"] + r["bald"], abs=1e-12)
        assert r["sq_uncertainty"] == pytest.approx(r["sq_expected_conditional"] + r["sq_epistemic"], abs=1e-12)
        assert r["log_score"] >= r["data_entropy"] - 1e-9 and r["sq_score"] >= r["sq_dispersion"]


# ------------------------------------------------------------------ active learning
def _toy_digits():
    rng = np.random.default_rng(7)
    y = np.repeat(np.arange(10), 12)
    X = np.clip(rng.normal(y[:, None] % 4 * 4, 3, size=(y.size, 8)), 0, 16)
    return X, y


def test_ensemble_forward_matches_per_member_loop():
    import torch
    params = M.init_ensemble(3, [8, 16, 10], torch.Generator().manual_seed(0))
    X = torch.randn(5, 8, generator=torch.Generator().manual_seed(1))
    out = M.ensemble_logits(params, X)
    for e in range(3):
        h = torch.relu(X @ params[0][e] + params[1][e])
        assert torch.allclose(out[e], h @ params[2][e] + params[3][e], atol=1e-6)


def test_acquisition_scores_rank_by_the_right_quantity():
    rng = np.random.default_rng(8)
    probs = rng.dirichlet(np.ones(3), size=(4, 6))
    assert np.array_equal(M.acquisition_scores("bald", probs, rng), M.bald(probs))
    assert np.array_equal(M.acquisition_scores("entropy", probs, rng), M.predictive_entropy(probs))


def test_active_learning_is_deterministic_and_acquires_distinct_points():
    X, y = _toy_digits()
    p = al_params()
    out = [M.run_al_seed(p, 0, "bald", (X, y))["rows"] for _ in range(2)]
    assert out[0] == out[1]
    assert [r["n_labels"] for r in out[0]] == [20, 25, 30]
    rand = M.run_al_seed(p, 0, "random", (X, y))["rows"]
    assert rand[0]["test_acc"] == out[0][0]["test_acc"]     # paired: same initial set and initialisation


def test_random_control_is_random_acquisition_from_an_independent_stream():
    """The negative control of 'BALD beats random': uniform scores like 'random', drawn from another stream,
    on the same initial set and initialisations."""
    rng = np.random.default_rng(8)
    probs = rng.dirichlet(np.ones(3), size=(4, 6))
    assert np.array_equal(M.acquisition_scores(M.CONTROL_ACQUISITION, probs, np.random.default_rng(1)),
                          np.random.default_rng(1).random(6))
    X, y = _toy_digits()
    p = al_params()
    rand = M.run_al_seed(p, 0, "random", (X, y))["rows"]
    ctrl = M.run_al_seed(p, 0, M.CONTROL_ACQUISITION, (X, y))["rows"]
    assert ctrl[0]["test_acc"] == rand[0]["test_acc"]                # same start
    assert [r["test_acc"] for r in ctrl] != [r["test_acc"] for r in rand]   # different acquired points


def test_claim_roles_and_controls():
    from flows.rethink_uncertainty.claims import PAPER

    roles = {c.id: c.role for c in PAPER.claims}
    assert all(roles[i] == "sanity" for i in roles if i.startswith("poor_small_n_"))
    assert roles["decomposition_identities"] == "sanity"
    claims = {c.id: c for c in PAPER.claims}
    assert claims["bald_beats_random"].control.metric.startswith("active_learning.final_acc_diff.random_control")
    assert claims["bald_error_nonnegligible_n1"].control.metric == "errors.discrete.eps_theta.at_last_n.mean"


def test_active_learning_reads_digits_from_parquet(tmp_path):
    """The flow passes the path of the Parquet file written by save_bundled: same runs as the arrays."""
    from tasks.data import load_bundled, save_bundled

    path = str(save_bundled("digits", tmp_path / "digits.parquet"))
    X, y = load_bundled("digits")
    p = params_for("rethink_uncertainty", al_rounds=1, al_members=2, al_hidden=[8], al_steps=3, al_batch=5)
    assert M.run_al_seed(p, 0, "bald", path)["rows"] == M.run_al_seed(p, 0, "bald", (X.to_numpy(np.float32), y.to_numpy()))["rows"]


def test_params_reject_inconsistent_config():
    good = params_for("rethink_uncertainty", smoke=False).model_dump()
    Params.model_validate({**good, **SMOKE})
    for bad in ({"n_examples": [1, 100, 10]}, {"n_examples": [1, 10, 10]}, {"n_examples": [2, 10, 100]},
                {"seeds": 3, "al_seeds": 5}, {"beta_prior": [0.0, 5.0]}, {"normal_gamma_prior": [1.0, 5.0, 0.0, 0.0]}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})
