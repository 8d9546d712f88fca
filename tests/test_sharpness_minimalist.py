"""Minimalist-model sharpness: the analytic loss/gradient/Hessian against autograd and finite differences,
the closed form S*(Q, D) against the autograd Hessian, GD invariants, power iteration against eigvalsh,
and determinism by seed."""

import numpy as np
import pytest
import torch
from conftest import params_for

from flows.sharpness_minimalist import method

TINY = dict(n=12, d=6, spectrum_decay=2.0, beta_norm=1.0, noise_levels=[0.0, 0.1, 0.3], level_beta_norms=[1.0, 1.5, 2.0],
            base_noise=0.1, depth_main=3, depths=[2, 3, 4], init_norm=0.05, steps=60, record_every=3,
            eos_step_ratios=[0.6, 1.5], fixed_eta=0.05, fixed_eta_steps=90, sgd_step_ratios=[0.6],
            sgd_batch_sizes=[1, 4], tail_frac=0.3, curve_points=10,
            mlp_classes=[3, 8], mlp_n_train=30, mlp_hidden=4, mlp_label_noise=[0.0, 0.2, 0.4], mlp_lr=0.05,
            mlp_steps=6, mlp_record_every=3, mlp_power_iters=3)


def _random_runs(depths, n=9, d=5, seed=0):
    """Random data and random (not small, not balanced) parameters for runs of the given depths."""
    rng = np.random.default_rng(seed)
    depths = np.array(depths)
    B, m = len(depths), depths.max() - 1
    X = rng.standard_normal((B, n, d))
    Y = rng.standard_normal((B, n))
    W = rng.standard_normal((B, d))
    mask = np.arange(m)[None, :] < (depths[:, None] - 1)
    V = np.where(mask, rng.uniform(0.5, 1.5, (B, m)) * rng.choice([-1, 1], (B, m)), 1.0)
    return X, Y, W, V, mask, depths


def _autograd_hessian(X, y, w, v):
    theta = torch.tensor(np.concatenate([w, v]), dtype=torch.float64)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    return torch.autograd.functional.hessian(lambda t: method.minimalist_loss_torch(t, Xt, yt, len(v) + 1), theta).numpy()


def test_products_match_brute_force():
    V = np.random.default_rng(1).standard_normal((3, 5))
    q = method._exclusive_products(V)
    Q2 = method._pair_products(V)
    for b in range(3):
        for j in range(5):
            assert q[b, j] == pytest.approx(np.prod(np.delete(V[b], j)), rel=1e-12)
            for k in range(5):
                expected = 0.0 if j == k else np.prod(np.delete(V[b], [j, k]))
                assert Q2[b, j, k] == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_hessian_matches_autograd_for_mixed_depths():
    X, Y, W, V, mask, depths = _random_runs([2, 3, 5, 4])
    G, c, _ = method.sufficient_stats(X, Y)
    H = method.hessian(W, V, G, c, mask)
    d = X.shape[2]
    for b, D in enumerate(depths):
        ref = _autograd_hessian(X[b], Y[b], W[b], V[b, :D - 1])
        P = d + D - 1
        np.testing.assert_allclose(H[b, :P, :P], ref, rtol=1e-10, atol=1e-12)
        assert np.all(H[b, P:, :] == 0) and np.all(H[b, :, P:] == 0), "padded layers must not enter the Hessian"
        assert method.top_eigenvalue(H[b:b + 1])[0] == pytest.approx(np.linalg.eigvalsh(ref)[-1], rel=1e-10)


