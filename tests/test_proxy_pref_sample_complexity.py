"""Unit tests of flows/proxy_pref_sample_complexity/method.py against independent references."""

import math

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.proxy_pref_sample_complexity import evaluate as E
from flows.proxy_pref_sample_complexity import method as M
from flows.proxy_pref_sample_complexity.params import SMOKE, Params

TINY = params_for("proxy_pref_sample_complexity", x_dim=5, latent_dim=3, n_responses=3, latent_scale=1.5,
                  policy_scale=5.0, theta_noise=0.5, h_noise=0.2, n_proxy=300, n_true_grid=[10, 35], n_test=200,
                  hidden=8, lr=0.02, prior_precision=1.0, baseline_prior_grid=[10.0], proxy_steps=30,
                  proxy_batch=64, true_steps=20)


def world(seed=0, **kw):
    args = dict(x_dim=5, latent_dim=3, n_responses=3, latent_scale=1.5, policy_scale=5.0, theta_noise=0.5, h_noise=0.2)
    args.update(kw)
    return M.make_world(np.random.default_rng(seed), **args)


# ---------------------------------------------------------------------------- Bradley–Terry likelihood
def test_bt_nll_equals_closed_form():
    """-log P(y_w > y_l) with P = pi_w / (pi_w + pi_l), computed by hand from the probabilities."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 4)) * 3
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y_w = rng.integers(0, 4, 50)
    y_l = (y_w + rng.integers(1, 4, 50)) % 4
    rows = np.arange(50)
    expected = -np.log(probs[rows, y_w] / (probs[rows, y_w] + probs[rows, y_l]))
    got = M.bt_nll(torch.log_softmax(torch.tensor(logits), -1), torch.tensor(y_w), torch.tensor(y_l)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    np.testing.assert_allclose(M.bt_probability(probs, y_w, y_l), np.exp(-expected), rtol=1e-12)
    # both orders of a pair are a distribution: P(a > b) + P(b > a) = 1
    back = M.bt_nll(torch.log_softmax(torch.tensor(logits), -1), torch.tensor(y_l), torch.tensor(y_w)).numpy()
    np.testing.assert_allclose(np.exp(-got) + np.exp(-back), 1.0, rtol=1e-12)


def test_bt_nll_is_invariant_to_the_normaliser_and_matches_a_known_value():
    """log pi + const gives the same likelihood (only log-ratios matter); pi = (0.6, 0.3, 0.1): P(0 > 2) = 0.6/0.7."""
    logp = torch.log(torch.tensor([[0.6, 0.3, 0.1]], dtype=torch.float64))
    nll = M.bt_nll(logp, torch.tensor([0]), torch.tensor([2]))
    assert float(nll) == pytest.approx(-math.log(0.6 / 0.7), rel=1e-12)
    assert float(M.bt_nll(logp + 5.0, torch.tensor([0]), torch.tensor([2]))) == pytest.approx(float(nll), rel=1e-12)


# ---------------------------------------------------------------------------- KL metric
def test_kl_hand_computed():
    p = np.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    q = np.array([[0.25, 0.5, 0.25], [0.5, 0.25, 0.25], [0.2, 0.3, 0.5]])
    # row 1: 0.5 ln 2 + 0.25 ln 0.5 + 0 = 0.25 ln 2; row 2: 1 * ln(1 / 0.5) (0 log 0 = 0); row 3: identical -> 0
    np.testing.assert_allclose(M.kl_rows(p, np.log(q)), [0.25 * math.log(2), math.log(2), 0.0], atol=1e-15)


def test_pref_agreement_hand_computed():
    p = np.array([[0.5, 0.3, 0.2]])                    # order 0 > 1 > 2
    q = np.array([[0.2, 0.3, 0.5]])                    # reversed: every pair wrong
    r = np.array([[0.4, 0.2, 0.4]])                    # (0,1) right, (0,2) tie != '>', (1,2) wrong
    assert M.pref_agreement(p, np.log(p)) == 1.0
    assert M.pref_agreement(p, np.log(q)) == 0.0
    assert M.pref_agreement(p, np.log(r)) == pytest.approx(1 / 3)


# ---------------------------------------------------------------------------- the data generator
def test_pairs_are_distinct_and_uniform():
    y1, y2 = M.sample_pairs(np.random.default_rng(1), 60_000, 3)
    assert np.all(y1 != y2)
    counts = np.bincount(y1 * 3 + y2, minlength=9).reshape(3, 3)
    freq = counts[~np.eye(3, dtype=bool)] / 60_000     # the 6 ordered pairs
    np.testing.assert_allclose(freq, 1 / 6, atol=5 * math.sqrt((1 / 6) * (5 / 6) / 60_000))


def test_generator_preferences_match_monte_carlo_frequencies():
    """For fixed prompts, the empirical win rate of a over b equals pi(a|x) / (pi(a|x) + pi(b|x))."""
    w = world(3)
    rng = np.random.default_rng(5)
    reps = 30_000
    for x in rng.standard_normal((3, 5)):
        for policy in (M.true_policy(w, x[None]), M.proxy_policy(w, x[None]), M.proxy_policy(w, x[None], True)):
            y_w, y_l = M.sample_preferences(rng, np.repeat(policy, reps, axis=0))
            pi = policy[0]
            for a in range(3):
                for b in range(a + 1, 3):
                    mask = ((y_w == a) & (y_l == b)) | ((y_w == b) & (y_l == a))
                    m = mask.sum()
                    assert abs(m / reps - 1 / 3) < 5 * math.sqrt((2 / 9) / reps)
                    expected = pi[a] / (pi[a] + pi[b])
                    freq = np.mean(y_w[mask] == a)
                    assert abs(freq - expected) < 5 * math.sqrt(expected * (1 - expected) / m) + 1e-9


def test_world_policies_are_distributions_and_h_is_column_stochastic_and_invertible():
    w = world(7)
    assert np.allclose(w.H.sum(axis=0), 1.0) and np.all(w.H >= 0)
    assert abs(np.linalg.det(w.H)) > 1e-6
    x = np.random.default_rng(0).standard_normal((100, 5))
    for p in (M.true_policy(w, x), M.proxy_policy(w, x), M.proxy_policy(w, x, True)):
        assert np.allclose(p.sum(1), 1.0) and np.all(p > 0)


def _reconstruct_latent(w: M.World, probs: np.ndarray) -> np.ndarray:
    """Invert g~: log pi = s Theta z + c 1 with sum z = 1, solved by least squares for (z, c)."""
    K, D = w.Theta.shape
    A = np.zeros((K + 1, D + 1))
    A[:K, :D], A[:K, D], A[K, :D] = w.policy_scale * w.Theta, 1.0, 1.0
    b = np.concatenate([np.log(probs), np.ones((len(probs), 1))], axis=1)
    return np.linalg.lstsq(A, b.T, rcond=None)[0][:D].T


def test_conditions_hold_expert_is_a_function_of_the_proxy_policy():
    """Conditions 1-2: pi_dagger(x) = g~(H g~^{-1}(pi~(x))): the expert policy is recovered from the proxy
    policy alone, by inverting the proxy head and applying the simplex map h."""
    w = world(11)
    x = np.random.default_rng(2).standard_normal((500, 5))
    z = _reconstruct_latent(w, M.proxy_policy(w, x))
    np.testing.assert_allclose(z, M.latent(w.A, x), atol=1e-8)
    np.testing.assert_allclose(M.head(w, z @ w.H.T), M.true_policy(w, x), atol=1e-8)


def test_control_breaks_shared_level_sets():
    """Moving x along the null space of A' leaves the control proxy unchanged but changes the expert."""
    w = world(13)
    x = np.random.default_rng(4).standard_normal((1, 5))
    null = np.linalg.svd(w.A_alt)[2][-1]               # A' null = 0 (dx = 5 > D = 3)
    x2 = x + 2.0 * null
    np.testing.assert_allclose(M.proxy_policy(w, x2, violated=True), M.proxy_policy(w, x, violated=True), atol=1e-12)
    assert np.abs(M.true_policy(w, x2) - M.true_policy(w, x)).max() > 1e-3
    # while the conditions-holding proxy changes with the expert (same level sets)
    assert np.abs(M.proxy_policy(w, x2) - M.proxy_policy(w, x)).max() > 1e-3


