"""anova_tpnn: the tensor-product basis against the official two-sigmoid formula, the sum-to-zero condition
by brute force, uniqueness (components = the functional ANOVA projection of the model's own function),
components summing to the prediction, the known synthetic decomposition and its recovery, the stability
score on known cases, and determinism by seed."""

import itertools

import numpy as np
import pytest
import scipy.stats
import torch
from conftest import params_for

from flows.anova_tpnn import method as m

CFG = params_for("anova_tpnn", n_basis=10, id_eps=0.0, nam_hidden=[8, 8], nbm_hidden=[8, 8], nbm_bases=4)


def _data(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.uniform(-1, 1, (n, d)), dtype=torch.float32)


def _tpnn(x, comps, constrained=True, eps=0.0, seed=0):
    model = m.ANOVATPNN(comps, 6, constrained=constrained, eps=eps)
    model.initialize(x, np.random.default_rng(seed), torch.Generator().manual_seed(seed))
    with torch.no_grad():   # a random intercept and sharper bases than the init, so nothing is trivially smooth
        model.intercept.fill_(0.7)
        for o in model.orders:
            getattr(model, f"log_t{o}").sub_(1.0)
    model.freeze_constants(x)
    model.eval()
    return model


@pytest.mark.parametrize("kind", m.NEURAL_MODELS)
def test_components_sum_to_prediction(kind):
    x = _data()
    comps = m.all_components(3)
    model = m.build_model(kind, comps, CFG, x, seed=3)
    if isinstance(model, m.ANOVATPNN):
        model.freeze_constants(x)
    model.eval()
    with torch.no_grad():
        pred, parts = model(x), model.components(x)
    assert parts.shape == (len(x), len(comps))
    torch.testing.assert_close(pred, model.intercept + parts.sum(1), rtol=1e-5, atol=1e-5)
    if isinstance(model, m.ANOVATPNN):   # the single-component path agrees with the batched one
        for c in range(len(comps)):
            torch.testing.assert_close(model.component(x, c), parts[:, c], rtol=1e-5, atol=1e-5)


def test_basis_matches_official_two_sigmoid_formula():
    """phi = sigmoid(-z) + r sigmoid(z), r = -(sum sigmoid(-z) + eps) / (sum sigmoid(z) + eps), z = (x - b)/t,
    f = sum_k beta_k prod_j phi_kj: recomputed in float64 NumPy from the raw parameters."""
    x = _data(150, 2, seed=1)
    model = _tpnn(x, [(0,), (0, 1)], eps=1e-3, seed=4)
    X = x.double().numpy()
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))
    for c, comp in enumerate(model.comps):
        o, p = model._slots[c]
        b = getattr(model, f"b{o}")[p].detach().double().numpy()                  # (K, o)
        t = np.exp(getattr(model, f"log_t{o}")[p].detach().double().numpy())
        beta = getattr(model, f"beta{o}")[p].detach().double().numpy()
        z = (X[:, list(comp)][:, None, :] - b) / t                         # (n, K, o)
        s0, s1 = sig(-z), sig(z)
        r = -(s0.sum(0) + 1e-3) / (s1.sum(0) + 1e-3)
        expected = ((s0 + r * s1).prod(-1) * beta).sum(-1)
        np.testing.assert_allclose(model.component(x, c).double().detach().numpy(), expected, rtol=2e-4, atol=2e-5)


def test_sum_to_zero_in_each_argument_brute_force():
    """Mains average to zero over the training rows; a pair averages to zero over the training values of
    either argument for every fixed value of the other (checked on a grid of fixed values)."""
    x = _data(120, 3, seed=2)
    model = _tpnn(x, m.all_components(3), eps=0.0, seed=5)
    grid = torch.linspace(-1, 1, 7)
    for c, comp in enumerate(model.comps):
        vals = model.component(x, c)
        scale = float(vals.abs().max())
        assert scale > 1e-2
        if len(comp) == 1:
            assert abs(float(vals.mean())) < 1e-5 * scale
            continue
        for j, l in (comp, comp[::-1]):
            for zval in grid:
                rows = x.clone()
                rows[:, l] = zval
                assert abs(float(model.component(rows, c).mean())) < 1e-5 * scale
    assert m.centring_error(model, x, 8, np.random.default_rng(0)) < 1e-5
    assert m.centring_error(model, x, 8, np.random.default_rng(0), relative_to="prediction") < 1e-5


