"""Unit tests of flows/blae_bandit/method.py against independent references (no Prefect engine)."""

import itertools
import math

import numpy as np
import pytest
from conftest import params_for
from scipy.optimize import minimize

from flows.blae_bandit import method as M


def tiny_params():
    return params_for("blae_bandit", horizons=[200, 600], random_K=8, random_d=3, eoo_eps=0.2, extra_eoo_eps=[0.05],
                      sigma=1.0, ridge_lambda=1.0, fw_tol=1e-3, e4_gamma=10.0, rs_oful_C=0.5, linucb=True)


def simplex_grid(k: int, step: int):
    """All points of the k-simplex with coordinates in {0, 1/step, ..., 1}, shape (n, k)."""
    pts = [c for c in itertools.product(range(step + 1), repeat=k - 1) if sum(c) <= step]
    return np.array([[*c, step - sum(c)] for c in pts], dtype=float) / step


# ---------------------------------------------------------------------------- batch grid
@pytest.mark.parametrize("T", [100, 255, 256, 257, 1000, 4097, 10_000, 12_345, 30_000, 65_536, 100_000, 250_000])
def test_batch_grid_matches_the_formula_in_exact_integer_arithmetic(T):
    """L - 1 = ceil(log2 log2 T) is the smallest k with 2^(2^k) >= T; T_l = ceil(T^(1 - 2^-l)) is the
    smallest n with n^(2^l) >= T^(2^l - 1) -- both checked with Python integers, no floating point."""
    k = 0
    while 2 ** (2 ** k) < T:
        k += 1
    assert M.num_batches(T) == k + 1
    assert M.batch_bound(T) == k + 2
    grid = M.batch_grid(T)
    assert len(grid) == k + 1
    for l, T_l in enumerate(grid, start=1):
        p = 2 ** l
        assert T_l ** p >= T ** (p - 1) > (T_l - 1) ** p, (l, T_l)


def test_batch_grid_hand_values():
    assert M.batch_grid(10_000) == [100, 1000, 3163, 5624, 7499]


# ---------------------------------------------------------------------------- optimal design
@pytest.mark.parametrize("seed", range(3))
def test_kiefer_wolfowitz_unregularized_design_has_g_value_d(seed):
    """Kiefer-Wolfowitz: the G-optimal value is d; any design has max ||x||^2 >= d (the pi-weighted
    mean of ||x||^2 is d), and Frank-Wolfe stops within its tolerance above d."""
    rng = np.random.default_rng(seed)
    K, d, tol = 25, 6, 1e-3
    X = rng.normal(size=(K, d))
    design = M.g_optimal_design(X, 0.0, tol)
    assert abs(design.pi.sum() - 1) < 1e-9 and np.all(design.pi >= 0)
    g = M.g_value(X, design.pi)                 # recomputed from pi with an explicit inverse
    assert d - 1e-8 <= g <= d * (1 + tol) + 1e-8
    assert abs(g - design.g_max) < 1e-6 * d
    uniform = M.g_value(X, np.full(K, 1 / K))
    assert uniform >= d - 1e-8


def test_unregularized_design_on_a_rank_deficient_arm_set_has_g_value_rank():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(12, 3)) @ rng.normal(size=(3, 8))      # 12 arms spanning 3 of 8 dimensions
    design = M.g_optimal_design(X, 0.0, 1e-4)
    assert 3 - 1e-8 <= M.g_value(X, design.pi) <= 3 * (1 + 1e-4) + 1e-8


def test_orthonormal_arms_get_the_uniform_design():
    design = M.g_optimal_design(np.eye(4), 0.0, 1e-6)
    np.testing.assert_allclose(design.pi, 0.25, atol=1e-12)


