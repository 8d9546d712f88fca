"""ck_ntk_spikes: kernels against closed forms, Monte-Carlo and autograd; the limit against an
independent (Bai-Yao) derivation and against simulations; spectral tools; determinism by seed."""

import math

import numpy as np
import pytest
import torch
from conftest import params_for
from scipy import optimize

from flows.ck_ntk_spikes import method as m
from flows.ck_ntk_spikes.params import SMOKE, Params


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Single-threaded BLAS: these matrices are small, and on a busy machine threads only spin."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield

# ---------------------------------------------------------------------------------------------
# Activations and kernels
# ---------------------------------------------------------------------------------------------


def test_activation_moments_match_closed_forms():
    for act in m.ACTIVATIONS:
        mom = m.gaussian_moments(act)
        assert abs(mom["mean"]) < 1e-10 and abs(mom["second"] - 1) < 1e-10, act
    rv = 0.5 - 1 / (2 * math.pi)
    relu = m.gaussian_moments("relu")
    assert relu["b2"] == pytest.approx(0.25 / rv, rel=1e-9) and relu["a"] == pytest.approx(0.5 / rv, rel=1e-9)
    w = m.SIN_FREQ
    var = (1 - math.exp(-2 * w * w)) / 2
    sin = m.gaussian_moments("sin")
    assert sin["b2"] == pytest.approx(w * w * math.exp(-w * w) / var, rel=1e-9)
    assert sin["a"] == pytest.approx(w * w * (1 + math.exp(-2 * w * w)) / 2 / var, rel=1e-9)
    cubic = m.gaussian_moments("cubic")
    assert cubic["b2"] == pytest.approx(0.5, rel=1e-9) and cubic["a"] == pytest.approx(2.0, rel=1e-9)


def _relu_arccos_kernel(x, y):
    """E[sigma(w.x) sigma(w.y)], w ~ N(0, I), for the centred, normalised ReLU (arc-cosine kernel of
    degree 1, Cho & Saul 2009): E relu(u) relu(v) = |x||y| (sin t + (pi - t) cos t) / (2 pi)."""
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    t = math.acos(np.clip(x @ y / (nx * ny), -1, 1))
    both = nx * ny * (math.sin(t) + (math.pi - t) * math.cos(t)) / (2 * math.pi)
    mean = 1 / math.sqrt(2 * math.pi)
    return (both - mean * (nx + ny) / math.sqrt(2 * math.pi) + mean ** 2) / (0.5 - 1 / (2 * math.pi))


def test_one_layer_ck_averaged_over_weights_is_the_arccos_kernel():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 4)) / math.sqrt(10)
    X[:, 1] = 0.6 * X[:, 0] + 0.5 * X[:, 1]  # a correlated pair, norms away from 1
    X[:, 3] *= 1.4
    draws = [m.kernels(X, *m.random_weights(rng, 10, 2000, 1, dtype=np.float64), "relu")[0][1] for _ in range(100)]
    mc = np.mean(draws, axis=0)  # 200,000 neurons in all
    exact = np.array([[_relu_arccos_kernel(X[:, i], X[:, j]) for j in range(4)] for i in range(4)])
    assert np.max(np.abs(mc - exact)) < 0.015
    # and the Monte-Carlo error is what makes up the gap: one draw of 2,000 neurons is far noisier
    assert np.max(np.abs(draws[0] - exact)) > np.max(np.abs(mc - exact))


def test_one_layer_tanh_ck_matches_bivariate_gaussian_quadrature():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((8, 3)) / math.sqrt(8)
    Ws, w = m.random_weights(rng, 8, 200_000, 1, dtype=np.float64)
    ck = m.kernels(X, Ws, w, "tanh")[0][1]
    f, _ = m.activation("tanh")
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    for i in range(3):
        for j in range(3):
            C = X[:, [i, j]].T @ X[:, [i, j]]  # covariance of (w.x_i, w.x_j)
            L = np.linalg.cholesky(C + 1e-15 * np.eye(2))
            a, b = np.meshgrid(nodes, nodes, indexing="ij")
            u = L[0, 0] * a
            v = L[1, 0] * a + L[1, 1] * b
            exact = np.sum(np.outer(weights, weights) * f(u) * f(v))
            assert ck[i, j] == pytest.approx(exact, abs=0.01)