def test_ablation_is_not_centred_so_the_check_can_fail():
    x = _data(120, 3, seed=2)
    ablation = _tpnn(x, m.all_components(3), constrained=False, seed=5)
    assert m.centring_error(ablation, x, 8, np.random.default_rng(0)) > 0.05


def test_components_are_the_functional_anova_projection_of_the_model():
    """Uniqueness: with d = 2 and every constrained factor centred, the model's components equal the
    functional ANOVA decomposition of its own prediction function f under the product of the empirical
    marginals, computed by brute force on the n x n grid of training values:
        f0(a) = E_b f(a, b) - E f,   f1(b) = E_a f(a, b) - E f,   f01 = f - f0 - f1 - E f,   b0 = E f."""
    x = _data(60, 2, seed=7)
    model = _tpnn(x, m.all_components(2), eps=0.0, seed=8)
    a, b = x[:, 0], x[:, 1]
    grid = torch.stack([a.repeat_interleave(len(b)), b.repeat(len(a))], dim=1)   # (n*n, 2)
    with torch.no_grad():
        F = model(grid).double().reshape(len(a), len(b))                         # F[i, k] = f(a_i, b_k)
    mean = F.mean()
    f0, f1 = F.mean(1) - mean, F.mean(0) - mean
    f01 = F - f0[:, None] - f1[None, :] - mean
    scale = float(F.std())
    with torch.no_grad():
        got = model.components(grid).double()
    assert abs(float(mean) - float(model.intercept.detach())) < 1e-4 * scale
    np.testing.assert_allclose(got[:, 0].reshape(len(a), len(b))[:, 0].numpy(), f0.numpy(), atol=1e-4 * scale)
    np.testing.assert_allclose(got[:, 1].reshape(len(a), len(b))[0].numpy(), f1.numpy(), atol=1e-4 * scale)
    np.testing.assert_allclose(got[:, 2].reshape(len(a), len(b)).numpy(), f01.numpy(), atol=1e-4 * scale)


def test_true_synthetic_components_are_the_anova_decomposition():
    """The closed-form truth sums to f minus a constant and each component averages to zero in each
    argument under the product of the empirical marginals of ``ref`` (brute force over ref's values). The
    pair does not average to zero over the joint rows: the inputs are correlated."""
    rng = np.random.default_rng(0)
    X, _ = m.make_synthetic(300, 5, 0.5, 0.0, rng)
    comps = m.all_components(5)
    truth = m.true_components(X, comps, X)
    resid = m.synthetic_function(X) - truth.sum(1)
    assert np.ptp(resid) < 1e-10
    for c, comp in enumerate(comps):
        if len(comp) == 1:
            assert abs(truth[:, c].mean()) < 1e-10
        if comp == (0, 3):   # E over x0 for each fixed x3, and vice versa
            for j in (0, 3):
                for i in range(0, 300, 37):
                    rows = np.repeat(X[i:i + 1], 300, axis=0)
                    rows[:, j] = X[:, j]
                    assert abs(m.true_components(rows, comps, X)[:, c].mean()) < 1e-10
            assert abs(truth[:, c].mean()) > 0.05      # the joint mean is the covariance of x0 and x3
        elif comp not in m.TRUE_SYNTHETIC and comp != (3,):
            assert np.all(truth[:, c] == 0)


def test_recovery_error_known_cases():
    truth = np.random.default_rng(0).standard_normal((50, 4))
    assert m.recovery_error(truth, truth) == 0.0
    assert m.recovery_error(np.zeros_like(truth), truth) == pytest.approx(1.0)
    assert m.recovery_error(2 * truth, truth) == pytest.approx(1.0)


def test_tpnn_recovers_known_components():
    """Trained on the synthetic function (d = 4, small noise), ANOVA-TPNN's components are close to the
    unique decomposition (one seed; the flow compares models over runs)."""
    cfg = params_for("anova_tpnn", synth_n=700, synth_d=4, synth_rho=0.5, synth_noise=0.1, bc_top_features=8,
                     test_frac=0.2, eval_rows=300, n_basis=10, id_eps=1e-3)
    ds = m.prepare_dataset("synthetic", cfg)
    to_t = lambda a: torch.as_tensor(a, dtype=torch.float32)
    x, y = to_t(ds.Z[ds.pool]), to_t(ds.y[ds.pool])
    with m.torch_single_thread():
        model = m.build_model("tpnn", ds.comps, cfg, x, seed=0)
        m.fit_neural(model, "regression", x, y, to_t(ds.Z[ds.test]), to_t(ds.y[ds.test]), epochs=300, lr=0.03,
                     eval_every=25)
        with torch.no_grad():
            est = model.components(to_t(ds.Z[ds.eval_rows])).numpy().astype(float)
    err = m.recovery_error(est - est.mean(0), ds.truth)
    assert err < 0.5, err          # an all-zero estimate scores 1.0; the truth 0.0