def test_loss_gradient_and_hessian_match_finite_differences():
    X, Y, W, V, mask, _ = _random_runs([4], seed=3)
    G, c, yy = method.sufficient_stats(X, Y)
    d, m = W.shape[1], V.shape[1]

    def L(theta):
        return method.loss(theta[None, :d], theta[None, d:], G, c, yy)[0]

    theta0 = np.concatenate([W[0], V[0]])
    direct = 0.5 * np.mean((np.prod(V[0]) * X[0] @ W[0] - Y[0]) ** 2)
    assert L(theta0) == pytest.approx(direct, rel=1e-12)

    h, P = 1e-4, d + m
    E = np.eye(P) * h
    fd_grad = np.array([(L(theta0 + E[i]) - L(theta0 - E[i])) / (2 * h) for i in range(P)])
    dW, dV = method.gradient(W, V, X, Y, np.full_like(Y, 1.0 / Y.shape[1]), mask)
    np.testing.assert_allclose(np.concatenate([dW[0], dV[0]]), fd_grad, rtol=1e-6, atol=1e-8)

    fd_hess = np.array([[(L(theta0 + E[i] + E[j]) - L(theta0 + E[i] - E[j]) - L(theta0 - E[i] + E[j])
                          + L(theta0 - E[i] - E[j])) / (4 * h * h) for j in range(P)] for i in range(P)])
    H = method.hessian(W, V, G, c, mask)[0]
    np.testing.assert_allclose(H, fd_hess, rtol=1e-5, atol=1e-6)