_TORCH_ACT = {
    "tanh": lambda x: torch.tanh(x) * m._tanh_scale(),
    "relu": lambda x: (torch.relu(x) - m._RELU_MEAN) / m._RELU_STD,
    "sin": lambda x: torch.sin(m.SIN_FREQ * x) / m._SIN_STD,
    "cubic": lambda x: (x + m.CUBIC_BETA * (x ** 3 - 3 * x)) / m._CUBIC_STD,
}


@pytest.mark.parametrize("act", m.ACTIVATIONS)
def test_ntk_equals_jacobian_gram_by_autograd(act):
    """NTK_ij = <d f(x_i)/d theta, d f(x_j)/d theta> over all weights, from torch autograd."""
    rng = np.random.default_rng(2)
    p, d, L, n = 7, 13, 3, 5
    X = rng.standard_normal((p, n)) / math.sqrt(p)
    Ws, w = m.random_weights(rng, p, d, L, dtype=np.float64)
    cks, ntk = m.kernels(X, Ws, w, act)
    params = [torch.tensor(W, requires_grad=True) for W in Ws] + [torch.tensor(w, requires_grad=True)]
    rows, feats = [], []
    for i in range(n):
        h = torch.tensor(X[:, i])
        for W in params[:-1]:
            h = _TORCH_ACT[act](W @ h) / math.sqrt(d)
        feats.append(h.detach().numpy())
        grads = torch.autograd.grad(params[-1] @ h, params)
        rows.append(torch.cat([g.reshape(-1) for g in grads]).numpy())
    J = np.array(rows)
    np.testing.assert_allclose(ntk, J @ J.T, rtol=1e-10, atol=1e-12)
    F = np.array(feats)
    np.testing.assert_allclose(cks[-1], F @ F.T, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Spectral tools
# ---------------------------------------------------------------------------------------------


def test_block_fit_alignment_and_ari_on_known_cases():
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(3), 40)
    V = m.class_contrasts(labels, 3)
    assert V.shape == (120, 2) and np.allclose(V.T @ V, np.eye(2))
    assert m.alignment(V, V) == pytest.approx(1.0) and m.block_fit_error(V, labels, 3) == pytest.approx(0.0, abs=1e-7)
    assert m.kmeans_ari(V, labels, 3, seed=0) == pytest.approx(1.0)
    U, _ = np.linalg.qr(rng.standard_normal((120, 3)))
    P = U @ U.T
    J = np.eye(3)[labels]
    block_means = (J.T @ P @ J) / np.outer(J.sum(0), J.sum(0))
    explicit = np.linalg.norm(P - J @ block_means @ J.T) / np.linalg.norm(P)
    assert m.block_fit_error(U, labels, 3) == pytest.approx(explicit, rel=1e-10)
    assert m.alignment(U, V) == pytest.approx(np.trace(V.T @ P @ V) / 3, rel=1e-10)
    vals, vecs = m.top_eigh(P * 5 + np.diag(np.linspace(0, 1, 120)), 4)
    assert np.all(np.diff(vals) <= 0) and vecs.shape == (120, 4)


# ---------------------------------------------------------------------------------------------
# The limit
# ---------------------------------------------------------------------------------------------


def _mp_stieltjes(z, c, s0=1.0):
    x = z / s0
    return (-(x - 1 + c) + math.sqrt((x - 1 + c) ** 2 - 4 * c * x)) / (2 * c * x) / s0