@pytest.mark.parametrize("lam", [0.05, 0.5])
def test_regularized_design_matches_brute_force_on_a_tiny_instance(lam):
    """K = 3, d = 2: Frank-Wolfe's maximiser of log det(A(pi) + lam I) against a 1/400 simplex grid;
    the regularized Kiefer-Wolfowitz bound max ||x||^2 <= d_eff = tr(M^-1 A) < d at the maximiser;
    and the G-criterion of the result against the brute-force min-max design."""
    X = np.array([[1.0, 0.1], [0.3, 0.9], [-0.6, 0.5]])
    grid = simplex_grid(3, 400)
    mats = np.einsum("nk,kd,ke->nde", grid, X, X) + lam * np.eye(2)   # (n, 2, 2), every grid design at once
    logdets = np.linalg.slogdet(mats)[1]
    i = int(np.argmax(logdets))
    design = M.g_optimal_design(X, lam, 1e-7)
    fw_logdet = np.linalg.slogdet(M.design_matrix(X, design.pi, lam))[1]
    assert fw_logdet >= logdets[i] - 1e-9
    assert fw_logdet - logdets[i] < 1e-3
    np.testing.assert_allclose(design.pi, grid[i], atol=5e-3)
    Mat = M.design_matrix(X, design.pi, lam)
    d_eff = np.trace(np.linalg.solve(Mat, Mat - lam * np.eye(2)))
    assert abs(d_eff - design.d_eff) < 1e-9
    assert design.g_max <= d_eff * (1 + 1e-7) and d_eff < 2
    def g_of(points):                                                    # G-criterion of many designs at once
        m = np.einsum("nk,kd,ke->nde", points, X, X) + lam * np.eye(2)
        return np.einsum("kd,nde,ke->nk", X, np.linalg.inv(m), X).max(axis=1)

    coarse = g_of(grid)
    centre = grid[int(np.argmin(coarse))]                               # brute force, then a 1/20000 grid near it
    a, b = np.meshgrid(np.arange(-100, 101) / 20000, np.arange(-100, 101) / 20000)
    fine = np.column_stack([centre[0] + a.ravel(), centre[1] + b.ravel(), centre[2] - a.ravel() - b.ravel()])
    fine = fine[(fine >= 0).all(axis=1)]
    g_star = min(coarse.min(), g_of(fine).min())
    assert abs(M.g_value(X, grid[0], lam) - coarse[0]) < 1e-12
    assert g_star - 1e-3 <= design.g_max
    assert design.g_max <= 1.05 * g_star                               # close to the min-max design here


def test_round_counts_ceil_and_cap():
    pi = np.array([0.5, 0.3, 0.2, 0.0])
    np.testing.assert_array_equal(M.round_counts(pi, 11, 100), [6, 4, 3, 0])
    capped = M.round_counts(pi, 11, 10)
    assert capped.sum() == 10 and capped[3] == 0
    np.testing.assert_array_equal(capped, [5, 3, 2, 0])