def test_pairwise_distance_and_stability_known_cases():
    g = np.random.default_rng(0).standard_normal(30)
    G = np.stack([g, g, -g, 2 * g, np.zeros(30)])
    D = m.pairwise_distances(G)
    assert D[0, 1] == 0 and D[0, 2] == pytest.approx(1.0) and D[0, 3] == pytest.approx(1 / 3)
    assert D[0, 4] == pytest.approx(1.0) and D[4, 4] == 0.0
    np.testing.assert_allclose(D, D.T)
    Dc = D[None]
    brute = 1 - np.mean([D[r, s] for r, s in itertools.combinations(range(5), 2)])
    assert m.stability(Dc)[0] == pytest.approx(brute)
    # a bootstrap resample holding run 0 twice: the (0, 0) pair is skipped, (0, 3) counted twice
    assert m.stability(Dc, np.array([0, 0, 3]))[0] == pytest.approx(1 - 1 / 3)
    assert np.isnan(m.stability(Dc, np.array([2, 2]))[0])
    # centring inside component_distances: adding a constant to one run changes nothing
    est = np.concatenate([G[:2, :, None], G[:2, :, None] + 5.0])               # runs: g, g, g+5, g+5
    assert np.allclose(m.component_distances(est)[0], 0.0)


def test_ebm_components_sum_to_its_prediction():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    ebm = m.fit_ebm("regression", X, y, interactions=2, outer_bags=1, interaction_bins=8, seed=0)
    parts = m.ebm_components(ebm, X, m.all_components(3))
    np.testing.assert_allclose(parts.sum(1) + ebm.intercept_, ebm.predict(X), rtol=1e-8, atol=1e-8)


def test_ebm_fits_on_the_same_simd_path_whatever_the_process_allows():
    """libebm's scalar, AVX2 and AVX-512 paths give other bits (a clone on an AVX-512 CPU moved this paper's smoke
    digest): the fit pins AVX2, so a process that allows everything, or nothing, fits the same model, and gets its
    own option back."""
    from interpret import develop
    from interpret.utils._native import Native

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    terms = []
    for allowed in (Native.AccelerationFlags_ALL, Native.AccelerationFlags_NONE):
        develop.set_option("acceleration", allowed)
        try:
            ebm = m.fit_ebm("regression", X, y, interactions=2, outer_bags=1, interaction_bins=8, seed=0)
            assert develop.get_option("acceleration") == allowed
        finally:
            develop.set_option("acceleration", Native.AccelerationFlags_ALL)
        terms.append(ebm.eval_terms(X))
    np.testing.assert_array_equal(terms[0], terms[1])

def test_run_is_deterministic_by_seed():
    cfg = params_for("anova_tpnn", datasets=["synthetic"], models=["tpnn", "na2m"], synth_n=150, synth_d=4,
                     synth_rho=0.5, synth_noise=0.2, bc_top_features=8, test_frac=0.2, eval_rows=60, n_basis=4,
                     id_eps=1e-3, epochs=6, synth_epochs=6, lr=0.03, eval_every=3, nam_hidden=[4], nbm_hidden=[4], nbm_bases=2,
                     ebm_interactions=0, ebm_outer_bags=1, ebm_interaction_bins=8, centring_probes=2)
    a, b, c = m.run_seed(cfg, 5), m.run_seed(cfg, 5), m.run_seed(cfg, 6)
    for model in cfg.models:
        ra, rb, rc = (r["datasets"]["synthetic"]["models"][model] for r in (a, b, c))
        np.testing.assert_array_equal(ra["components"], rb["components"])
        assert ra["score"] == rb["score"]
        assert not np.array_equal(ra["components"], rc["components"])


def test_params_reject_inconsistent_config():
    assert m.DATASETS == ("synthetic", "diabetes", "breast_cancer")   # positions name the random streams
    assert m.NEURAL_MODELS == ("tpnn", "tpnn_noconstraint", "na2m", "nb2m") and m.MODELS[-1] == "ebm"
    params_for("anova_tpnn", models=["na2m", "tpnn"], ebm_runs=0)
    for bad in ({"models": ["na2m", "nb2m"]}, {"models": ["tpnn", "tpnn"]}, {"models": ["tpnn", "gam"]},
                {"datasets": ["synthetic", "synthetic"]}, {"datasets": ["wine"]}, {"seeds": 1, "ebm_runs": 0},
                {"ebm_runs": 3}):
        with pytest.raises(ValueError):
            params_for("anova_tpnn", **bad)