def test_limit_at_the_input_is_marchenko_pastur():
    c0, s0 = 2.0, 0.9
    branch = m._Branch(np.array([1.0]), m.LimitModel(c=(c0,), b2=0.5, s0=s0))
    assert branch.edge == pytest.approx(s0 * (1 + math.sqrt(c0)) ** 2, rel=1e-6)
    for z in (6.0, 9.0, 40.0):
        assert branch.stieltjes(z) == pytest.approx(_mp_stieltjes(z, c0, s0), rel=1e-9)


def test_input_spike_formula_matches_simulation():
    n, p, snr = 600, 300, 6.0
    labels = np.repeat(np.arange(3), 200)
    V = m.class_contrasts(labels, 3)
    lam, zeta = m.input_spike(snr, n / p)
    tops, zetas = [], []
    for seed in range(4):
        X, s0 = m.gmm_inputs(np.random.default_rng(seed).standard_normal((p, n)), labels, 3, snr)
        vals, vecs = m.top_eigh(X.T @ X, 2)
        tops.append(vals.mean() / s0)
        zetas.append(m.alignment(vecs, V))
    assert np.mean(tops) == pytest.approx(lam, rel=0.03)
    assert np.mean(zetas) == pytest.approx(zeta, abs=0.03)
    assert m.input_spike(1.3, 2.0) == (None, 0.0)  # below sqrt(c0)


class _BaiYaoLevel:
    """Independent route: the bulk of CK_l through the inverse of its companion Stieltjes transform,
    z(mb) = -1/mb + c int t/(1 + t mb) dH(t), H = law of b^2 lambda + 1 - b^2 (lambda ~ CK_(l-1) bulk);
    a population spike alpha gives the outlier psi(alpha) = z(-1/alpha) (Bai & Yao 2012) with
    eigenvector retention alpha psi'(alpha) / psi(alpha)."""

    def __init__(self, prev_m, prev_edge, c, b2):
        s = 1 - b2
        self.c = c
        self.z = lambda mb: -1 / mb + (c / mb) * (1 - prev_m(-(s + 1 / mb) / b2) / (mb * b2))
        lo = -1 / (b2 * prev_edge + s)
        res = optimize.minimize_scalar(self.z, bounds=(lo * (1 - 1e-10), -1e-4 / prev_edge), method="bounded",
                                       options={"xatol": 1e-14})
        self.mstar, self.edge = res.x, res.fun

    def m(self, x):
        if self.z(self.mstar) >= x:  # within the minimiser's tolerance of the edge
            mb = self.mstar
        else:
            mb = optimize.brentq(lambda t: self.z(t) - x, self.mstar, -1e-3 / x, xtol=1e-15)
        return (mb + (1 - self.c) / x) / self.c

    def psi(self, alpha):
        return self.z(-1 / alpha)


@pytest.mark.parametrize("act", ["tanh", "sin"])
def test_layer_recursion_matches_bai_yao_spiked_model(act):
    n, p, d, depth, classes, snr = 1200, 600, 1000, 3, 3, 40.0
    b2 = m.gaussian_moments(act)["b2"]
    s0 = m.noise_scale(snr, n, classes)
    lam0, zeta = m.input_spike(snr, n / p)
    lam = s0 * lam0
    prev_m, prev_edge = (lambda x: _mp_stieltjes(x, n / p, s0)), s0 * (1 + math.sqrt(n / p)) ** 2
    for layer in range(1, depth + 1):
        level = _BaiYaoLevel(prev_m, prev_edge, n / d, b2)
        alpha = b2 * lam + 1 - b2
        assert -1 / alpha > level.mstar  # above the transition
        lam = level.psi(alpha)
        h = 1e-5 * alpha
        zeta *= alpha * (level.psi(alpha + h) - level.psi(alpha - h)) / (2 * h) / lam
        pred = m.predict(act, n, p, d, depth, classes, snr, f"CK{layer}")
        assert pred["outlier"] == pytest.approx(lam, rel=1e-6)
        assert pred["zeta"] == pytest.approx(zeta, abs=1e-5)
        assert pred["edge"] == pytest.approx(level.edge, rel=1e-5)
        prev_m, prev_edge = level.m, level.edge