# ---------------------------------------------------------------------------- the parameterisation
def test_two_stage_with_oracle_components_represents_the_expert_exactly():
    """tau~ = tau, Theta~ = s Theta^T, pi_bar(z) = z H^T: phi~ o Theta~ o pi_bar o tau~ = pi_dagger."""
    w = world(17)
    x = np.random.default_rng(6).standard_normal((300, 5))
    z = torch.tensor(M.latent(w.A, x))[None]
    adapter = {"B": torch.tensor(w.H.T)[None], "c": torch.zeros((1, 1, 3), dtype=torch.float64)}
    logp = M.adapter_logp(adapter, z, torch.tensor(w.policy_scale * w.Theta.T)[None])[0].numpy()
    np.testing.assert_allclose(np.exp(logp), M.true_policy(w, x), atol=1e-10)
    # the identity adapter gives the proxy policy back
    ident = M.init_adapter(1, 3)
    logp0 = M.adapter_logp({k: v.double() for k, v in ident.items()}, z, torch.tensor(w.policy_scale * w.Theta.T)[None])
    np.testing.assert_allclose(np.exp(logp0[0].numpy()), M.proxy_policy(w, x), atol=1e-10)


def test_adapter_fit_recovers_an_oracle_expert_from_many_triples():
    """With the true tau and Theta frozen, the MAP adapter on 2,000 expert triples is close to pi_dagger."""
    w = world(19)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2_000, 5))
    y_w, y_l = M.sample_preferences(rng, M.true_policy(w, x))
    z = torch.tensor(M.latent(w.A, x), dtype=M.DTYPE)[None]
    Th = torch.tensor(w.policy_scale * w.Theta.T, dtype=M.DTYPE)[None]
    start = M.init_adapter(1, 3)
    fitted = M.fit(start, {k: v.clone() for k, v in start.items()}, lambda a, rows: M.adapter_logp(a, z, Th),
                   torch.tensor(y_w)[None], torch.tensor(y_l)[None], torch.ones((1, 2_000), dtype=M.DTYPE),
                   steps=150, lr=0.05, prior_precision=1.0)
    x_test = rng.standard_normal((2000, 5))
    z_test = torch.tensor(M.latent(w.A, x_test), dtype=M.DTYPE)[None]
    with torch.no_grad():
        logq = M.adapter_logp(fitted, z_test, Th)[0].double().numpy()
    p = M.true_policy(w, x_test)
    assert M.kl_rows(p, logq).mean() < 0.01
    assert M.kl_rows(p, np.log(M.proxy_policy(w, x_test))).mean() > 0.5   # the start (identity) was far off