def test_guard_eps_explains_a_failing_sum_to_zero_check():
    """A basis whose threshold sits near the edge of the data (one side's mass well below one row but above eps)
    misses its zero sum by about eps / mass with the official guard; recomputing r with eps = 0 restores it."""
    x = _data(300, 2, seed=2)
    model = _tpnn(x, [(0,), (0, 1)], eps=1e-3, seed=3)
    with torch.no_grad():
        model.b1[0, 0, 0] = 1.3          # beyond the data (x in [-1, 1]): sum of s1 over the rows is small
        model.log_t1[0, 0, 0] = np.log(0.05)
        model.beta1[0].zero_()
        model.beta1[0, 0] = 1.0          # the main effect is this one basis alone
    model.freeze_constants(x)
    mass = m.smallest_side_mass(model, x)
    assert 1e-3 < mass < 1.0
    assert m.centring_error(model, x, 4, np.random.default_rng(0)) > 1e-3
    assert m.centring_error_exact_r(model, x, 4, np.random.default_rng(0)) < 1e-10
    assert model.eps == 1e-3             # the diagnosis works on a copy


def test_linear_control_fits_lines_not_curves():
    rng = np.random.default_rng(0)
    Z = rng.uniform(-1, 1, (400, 3))
    lin = 0.5 + Z @ np.array([1.0, -2.0, 0.3])
    np.testing.assert_allclose(m.linear_control("regression", Z[:300], lin[:300], Z[300:]), lin[300:], atol=1e-10)
    curve = np.sin(np.pi * Z[:, 0])
    pred = m.linear_control("regression", Z[:300], curve[:300], Z[300:])
    assert np.sqrt(np.mean((pred - curve[300:]) ** 2)) > 0.3
    label = (Z[:, 0] + Z[:, 1] > 0).astype(float)
    score = m.linear_control("classification", Z[:300], label[:300], Z[300:])
    assert m.test_score("classification", score, label[300:], 1.0) > 0.99


def test_stability_difference_mean_worst_and_fitted_function():
    """The claim's metric is the worst dataset's difference; the mean and every dataset are recorded."""
    from flows.anova_tpnn.evaluate import _stability_difference

    def D(value, R=4):               # (1 component, R runs): every pair of distinct runs at distance `value`
        out = np.full((1, R, R), value)
        out[:, np.arange(R), np.arange(R)] = 0.0
        return out

    dist = {("a", "tpnn"): D(0.2), ("a", "na2m"): D(0.6), ("b", "tpnn"): D(0.5), ("b", "na2m"): D(0.4),
            ("a", "tpnn", "f"): D(0.1), ("a", "na2m", "f"): D(0.1), ("b", "tpnn", "f"): D(0.3),
            ("b", "na2m", "f"): D(0.3)}
    out = _stability_difference(["a", "b"], dist, "tpnn", "na2m", "")
    assert out["by_dataset"] == pytest.approx({"a": 0.4, "b": -0.1})
    assert out["mean"] == pytest.approx(0.15) and out["worst"] == pytest.approx(-0.1)
    assert out["worst_ci_low"] == pytest.approx(-0.1) and out["worst_ci_high"] == pytest.approx(-0.1)
    f = _stability_difference(["a", "b"], dist, "tpnn", "na2m", "f")
    assert f["mean"] == pytest.approx(0.0) and f["worst"] == pytest.approx(0.0)
    # one run far from the others: the interval is the jackknife over runs, by hand
    dist[("a", "tpnn")][0, 0, 1:] = dist[("a", "tpnn")][0, 1:, 0] = 0.8
    out = _stability_difference(["a"], dist, "tpnn", "na2m", "")
    # without run 0 every pair is at 0.2 (stability 0.8), without another run 2 of 3 pairs are at 0.8 (0.4);
    # minus na2m's stability 0.4
    leave_one_out = np.array([0.4, 0.0, 0.0, 0.0])
    half = scipy.stats.t.ppf(0.975, 3) * np.sqrt(3 / 4 * np.sum((leave_one_out - leave_one_out.mean()) ** 2))
    assert out["mean"] == pytest.approx(1 - (3 * 0.8 + 3 * 0.2) / 6 - 0.4)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((out["mean"] - half, out["mean"] + half))