def test_limit_matches_the_linearised_network_ck_and_ntk():
    """Gaussian-equivalent network X_l = (b W X_(l-1) + sqrt(1 - b^2) Z) / sqrt(d), and its NTK form
    r_+ I + sum_l r_l CK_l: outliers and eigenspace alignment against the limit at the same size."""
    n, p, d, depth, classes, snr, act = 600, 300, 500, 3, 3, 24.0, "sin"
    b = math.sqrt(m.gaussian_moments(act)["b2"])
    r, r_plus = m.ntk_coefficients(act, depth)
    labels = np.repeat(np.arange(classes), n // classes)
    V = m.class_contrasts(labels, classes)
    got = {"CK3": [], "NTK": []}
    for seed in range(4):
        rng = np.random.default_rng(seed)
        X, _ = m.gmm_inputs(rng.standard_normal((p, n)), labels, classes, snr)
        cks = [X.T @ X]
        for _ in range(depth):
            X = (b * rng.standard_normal((d, X.shape[0])) @ X + math.sqrt(1 - b * b) * rng.standard_normal((d, n))) / math.sqrt(d)
            cks.append(X.T @ X)
        for name, K in (("CK3", cks[3]), ("NTK", r_plus * np.eye(n) + sum(ri * Ki for ri, Ki in zip(r, cks)))):
            vals, vecs = m.top_eigh(K, 2)
            got[name].append((vals.mean(), m.alignment(vecs, V)))
    for name, values in got.items():
        pred = m.predict(act, n, p, d, depth, classes, snr, name)
        lam, zeta = np.mean(values, axis=0)
        assert lam == pytest.approx(pred["outlier"], rel=0.05), name
        assert zeta == pytest.approx(pred["zeta"], abs=0.05), name


def test_transition_snr_separates_outlier_from_none():
    args = ("relu", 1200, 600, 1000, 3, 3)
    t = m.transition_snr(*args, "CK2")
    assert t > m.transition_snr(*args, "CK1") > math.sqrt(2)
    assert m.predict(*args, t * 0.97, "CK2")["outlier"] is None
    assert m.predict(*args, t * 1.03, "CK2")["outlier"] is not None


@pytest.mark.parametrize("act", ["relu", "sin"])
def test_naive_control_is_the_limit_without_random_matrix_corrections(act):
    """The position claims' control (population kernels) is the derived limit as n/p and n/d go to 0, and
    it sits strictly below the finite-ratio limit, so the control is a different prediction."""
    for kernel in ("CK0", "CK2", "NTK"):
        naive = m.population_outlier(act, 1200, 3, 3, 64.0, kernel)
        far = m.predict(act, 1200, 10 ** 8, 10 ** 8, 3, 3, 64.0, kernel)
        assert naive == pytest.approx(far["outlier"], rel=1e-5) and far["zeta"] == pytest.approx(1.0, abs=1e-4)
        assert naive < m.predict(act, 1200, 600, 1000, 3, 3, 64.0, kernel)["outlier"]


# ---------------------------------------------------------------------------------------------
# Experiments
# ---------------------------------------------------------------------------------------------

_SMALL = params_for("ck_ntk_spikes", n=90, p=45, width=60, depth=2, classes=3, snr_grid=[0.0, 30.0],
                    sweep_activations=["tanh"], top_activations=["tanh", "relu"], null_draws=2,
                    edge_margin=0.02, theory_points=2, digits_per_class=20)


def _digits():
    from sklearn.datasets import load_digits

    data = load_digits()
    return m.digits_inputs(data.data, data.target, 20)


def test_run_seed_is_deterministic_by_seed():
    a = m.run_seed(_SMALL, 5, _digits())
    b = m.run_seed(_SMALL, 5, _digits())
    c = m.run_seed(_SMALL, 6, _digits())
    strip = lambda r: {k: v for k, v in r.items() if k != "timings"}  # noqa: E731
    assert strip(a) == strip(b)
    assert strip(a)["rows"] != strip(c)["rows"]
    kernels = {row["kernel"] for row in a["rows"]}
    assert kernels == {"CK0", "CK1", "CK2", "NTK"}
    assert len(a["rows"]) == (2 + 1) * 4 and len(a["digits"]) == 2 * 4


def test_run_seed_reads_the_digits_from_a_bundled_parquet(tmp_path):
    """The flow passes the path of ``save_bundled("digits")``: the same numbers as the prepared inputs."""
    from tasks.data import save_bundled

    path = str(save_bundled("digits", tmp_path / "digits.parquet"))
    strip = lambda r: {k: v for k, v in r.items() if k != "timings"}  # noqa: E731
    assert strip(m.run_seed(_SMALL, 5, path)) == strip(m.run_seed(_SMALL, 5, _digits()))


def test_params_reject_inconsistent_config():
    good = {**_SMALL.model_dump(), **SMOKE}
    Params.model_validate(good)
    for bad in ({"n": 151}, {"snr_grid": [1.0, 64.0]}, {"snr_grid": [0.0, 64.0, 64.0]},
                {"sweep_activations": ["sin"]}, {"top_activations": ["tanh", "swish"]}, {"classes": 10, "p": 8, "n": 150}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})