def test_fit_treats_batched_and_padded_models_independently():
    """A model trained inside a padded batch equals the same model trained alone on its own rows."""
    gen = torch.Generator().manual_seed(0)
    p = M.init_network(gen, 2, 5, 8, 3, 3)
    x = torch.randn((2, 40, 5), generator=gen, dtype=M.DTYPE)
    y_w = torch.randint(0, 3, (2, 40), generator=gen)
    y_l = (y_w + torch.randint(1, 3, (2, 40), generator=gen)) % 3
    weight = torch.ones((2, 40), dtype=M.DTYPE)
    weight[1, 25:] = 0.0                                  # model 1 sees only its first 25 rows
    prior = {k: torch.zeros_like(v) for k, v in p.items()}
    both = M.fit(p, prior, lambda th, rows: M.network_logp(th, x), y_w, y_l, weight, steps=50, lr=0.02,
                 prior_precision=torch.tensor([1.0, 3.0]))
    for m, n, prec in ((0, 40, 1.0), (1, 25, 3.0)):
        one = {k: v[m:m + 1] for k, v in p.items()}
        alone = M.fit(one, {k: torch.zeros_like(v) for k, v in one.items()},
                      lambda th, rows: M.network_logp(th, x[m:m + 1, :n]), y_w[m:m + 1, :n], y_l[m:m + 1, :n],
                      torch.ones((1, n), dtype=M.DTYPE), steps=50, lr=0.02, prior_precision=prec)
        for k in p:
            torch.testing.assert_close(both[k][m:m + 1], alone[k], atol=2e-5, rtol=1e-4)


# ---------------------------------------------------------------------------- sample-efficiency read-out
def test_crossing_n_interpolates_in_log_log():
    # KL 1.0 at n = 10 and 0.1 at n = 100: KL = 0.1^0.5 is reached half-way in log n, at n = sqrt(10 * 100)
    n, ok = M.crossing_n([10, 100, 1000], [1.0, 0.1, 0.01], math.sqrt(0.1))
    assert ok and n == pytest.approx(math.sqrt(1000))
    assert M.crossing_n([10, 100], [1.0, 0.5], 0.1) == (100.0, False)     # never reached: the last n, censored
    assert M.crossing_n([10, 100], [0.05, 0.01], 0.1) == (10.0, True)     # reached at once: no extrapolation
    # the first crossing counts, even if the curve goes back up
    assert M.crossing_n([10, 100, 1000], [1.0, 0.1, 0.5], 0.1)[0] == pytest.approx(100.0)