def test_minibatch_gradient_matches_autograd_on_the_batch():
    X, Y, W, V, mask, _ = _random_runs([3], seed=4)
    chosen = np.array([1, 4, 6])
    weights = np.zeros_like(Y)
    weights[0, chosen] = 1.0 / len(chosen)
    dW, dV = method.gradient(W, V, X, Y, weights, mask)
    theta = torch.tensor(np.concatenate([W[0], V[0]]), dtype=torch.float64, requires_grad=True)
    ref = torch.autograd.grad(method.minimalist_loss_torch(theta, torch.as_tensor(X[0, chosen]),
                                                           torch.as_tensor(Y[0, chosen]), 3), theta)[0].numpy()
    np.testing.assert_allclose(np.concatenate([dW[0], dV[0]]), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n,d", [(30, 8), (6, 15)])
@pytest.mark.parametrize("depth", [2, 3, 6])
def test_closed_form_sharpness_is_the_top_eigenvalue_at_the_balanced_minimum(n, d, depth):
    rng = np.random.default_rng(depth + n)
    X = method.make_inputs(n, d, 1.0, rng)
    y = method.make_labels(X, [1.5], [0.3], rng)[0]
    beta, Q = method.optimum(X, y)
    if n <= d:
        assert Q == pytest.approx(float(y @ np.linalg.solve(X @ X.T, y)), rel=1e-8)
    w, v = method.balanced_minimum(X, y, depth)
    np.testing.assert_allclose(np.prod(v) * w, beta, rtol=1e-10, atol=1e-12)
    H = _autograd_hessian(X, y, w, v)
    assert method.predicted_sharpness(X, y, depth) == pytest.approx(np.linalg.eigvalsh(H)[-1], rel=1e-9)
    assert method.closed_form_error(X, y, depth) < 1e-8
    # an unbalanced minimum with the same beta has a different sharpness: the closed form is specific
    w2, v2 = w * 2.0, v.copy()
    v2[0] /= 2.0
    assert abs(np.linalg.eigvalsh(_autograd_hessian(X, y, w2, v2))[-1] / np.linalg.eigvalsh(H)[-1] - 1) > 1e-3


def test_small_step_gd_ends_at_the_closed_form_and_stays_balanced():
    rng = np.random.default_rng(7)
    X = method.make_inputs(30, 6, 1.0, rng)
    y = method.make_labels(X, [1.0], [0.2], rng)[0]
    depths = np.array([2, 4])
    S = np.array([method.predicted_sharpness(X, y, D) for D in depths])
    out = method.train_minimalist(np.stack([X, X]), np.stack([y, y]), depths, 0.3 * 2 / S, np.array([30, 30]),
                                  steps=3000, init_norm=0.05, rng=np.random.default_rng(0), record_every=100)
    np.testing.assert_allclose(out["sharpness"][-1], S, rtol=2e-3)
    # D >= 3: the Hessian vanishes at the origin, so a small start is flat (D = 2 keeps the X^T y/n cross term)
    assert out["sharpness"][0, 1] < 0.2 * S[1], "progressive sharpening starts from a flat point"
    assert out["sharpness"][0, 0] == pytest.approx(np.linalg.norm(X.T @ y) / len(y), rel=0.1)
    # gradient flow conserves ||w||^2 - v_j^2 (0 at a balanced start); GD drifts only by O(eta^2) per step
    imbalance = np.linalg.norm(out["W"], axis=1) ** 2 - out["V"][:, 0] ** 2
    assert np.abs(imbalance).max() < 5e-2 * (np.linalg.norm(out["W"], axis=1) ** 2).min()


def test_sgd_batches_have_the_requested_size_and_divergence_is_contained():
    rng = np.random.default_rng(8)
    X = method.make_inputs(20, 5, 0.0, rng)
    y = method.make_labels(X, [1.0], [0.1], rng)[0]
    S = method.predicted_sharpness(X, y, 3)
    out = method.train_minimalist(np.stack([X, X, X]), np.stack([y, y, y]), np.array([3, 3, 3]),
                                  np.array([0.1, 0.1, 50.0]) * 2 / S, np.array([1, 4, 20]), steps=200,
                                  init_norm=0.5, rng=np.random.default_rng(1))
    assert list(out["diverged"]) == [False, False, True]
    assert np.isfinite(out["sharpness"][:, :2]).all() and np.isnan(out["sharpness"][-1, 2])
    weights_seen = []
    original = method.gradient

    def spy(W, V, X, Y, weights, mask):
        weights_seen.append(weights.copy())
        return original(W, V, X, Y, weights, mask)

    method.gradient = spy
    try:
        method.train_minimalist(np.stack([X, X]), np.stack([y, y]), np.array([3, 3]), np.array([0.01, 0.01]),
                                np.array([1, 4]), steps=5, init_norm=0.5, rng=np.random.default_rng(2))
    finally:
        method.gradient = original
    for w in weights_seen:
        assert (w[0] > 0).sum() == 1 and (w[1] > 0).sum() == 4
        np.testing.assert_allclose(w.sum(1), 1.0)


def test_power_iteration_matches_eigvalsh_of_the_full_mlp_hessian():
    gen = torch.Generator().manual_seed(0)
    n_in, hidden, n = 3, 4, 10
    X = torch.randn(n, n_in, generator=gen, dtype=torch.float64)
    Y = torch.randn(2, n, generator=gen, dtype=torch.float64)
    theta = method.init_mlp(n_in, hidden, 2, gen)
    for _ in range(200):  # move towards a minimum, where the top eigenvalue is the sharpness
        theta = theta.detach().requires_grad_(True)
        theta = (theta - 0.1 * torch.autograd.grad(method.mlp_loss(theta, X, Y, n_in, hidden), theta)[0]).detach()
    v0 = torch.randn(theta.shape, generator=gen, dtype=torch.float64)
    eig, _ = method.mlp_sharpness(theta, X, Y, n_in, hidden, v0, iters=100)
    for level in range(2):
        H = torch.autograd.functional.hessian(
            lambda t: method.mlp_loss(t[None], X, Y[level:level + 1], n_in, hidden), theta[level])
        spectrum = torch.linalg.eigvalsh(H)
        assert spectrum[-1] > -spectrum[0], "test point must have its largest-magnitude eigenvalue on top"
        assert float(eig[level]) == pytest.approx(float(spectrum[-1]), rel=1e-8)


def test_digits_task_flips_nested_fractions():
    rng = np.random.default_rng(0)
    X_all = rng.integers(0, 17, (300, 64)).astype(float)
    y_all = rng.integers(0, 10, 300)
    X, Y = method.digits_task(X_all, y_all, (3, 8), 40, [0.0, 0.25, 0.5], np.random.default_rng(1))
    assert X.shape[1] == 64 and X.max() <= 1.0 and set(np.unique(Y)) <= {-1.0, 1.0}
    flipped = Y != Y[0]
    assert flipped[1].mean() == pytest.approx(0.25, abs=1 / X.shape[0]) and flipped[2].mean() == pytest.approx(0.5, abs=1 / X.shape[0])
    assert np.all(flipped[2][flipped[1]]), "the flips of a level include those of lower levels"


@pytest.fixture(scope="module")
def digits_path(tmp_path_factory):
    """A stand-in for the digits Parquet (64 pixel columns in 0..16 and a target): determinism only."""
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.integers(0, 17, (200, 64)).astype(float), columns=[f"pixel_{j}" for j in range(64)])
    frame["target"] = rng.integers(0, 10, 200)
    path = tmp_path_factory.mktemp("digits") / "digits.parquet"
    frame.to_parquet(path)
    return str(path)