# ---------------------------------------------------------------------------- estimation
def test_ridge_from_counts_matches_the_closed_form_on_individual_samples():
    """theta = (Phi^T Phi + lam I)^-1 Phi^T y on the stacked individual pulls (and sklearn's Ridge)."""
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(3)
    X = rng.normal(size=(5, 3))
    counts = np.array([3, 0, 7, 1, 4])
    rewards = [rng.normal(size=n) for n in counts]
    Phi = np.repeat(X, counts, axis=0)
    y = np.concatenate(rewards)
    lam = 0.7
    closed = np.linalg.solve(Phi.T @ Phi + lam * np.eye(3), Phi.T @ y)
    theta, Vinv = M.ridge_from_counts(X, counts, np.array([r.sum() for r in rewards]), lam)
    np.testing.assert_allclose(theta, closed, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.linalg.inv(Vinv), Phi.T @ Phi + lam * np.eye(3), rtol=1e-10)
    sk = Ridge(alpha=lam, fit_intercept=False).fit(Phi, y).coef_
    np.testing.assert_allclose(theta, sk, rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------------------- bookkeeping on hand-made runs
def test_ledger_regret_is_pulls_times_gaps():
    X, theta = np.array([[1.0, 0.0], [0.5, 0.0], [0.0, 1.0]]), np.array([1.0, 0.0])
    led = M.Ledger(X, theta, 20, 0.0, np.random.default_rng(0))
    sums = led.pull(np.array([0, 1, 2]), np.array([2, 4, 1]))
    np.testing.assert_allclose(sums, [2.0, 2.0, 0.0])                 # sigma = 0: n * mu
    led.pull(np.array([1]), np.array([0]))                            # an empty batch is no batch
    assert (led.t, led.batches, led.regret) == (7, 1, 4 * 0.5 + 1 * 1.0)
    led.commit(1)
    assert (led.t, led.batches, led.regret) == (20, 2, 3.0 + 13 * 0.5)
    assert led.curve == [(0, 0.0), (7, 3.0), (20, 9.5)]
    with pytest.raises(ValueError):
        led.pull(np.array([0]), np.array([1]))


def test_blae_noise_free_two_arm_run_by_hand():
    """Arms e_1 (best), e_2 (gap 1), sigma = 0, T = 10^4: batch 1 (T_1 = 100) pulls each arm 50 times;
    theta_hat = (50/51, 0), eps_1 = sqrt(1/51) < gap/2, so e_2 goes and batch 2 commits to e_1."""
    led = M.blae(np.eye(2), np.array([1.0, 0.0]), 10_000, np.random.default_rng(0), sigma=0.0, lam=1.0, S=1.0)
    assert led.pulls.tolist() == [9950, 50]
    assert led.regret == 50.0 and led.batches == 2
    assert led.curve == [(0, 0.0), (100, 50.0), (10_000, 50.0)]


def test_phased_elimination_noise_free_two_arm_run_by_hand():
    """Official constants: batch l pulls ceil(2 pi g n_l / d) = n_l per arm (pi = 1/2, g = d = 2); after
    batch 1 (n = 100) the gap estimate 100/101 < 2 eps = 2 sqrt(2 log(2e8) / 100); after batch 2
    (n = 1000) 1100/1101 > 2 sqrt(2 log(2e8) / 1000): regret 100 + 1000, three batches."""
    led = M.phased_elimination(np.eye(2), np.array([1.0, 0.0]), 10_000, np.random.default_rng(0), sigma=0.0)
    assert led.pulls.tolist() == [8900, 1100]
    assert led.regret == 1100.0 and led.batches == 3


@pytest.mark.parametrize("T", [100, 1000, 5000])
def test_blae_uses_at_most_the_grid_and_accounts_every_round(T):
    for seed in range(4):
        X, theta = M.random_instance(12, 4, np.random.default_rng(seed))
        led = M.blae(X, theta, T, np.random.default_rng(100 + seed))
        assert led.batches <= M.num_batches(T) <= M.batch_bound(T)
        assert led.pulls.sum() == T == led.t
        assert led.regret == pytest.approx(float(led.pulls @ led.gaps))
        for method_fn in (M.e4, M.phased_elimination, M.rs_oful):
            other = method_fn(X, theta, T, np.random.default_rng(seed))
            assert other.pulls.sum() == T and other.regret == pytest.approx(float(other.pulls @ other.gaps))


def test_blae_without_elimination_is_the_same_grid_exploring_to_T():
    """The negative control: BLAE's batch grid and designs on every arm for the whole horizon. No arm is
    dropped, so its pulls (and regret) do not depend on the rewards; BLAE itself eliminates on this instance."""
    X, theta = M.random_instance(12, 4, np.random.default_rng(1))
    T = 5000
    runs = [M.blae(X, theta, T, np.random.default_rng(s), eliminate=False) for s in (0, 1)]
    for led in runs:
        assert led.info["arms_left"] == 12 and led.batches <= M.num_batches(T) and led.pulls.sum() == T
    assert runs[0].pulls.tolist() == runs[1].pulls.tolist()
    first = M.g_optimal_design(X, 1.0 / M.batch_grid(T)[0], 1e-3)
    assert runs[0].curve[1] == (int(M.round_counts(first.pi, M.batch_grid(T)[0], T).sum()),
                                pytest.approx(float(M.round_counts(first.pi, M.batch_grid(T)[0], T) @ runs[0].gaps)))
    blae = M.blae(X, theta, T, np.random.default_rng(0))
    assert blae.info["arms_left"] < 12 and blae.regret < runs[0].regret


def test_e4_rerun_of_the_timing_control_repeats_the_same_pulls():
    p = tiny_params()
    X, theta = M.make_instance(p, "random", 0, 3)
    a, b = (M.run_method("e4", X, theta, 600, np.random.default_rng([3, 0, 600, M.METHOD_ID["e4"]]), p) for _ in range(2))
    assert a["pulls"] == b["pulls"] and a["regret"] == b["regret"]


# ---------------------------------------------------------------------------- baselines
def test_rs_oful_batch_length_matches_the_determinant_loop():
    rng = np.random.default_rng(5)
    for _ in range(5):
        B = rng.normal(size=(4, 4))
        V0 = B @ B.T + 0.5 * np.eye(4)
        x = rng.normal(size=4) * 0.3
        C = 0.5
        V, n = V0.copy(), 0
        while np.linalg.det(V) <= (1 + C) * np.linalg.det(V0):      # the official loop, one pull at a time
            V += np.outer(x, x)
            n += 1
        assert M.rs_oful_batch_length(float(x @ np.linalg.solve(V0, x)), C) == n


def test_e4_allocation_on_end_of_optimism_by_hand():
    """Estimated theta = e_1, eps = 0.2: constraints ||x - e_1||^2_{H^-1} <= gap^2/2 with w(e_1) unbounded
    reduce to the e_2 axis: (2 eps)^2 / (4 eps w_2 + w_3) <= eps^2 / 2 and 1 / (4 eps w_2 + w_3) <= 1/2;
    cost eps w_2 + w_3 is minimised by w_3 = 8, w_2 = 0 (4 eps = 0.8 < 1)."""
    X, theta = M.end_of_optimism_instance(0.2)
    w = M.e4_allocation(X, theta, 1e-3)
    assert np.isinf(w[0])
    assert w[1] < 0.05 and w[2] == pytest.approx(8.0, rel=1e-2)


@pytest.mark.parametrize("seed", range(3))
def test_transductive_design_against_an_epigraph_slsqp_solve(seed):
    rng = np.random.default_rng(seed)
    m, d = 6, 3
    Z, Y = rng.normal(size=(m, d)), rng.normal(size=(m, d))

    def f(p):
        return np.einsum("kd,de,ke->k", Y, np.linalg.inv(Z.T @ (p[:, None] * Z) + 1e-12 * np.eye(d)), Y)

    ref = np.inf
    for trial in range(4):
        p0 = np.random.default_rng(trial).dirichlet(np.ones(m))
        res = minimize(lambda x: x[-1], np.r_[p0, f(p0).max() * 1.01], method="SLSQP",
                       constraints=[{"type": "ineq", "fun": lambda x: x[-1] - f(np.maximum(x[:-1], 1e-12))},
                                    {"type": "eq", "fun": lambda x: x[:-1].sum() - 1}],
                       bounds=[(0, 1)] * m + [(0, None)], options={"maxiter": 500, "ftol": 1e-12})
        ref = min(ref, f(np.maximum(res.x[:-1], 1e-12)).max())
    pi, value = M.transductive_design(Z, Y)
    assert value == pytest.approx(f(pi).max(), rel=1e-6)
    assert ref * (1 - 1e-6) <= value <= ref * 1.02


def test_linucb_vectorised_matches_a_naive_loop_and_runs_are_independent():
    T, sigma, lam = 150, 1.0, 1.0
    Xs = np.stack([M.random_instance(6, 3, np.random.default_rng(s))[0] for s in range(2)])
    theta = np.array([1.0, 0.0, 0.0])
    noise = np.random.default_rng(9).standard_normal((2, T))
    out = M.linucb_many(Xs, theta, T, noise, sigma=sigma, lam=lam, S=1.0, checkpoints=(50, T))
    for r in range(2):
        X, V, b, regret = Xs[r], lam * np.eye(3), np.zeros(3), 0.0
        mu = X @ theta
        for t in range(T):
            Vinv = np.linalg.inv(V)
            beta = sigma * math.sqrt(2 * math.log(T) + 3 * math.log(1 + t / (lam * 3))) + math.sqrt(lam)
            a = int(np.argmax(X @ (Vinv @ b) + beta * np.sqrt(np.einsum("kd,de,ke->k", X, Vinv, X))))
            V += np.outer(X[a], X[a])
            b += (mu[a] + sigma * noise[r, t]) * X[a]
            regret += mu.max() - mu[a]
            if t + 1 == 50:
                assert out["at"][50][r] == pytest.approx(regret)
        assert out["regret"][r] == pytest.approx(regret)
    alone = M.linucb_many(Xs[1:], theta, T, noise[1:], sigma=sigma, lam=lam, S=1.0)
    assert alone["regret"][0] == out["regret"][1]


# ---------------------------------------------------------------------------- determinism
def _strip_seconds(result: dict) -> dict:
    return {**result, "rows": [{k: v for k, v in r.items() if k != "seconds"} for r in result["rows"]],
            "e4_rerun": [{k: v for k, v in r.items() if k != "seconds"} for r in result["e4_rerun"]]}


def test_run_seed_is_deterministic_by_seed():
    p = tiny_params()
    a, b = M.run_seed(p, 3), M.run_seed(p, 3)
    assert _strip_seconds(a) == _strip_seconds(b)
    c = M.run_seed(p, 4)
    assert [r["regret"] for r in _strip_seconds(a)["rows"]] != [r["regret"] for r in _strip_seconds(c)["rows"]]
    assert {r["method"] for r in a["rows"]} == set(M.BATCHED_METHODS + M.CONTROL_METHODS)
    n_runs = len(M.instances(p)) * len(p.horizons)
    assert len(a["e4_rerun"]) == n_runs and all(r["seconds"] > 0 for r in a["e4_rerun"])
    lin1, lin2 = M.run_linucb(p, [3, 4]), M.run_linucb(p, [3])
    by_seed = {(r["instance"], r["T"]): r["regret"] for r in lin1["rows"] if r["seed"] == 3}
    assert by_seed == {(r["instance"], r["T"]): r["regret"] for r in lin2["rows"]}


def test_params_reject_inconsistent_config():
    from flows.blae_bandit.params import SMOKE, Params

    good = {"seeds": 1, "horizons": [200, 600], "random_K": 8, "random_d": 3, "eoo_eps": 0.2, "extra_eoo_eps": [],
            "sigma": 1.0, "ridge_lambda": 1.0, "fw_tol": 1e-3, "e4_gamma": 10.0, "rs_oful_C": 0.5, "linucb": True}
    Params.model_validate({**good, **SMOKE})
    for bad in ({"horizons": [600, 600]}, {"horizons": [600, 200]}, {"horizons": [50, 600]}, {"horizons": [200]}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})