def test_crossing_interval_brackets_the_point_and_is_the_t_interval_for_a_flat_reference():
    rng = np.random.default_rng(0)
    sizes = np.array([10, 35, 100, 300, 1000])
    base = np.exp(-0.5 * np.log(sizes))[None] * np.exp(rng.normal(0, 0.1, (10, 5)))
    ref = np.full((10, 5), 0.1) * np.exp(rng.normal(0, 0.1, (10, 5)))
    out = E._crossing(sizes, base, ref, ref=1)
    assert out["ci_low"] < out["mean"] < out["ci_high"] and out["matched_within_grid"] == 1
    assert 30 < out["mean"] < 300                          # the noiseless crossing is at n = 100
    # a baseline reached at once on every seed: no spread, the interval is the point
    flat = E._crossing(sizes, np.full((4, 5), 0.01), ref[:4], ref=1)
    assert (flat["ci_low"], flat["mean"], flat["ci_high"]) == (10.0, 10.0, 10.0)
    assert np.isnan(E._crossing(sizes, base[:1], ref[:1], ref=1)["ci_low"])   # one seed: no interval


# ---------------------------------------------------------------------------- determinism
def test_run_seed_is_deterministic_by_seed():
    a, b, c = M.run_seed(TINY, 3), M.run_seed(TINY, 3), M.run_seed(TINY, 4)
    assert a["rows"] == b["rows"] and a["true_vs_proxy_kl"] == b["true_vs_proxy_kl"]
    assert a["rows"] != c["rows"]
    methods = {(r["method"], r["setting"]) for r in a["rows"]}
    assert methods == {("true_only", "none"), ("true_only_prior_10", "none")} | {
        (m, s) for m in ("two_stage", "full_finetune", "proxy_only") for s in M.SETTINGS}
    assert all(np.isfinite(r["kl"]) and r["kl"] >= 0 and 0 <= r["agreement"] <= 1 for r in a["rows"])


# ---------------------------------------------------------------------------- params
def test_params_reject_inconsistent_config():
    good = {**TINY.model_dump(), **SMOKE}
    Params.model_validate(good)
    for bad in ({"n_true_grid": [10, 35, 35]}, {"baseline_prior_grid": [10.0, 10.0]}, {"n_ref": 20},
                {"n_responses": 2}, {"n_true_grid": [1, 35]}, {"baseline_prior_grid": [-1.0]}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})


# ---------------------------------------------------------------------------- claims and controls
def test_controls_are_the_same_statistics_on_the_condition_violating_proxy():
    """The violated proxy's ratio, win fraction and crossing are computed exactly as the method's; the
    censored fraction counts the seeds whose true-only curve never reaches their own two-stage KL."""
    from flows.proxy_pref_sample_complexity.evaluate import claim_metrics

    sizes = [10, 35, 100, 300, 1000]
    true_only = np.tile(np.array([1.0, 0.5, 0.3, 0.2, 0.1]), (4, 1))
    two_stage = np.tile(np.array([0.8, 0.1, 0.05, 0.04, 0.03]), (4, 1))
    two_stage[0, 1] = 0.01                                   # seed 0: true-only never gets that low
    violated = np.tile(np.array([1.5, 1.3, 0.8, 0.8, 0.8]), (4, 1))
    violated[1, 1] = 0.4                                     # seed 1: the violated proxy wins once
    kl = {"true_only": true_only, "two_stage": two_stage, "two_stage_violated": violated,
          "full_finetune": true_only, "proxy_only": true_only}
    c = claim_metrics(TINY.model_copy(update={"n_ref": 35, "baseline_prior_grid": []}), kl, sizes, 1)
    assert c["violated_kl_ratio_ref"]["mean"] == pytest.approx(np.mean(violated[:, 1] / true_only[:, 1]))
    assert c["violated_win_fraction_ref"]["mean"] == 0.25 and c["win_fraction_ref"]["mean"] == 1.0
    assert c["win_fraction_ref"]["ci_low"] == pytest.approx(0.025 ** (1 / 4))   # 4 of 4: Clopper-Pearson
    assert c["violated_n_match"]["mean"] == 10.0             # true-only beats the violated model from the start
    assert c["violated_n_match_over_ref"]["mean"] == pytest.approx(10 / 35)
    assert c["n_match_censored_fraction"] == 0.25