def test_run_seed_is_deterministic_by_seed(digits_path):
    p = params_for("sharpness_minimalist", **TINY)
    a = method.run_seed(p, 3, digits_path)
    b = method.run_seed(p, 3, digits_path)
    c = method.run_seed(p, 4, digits_path)
    import pandas as pd

    for r in (a, b, c):
        r.pop("timings")
    # frames compare NaN equal to NaN (the linear control has no layer balance)
    for key in ("runs", "curves", "mlp"):
        assert pd.DataFrame(a[key]).equals(pd.DataFrame(b[key]))
    assert a["closed_form_error"] == b["closed_form_error"]
    assert not pd.DataFrame(a["runs"]).equals(pd.DataFrame(c["runs"])) and a["mlp"] != c["mlp"]
    groups = [(r["spectrum"], r["group"]) for r in a["runs"]]
    for spectrum in ("isotropic", "power_law"):
        assert [groups.count((spectrum, g)) for g in ("eos", "linear", "diff", "depth", "sgd", "gd2")] == [2, 1, 3, 3, 3, 1]
    # the difficulty and depth sweeps run at the one fixed eta, whatever their closed form
    fixed = [r for r in a["runs"] if r["group"] in ("diff", "depth")]
    assert {r["eta"] for r in fixed} == {0.05}
    assert len({round(r["S_pred"], 6) for r in fixed}) > 3
    # the relative runs keep eta = r * 2/S*
    for r in a["runs"]:
        if r["group"] in ("eos", "sgd", "gd2"):
            assert r["eta"] == pytest.approx(r["ratio"] * 2 / r["S_pred"])


def test_linear_control_has_a_constant_hessian():
    """The D = 1 control is plain linear regression: its sharpness is lambda_max(X^T X/n) at every step."""
    rng = np.random.default_rng(5)
    X = method.make_inputs(20, 5, 0.0, rng)
    y = method.make_labels(X, [1.0], [0.1], rng)[0]
    S1 = method.predicted_sharpness(X, y, 1)
    assert S1 == pytest.approx(np.linalg.eigvalsh(X.T @ X / 20)[-1], rel=1e-10)
    out = method.train_minimalist(np.stack([X, X]), np.stack([y, y]), np.array([1, 3]), np.array([0.6 * 2 / S1, 0.05]),
                                  np.array([20, 20]), steps=200, init_norm=0.05, rng=np.random.default_rng(0),
                                  record_every=10)
    np.testing.assert_allclose(out["sharpness"][:, 0], S1, rtol=1e-10)
    assert out["loss"][-1, 0] < out["loss"][0, 0]


