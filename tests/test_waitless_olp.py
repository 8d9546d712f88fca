"""Unit tests of flows/waitless_olp/method.py against independent references (no Prefect engine)."""

import itertools
import math

import numpy as np
import pytest
from conftest import params_for
from scipy.optimize import linprog

from flows.waitless_olp import method as M

P = params_for("waitless_olp", horizons=[120, 300], m=3, instance="uniform", a_high=2.0, r_high=2.0,
               f_exponents=[0.5, 2 / 3], eta_scale=1.0, fo_mode="ends", eta_schedule="official",
               fo_rate="fixed", lag=0, timing_T=60)


def all_policies(inst: M.Instance) -> dict[str, M.PolicyRun]:
    f = M.resolve_frequency(inst.T, 0.5)
    return {
        "first_order": M.first_order(inst),
        "lp_every_step": M.lp_every_step(inst),
        "waitless_alg1": M.waitless(inst, f),
        "waitless_between": M.waitless(inst, f, fo_mode="between", schedule="sqrt_f", rate="remaining"),
        "waitless_lag1": M.waitless(inst, f, lag=1),
    }


# ---------------------------------------------------------------------------- offline LP and its dual
def test_offline_lp_equals_fractional_knapsack_greedy():
    """m = 1: the LP relaxation is a fractional knapsack, solved exactly by the ratio-greedy rule."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        n = 40
        r, a = rng.uniform(0.1, 2, n), rng.uniform(0.1, 2, n)
        cap = 0.3 * a.sum()
        value, room, threshold = 0.0, cap, 0.0
        for i in np.argsort(-r / a):
            take = min(1.0, room / a[i])
            value += take * r[i]
            room -= take * a[i]
            if take < 1.0:
                threshold = r[i] / a[i]   # the item cut by the capacity prices the resource
                break
        sol = M.solve_lp(r, a[:, None], np.array([cap]))
        assert sol.value == pytest.approx(value, rel=1e-9)
        assert sol.p[0] == pytest.approx(threshold, rel=1e-7)
        assert np.all((sol.x >= -1e-9) & (sol.x <= 1 + 1e-9)) and a @ sol.x <= cap + 1e-7


def test_lp_price_minimises_the_plans_dual_by_grid_search_and_strong_duality():
    """lp_price = argmin_{p>=0} d_t.p + mean (r - a.p)^+ on a tiny instance (m = 2), by brute force."""
    rng = np.random.default_rng(7)
    t, left = 12, 20
    r, A = rng.uniform(0, 2, t), rng.uniform(0, 2, (t, 2))
    remaining = np.array([8.0, 14.0])
    d_t = remaining / left
    p = M.lp_price(r, A, remaining, left)
    g = M.dual_objective(p, r, A, d_t)
    grid = np.linspace(0, 3, 301)
    best = min(M.dual_objective(np.array(q), r, A, d_t) for q in itertools.product(grid, grid))
    assert g <= best + 1e-9
    assert g == pytest.approx(best, abs=5e-3)           # the grid (step 0.01) gets close to it
    # strong duality: primal optimum of the re-solved LP = t * dual objective at its price
    primal = M.solve_lp(r, A, t * d_t).value
    assert primal == pytest.approx(t * g, rel=1e-9)


def test_dual_lp_solved_directly_gives_the_same_value_and_price():
    """Alternative solve: the explicit dual LP over (p, y) with linprog agrees with the primal's marginals."""
    rng = np.random.default_rng(3)
    n, m = 30, 3
    r, A = rng.uniform(0, 2, n), rng.uniform(0, 2, (n, m))
    b = n * rng.uniform(1 / 3, 2 / 3, m)
    primal = M.solve_lp(r, A, b)
    # min b.p + sum y  s.t.  y_s + a_s.p >= r_s,  p, y >= 0
    c = np.concatenate([b, np.ones(n)])
    A_ub = -np.hstack([A, np.eye(n)])
    dual = linprog(c, A_ub=A_ub, b_ub=-r, bounds=(0, None), method="highs")
    assert dual.status == 0
    assert dual.fun == pytest.approx(primal.value, rel=1e-9)
    assert np.allclose(dual.x[:m], primal.p, atol=1e-7)