def test_digits_inputs_subtract_class_means():
    X, y = _digits()
    assert X.shape == (64, 40) and np.allclose(X[:, y == 0].mean(axis=1), 0) and np.allclose(X[:, y == 1].mean(axis=1), 0)
    assert np.mean(np.sum(X ** 2, axis=0)) == pytest.approx(1.0)


def test_flow_controls_are_the_same_metrics_without_signal_and_against_the_naive_limit():
    """The count, ARI and block-fit controls are the same worst-cell metrics at snr 0; the null claim's
    control is the same fraction at the top snr; the position control is the error against the naive limit."""
    import pandas as pd

    from flows.ck_ntk_spikes.evaluate import _metrics, _theory
    from flows.ck_ntk_spikes.flow import records_tables

    records = records_tables([m.run_seed(_SMALL, s) for s in (0, 1, 2)], m.theory_predictions(_SMALL), 0)
    rows = records["spectra"]
    metrics, _ = _metrics(_SMALL, rows, records["limit"], _theory(records["theory"]),
                          pd.DataFrame(columns=["activation", "kernel"]))
    c = metrics["claims"]
    null = rows[(rows.snr == 0.0) & (rows.activation == "tanh") & (rows.kernel.isin(["CK1", "CK2"]))]
    assert c["count_top_ck_control"]["min"] == min(float((g["count"] == 2).mean()) for _, g in null.groupby("kernel"))
    assert c["ari_top_control"]["min"] == pytest.approx(min(g["ari"].mean() for _, g in
                                                            rows[(rows.snr == 0.0) & (rows.kernel != "CK0")].groupby("kernel")))
    top = rows[(rows.snr == 30.0) & (rows.activation == "tanh") & (rows.kernel != "CK0")]
    assert c["zero_snr_control"]["min"] == min(float((g["count"] == 0).mean()) for _, g in top.groupby("kernel"))
    cell = metrics["top_snr"]["relu"]["CK2"]
    g = rows[(rows.snr == 30.0) & (rows.activation == "relu") & (rows.kernel == "CK2")]
    naive = m.population_outlier("relu", _SMALL.n, _SMALL.depth, _SMALL.classes, 30.0, "CK2")
    assert cell["naive_outlier"] == naive
    assert cell["naive_rel_err"]["mean"] == pytest.approx(abs(g["mean_top_r"].mean() - naive) / naive)
    assert c["ck_position_control"]["max_rel_err"] >= cell["naive_rel_err"]["mean"]