def test_control_metrics_follow_their_definitions():
    """Controls in the evaluation: a diverged run above the edge counts as a 100% deviation, the
    below-edge runs give the EoS control, S0 gives the sweep control, a second GD run the SGD control."""
    import pandas as pd

    from flows.sharpness_minimalist import evaluate

    rows = []
    for seed in (0, 1, 2):
        for r, diverged in ((0.6, False), (1.2, False), (3.0, seed == 2)):
            edge = 1.0
            rows.append({"seed": seed, "group": "eos", "ratio": r, "S_pred": r * edge, "edge": edge, "S0": 0.01,
                         "terminal": np.nan if diverged else min(r, 1.0), "S_pred_terminal": min(r, 1.0),
                         "tail_max_rel_dev_edge": np.nan if diverged else abs(min(r, 1.0) - 1.0) + 0.01,
                         "diverged": diverged})
        rows.append({"seed": seed, "group": "linear", "ratio": 0.6, "S_pred": 0.5, "edge": 2.0, "S0": 0.5,
                     "terminal": 0.5, "S_pred_terminal": 0.5, "tail_max_rel_dev_edge": 0.75, "diverged": False})
    eos = evaluate._eos_metrics(pd.DataFrame(rows), [0, 1, 2])
    assert eos["max_rel_dev"]["mean"] == pytest.approx((0.01 + 0.01 + 1.0) / 3)
    assert eos["below_edge_max_rel_dev"]["mean"] == pytest.approx(0.41)
    assert eos["min_rise"]["mean"] == pytest.approx(100.0)  # the diverged run is left out of the rise
    assert eos["linear_rise"]["mean"] == pytest.approx(1.0)
    assert eos["diverged_above_edge"] == 1 and eos["runs_above_edge"] == 6

    sweep = []
    for seed in (0, 1, 2):
        for level, Q in enumerate([1.0, 2.0, 3.0]):
            sweep.append({"seed": seed, "group": "diff", "level": level, "Q": Q, "terminal": Q, "S_pred": Q,
                          "S_pred_terminal": Q, "S0": 3.0 - Q + 0.1 * seed, "ratio": 0.1,
                          "diverged": False})
    sw = evaluate._sweep_metrics(pd.DataFrame(sweep), "diff", "Q", [0, 1, 2])
    assert sw["spearman"]["mean"] == pytest.approx(1.0) and sw["spearman_at_init"]["mean"] == pytest.approx(-1.0)
    assert sw["max_rel_err"]["mean"] == pytest.approx(0.0)

    # SGD: the control is a second GD run; a diverged SGD run makes the worst step size undefined (NaN), not skipped
    p = params_for("sharpness_minimalist", **TINY)
    sgd = []
    for seed in (0, 1, 2):
        for r in (0.6, 1.2):
            for group, b, terminal in (("sgd", 1, 0.5), ("sgd", 12, 1.0), ("gd2", 12, 1.0 + 0.01 * seed)):
                diverged = group == "sgd" and b == 1 and r == 1.2 and seed == 0
                sgd.append({"seed": seed, "group": group, "ratio": r, "batch_size": b, "diverged": diverged,
                            "terminal": np.nan if diverged else terminal, "final_loss": 0.0, "final_balance": 1.0,
                            "edge": 1.0, "S_pred": 1.0})
    out = evaluate._sgd_metrics(pd.DataFrame(sgd), p)
    assert out["by_ratio"]["r0.6"]["b1_minus_gd"]["mean"] == pytest.approx(-0.5)
    assert np.isnan(out["b1_minus_gd_worst"]["mean"])
    assert out["gd2_minus_gd_worst"]["mean"] == pytest.approx(0.01)


def test_claims_pair_the_spectra_with_isotropic_primary():
    from flows.sharpness_minimalist.claims import PAPER

    ids = {c.id: c for c in PAPER.claims}
    for base in ("progressive_sharpening", "edge_of_stability_2_over_eta", "difficulty_increases_sharpness",
                 "depth_increases_sharpness", "sgd_below_gd"):
        assert ids[base].metric.startswith("isotropic.") and ids[base + "_powerlaw"].metric.startswith("power_law.")
        assert ids[base].control is not None and ids[base].control.metric.split(".")[0] == "isotropic"
    # matches with our own closed form S* are sanity checks, on both spectra, never counted
    for base in ("difficulty_matches_closed_form", "depth_matches_closed_form"):
        assert ids[base].metric.startswith("isotropic.") and ids[base + "_powerlaw"].metric.startswith("power_law.")
        assert ids[base].role == ids[base + "_powerlaw"].role == "sanity"
    assert ids["closed_form_equals_autograd_hessian"].role == "sanity"
    assert ids["progressive_sharpening"].control.name.startswith("strawman")


def test_params_reject_inconsistent_config():
    from flows.sharpness_minimalist.params import SMOKE, Params

    good = {"seeds": 1, **TINY}
    Params.model_validate(good)
    Params.model_validate({**good, **SMOKE, "n": 40})
    for bad in ({"depths": [2, 3, 3]}, {"mlp_classes": [3, 3]},
                {"depth_main": 5}, {"eos_step_ratios": [0.6, 0.9]}, {"eos_step_ratios": [1.2, 3.0]},
                {"level_beta_norms": [1.0, 1.5]}, {"level_beta_norms": [1.0, 1.0, 1.0], "noise_levels": [0.1, 0.1, 0.3]},
                {"sgd_batch_sizes": [2, 4]},
                {"sgd_batch_sizes": [1, 12]}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})