# ---------------------------------------------------------------------------- online policies
def test_lp_optimum_bounds_every_online_policy():
    for kind, seed in itertools.product(("uniform", "correlated"), range(3)):
        inst = M.make_instance(150, 4, seed, kind)
        opt = M.offline_optimum(inst).value
        for name, run in all_policies(inst).items():
            assert run.reward <= opt + 1e-7, (kind, seed, name)


def test_policies_never_violate_budgets():
    for kind, seed in itertools.product(("uniform", "correlated"), range(3)):
        base = M.make_instance(200, 3, seed, kind)
        tight = M.Instance(r=base.r, A=base.A, b=base.b * 0.15)   # scarce resources: the check bites
        for name, run in all_policies(tight).items():
            assert M.budget_ok(tight, run.x), (kind, seed, name)
            assert set(np.unique(run.x)) <= {0.0, 1.0}
    # and budget_ok itself catches an overdraw
    assert not M.budget_ok(tight, np.ones(tight.T))


def test_first_order_step_by_hand():
    p, a, d = np.array([0.5, 0.1, 0.0]), np.array([1.0, 0.2, 0.3]), np.array([0.4, 0.4, 0.4])
    # accepted: p + 0.5 (a - d) = [0.8, 0.0, -0.05] -> projected [0.8, 0, 0]
    assert np.allclose(M.first_order_step(p, a, 1.0, d, 0.5), [0.8, 0.0, 0.0])
    # rejected: p - 0.5 d = [0.3, -0.1, -0.2] -> [0.3, 0, 0]
    assert np.allclose(M.first_order_step(p, a, 0.0, d, 0.5), [0.3, 0.0, 0.0])


def test_first_order_policy_trajectory_by_hand():
    """Three customers, m = 1, eta = 1 (eta_scale = sqrt(3)), d = b/T = 0.4.

    t=1: p=0,   r=1.0  > 0   -> accept, remaining 0.7, p = 0 + (0.5 - 0.4) = 0.1
    t=2: p=0.1, r=0.04 < 0.05 -> reject,                p = max(0, 0.1 - 0.4) = 0
    t=3: p=0,   r=0.9  > 0   -> accept (0.5 <= 0.7), reward 1.9
    """
    inst = M.Instance(r=np.array([1.0, 0.04, 0.9]), A=np.array([[0.5], [0.5], [0.5]]), b=np.array([1.2]))
    run = M.first_order(inst, eta_scale=math.sqrt(3))
    assert run.x.tolist() == [1.0, 0.0, 1.0]
    assert run.reward == pytest.approx(1.9)
    assert run.n_lp == 0


def test_lp_every_step_matches_a_naive_reference():
    """LP re-solved after every customer, against a loop that solves the explicit dual LP each time."""
    inst = M.make_instance(40, 2, 11)
    T, m = inst.T, inst.m
    remaining, p, x = inst.b.copy(), np.zeros(m), np.zeros(T)
    for t in range(T):
        a = inst.A[t]
        if inst.r[t] > a @ p and np.all(a <= remaining):
            x[t], remaining = 1.0, remaining - a
        seen, left = t + 1, T - t - 1
        if left == 0:
            break
        rhs = np.maximum(remaining, 0) * seen / left
        c = np.concatenate([rhs, np.ones(seen)])
        dual = linprog(c, A_ub=-np.hstack([inst.A[:seen], np.eye(seen)]), b_ub=-inst.r[:seen],
                       bounds=(0, None), method="highs")
        p = dual.x[:m]
    run = M.lp_every_step(inst)
    assert run.n_lp == T - 1
    assert run.x.tolist() == x.tolist()


def test_lp_price_never_arriving_reduces_waitless_to_first_order():
    """With a lag beyond the horizon the LP prices are computed but never used: pure first-order."""
    inst = M.make_instance(200, 3, 5)
    eta = 0.05
    step = lambda seen: eta  # noqa: E731
    late = M.run_policy(inst, resolve_every=20, step_size=step, rate="remaining", fo_mode="between", lag=100)
    plain = M.run_policy(inst, resolve_every=None, step_size=step, rate="remaining")
    assert late.n_lp == 9 and plain.n_lp == 0
    assert late.x.tolist() == plain.x.tolist()
    # ...and with lag 0 the LP prices do change the decisions
    used = M.run_policy(inst, resolve_every=20, step_size=step, rate="remaining", fo_mode="between", lag=0)
    assert used.x.tolist() != plain.x.tolist()


def test_ablation_without_lp_is_the_first_order_schedule_with_the_price_held():
    """The negative control: no LP is solved; first-order steps run in the first and last f customers only,
    so the decisions equal a hand-rolled loop with those steps, and differ from the method with its LPs."""
    inst = M.make_instance(300, 3, 2)
    f = M.resolve_frequency(inst.T, 0.5)
    ablated = M.waitless(inst, f, use_lp=False)
    assert ablated.n_lp == 0 and ablated.lp_seconds == 0.0
    step = M.waitless_step_size(f, "official")
    p, remaining, x = np.zeros(inst.m), inst.b.copy(), np.zeros(inst.T)
    d = inst.b / inst.T
    for t in range(inst.T):
        a = inst.A[t]
        if inst.r[t] > a @ p and (a <= remaining).all():
            x[t], remaining = 1.0, remaining - a
        if t + 1 <= f or t >= inst.T - f:
            p = np.maximum(p + step(t + 1) * (a * x[t] - d), 0.0)
    assert ablated.x.tolist() == x.tolist()
    assert M.waitless(inst, f).x.tolist() != x.tolist()


def test_official_step_sizes():
    step = M.waitless_step_size(16, "official")
    assert step(1) == pytest.approx(2 / 2 ** (2 / 3))
    assert step(16) == pytest.approx(2 / 17 ** (2 / 3))
    assert step(17) == pytest.approx(1 / 16 ** (2 / 3))
    assert M.waitless_step_size(16, "sqrt_f", eta_scale=2.0)(5) == pytest.approx(0.5)


def test_resolve_frequency():
    assert M.resolve_frequency(1000, 0.5) == 32
    assert M.resolve_frequency(8000, 0.5) == 90
    assert M.resolve_frequency(8000, 2 / 3) == 400     # not 401 from 400.00000000000006
    assert M.resolve_frequency(1000, 2 / 3) == 100


# ---------------------------------------------------------------------------- instances and seeds
def test_instances_follow_the_declared_distributions():
    inst = M.make_instance(5000, 4, 0, "uniform", a_high=2.0, r_high=3.0)
    assert inst.A.shape == (5000, 4) and inst.r.shape == (5000,) and inst.b.shape == (4,)
    d = inst.b / inst.T
    assert np.all((d >= 1 / 3) & (d <= 2 / 3))
    assert 0 <= inst.A.min() and inst.A.max() <= 2.0 and inst.r.max() <= 3.0
    assert inst.A.mean() == pytest.approx(1.0, abs=0.03)
    corr = M.make_instance(5000, 4, 0, "correlated")
    assert np.corrcoef(corr.A.sum(axis=1), corr.r)[0, 1] > 0.7


def test_determinism_by_seed():
    first, second = M.run_seed(P, 3), M.run_seed(P, 3)
    strip = lambda out: [{k: v for k, v in row.items() if k != "seconds"} for row in out["rows"]]  # noqa: E731
    assert strip(first) == strip(second)
    assert strip(first) != strip(M.run_seed(P, 4))
    inst_a, inst_b = M.make_instance(50, 2, 9), M.make_instance(50, 2, 9)
    assert np.array_equal(inst_a.A, inst_b.A) and np.array_equal(inst_a.r, inst_b.r)


def test_run_seed_rows_and_timing_record():
    out = M.run_seed(P, 0)
    policies = {row["policy"] for row in out["rows"]}
    assert policies == {"first_order", "waitless_sqrtT", "waitless_between_sqrtT", "waitless_T0p67",
                        "waitless_nolp_sqrtT"}
    assert all(row["regret"] >= -1e-7 for row in out["rows"])
    timing = M.run_timing(P, 0)
    assert timing["f"] == 8 and timing["lp_every_step"]["n_lp"] == 59 and timing["waitless"]["n_lp"] == 7
    assert timing["lp_every_step"]["seconds"] > 0 and timing["waitless"]["seconds"] > 0


def test_params_reject_inconsistent_config():
    from flows.waitless_olp.params import SMOKE, Params

    good = P.model_dump()
    Params.model_validate({**good, **SMOKE})
    for bad in ({"horizons": [200, 200]}, {"horizons": [200]}, {"timing_instances": 2, "seeds": 1},
                {"instance": "gaussian"}, {"fo_mode": "always"}, {"f_exponents": [1.0]}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})
