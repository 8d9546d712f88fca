"""Unit tests of the TD-driven place-field model (flows/placefield_td/method.py)."""

import itertools
import math

import numpy as np
import pytest
from conftest import params_for

from flows.placefield_td import method

ETAS = {"center": 1e-4, "width": 2e-4, "amp": 3e-4, "actor": 0.01, "critic": 0.02}


def random_params(rng, n=5, a=2):
    return {"lam": rng.uniform(-1, 1, n), "sig": rng.uniform(0.1, 0.4, n), "alp": rng.uniform(0.5, 1.5, n),
            "W_a": rng.normal(0, 0.5, (n, a)), "w_c": rng.normal(0, 0.5, n)}


def test_td_update_matches_a_step_computed_by_hand():
    """Two fields, two actions: every quantity written out with scalar math."""
    p = {"lam": np.array([0.0, 0.5]), "sig": np.array([0.5, 0.25]), "alp": np.array([1.0, 0.5]),
         "W_a": np.array([[0.1, -0.2], [0.3, 0.05]]), "w_c": np.array([0.2, -0.1])}
    x, x_new, r, a, gamma, beta = 0.1, 0.12, 0.3, 1, 0.9, 2.0
    phi = [p["alp"][i] ** 2 * math.exp(-(x - p["lam"][i]) ** 2 / (2 * p["sig"][i] ** 2)) for i in range(2)]
    phi_n = [p["alp"][i] ** 2 * math.exp(-(x_new - p["lam"][i]) ** 2 / (2 * p["sig"][i] ** 2)) for i in range(2)]
    V = phi[0] * 0.2 + phi[1] * -0.1
    V_n = phi_n[0] * 0.2 + phi_n[1] * -0.1
    delta = r + gamma * V_n - V
    l0 = beta * (phi[0] * 0.1 + phi[1] * 0.3)
    l1 = beta * (phi[0] * -0.2 + phi[1] * 0.05)
    pi1 = 1 / (1 + math.exp(l0 - l1))
    dec = [beta * (0 - (1 - pi1)), beta * (1 - pi1)]
    new, d_out = method.td_update(p, x, x_new, r, a, ETAS, gamma, beta)
    assert d_out == pytest.approx(delta, rel=1e-12)
    for i in range(2):
        g = delta * (p["W_a"][i, 0] * dec[0] + p["W_a"][i, 1] * dec[1] + p["w_c"][i])
        d, s, al = x - p["lam"][i], p["sig"][i], p["alp"][i]
        assert new["lam"][i] == pytest.approx(p["lam"][i] + 1e-4 * g * phi[i] * d / s**2, rel=1e-12)
        assert new["sig"][i] == pytest.approx(s + 2e-4 * g * phi[i] * d**2 / s**3, rel=1e-12)
        assert new["alp"][i] == pytest.approx(al + 3e-4 * g * phi[i] * 2 / al, rel=1e-12)
        assert new["w_c"][i] == pytest.approx(p["w_c"][i] + 0.02 * delta * phi[i], rel=1e-12)
        for k in range(2):
            assert new["W_a"][i, k] == pytest.approx(p["W_a"][i, k] + 0.01 * delta * phi[i] * dec[k], rel=1e-12)


def _fd_grad(f, params, key, h=1e-6):
    grad = np.zeros_like(params[key])
    for idx in np.ndindex(params[key].shape):
        up = {k: v.copy() for k, v in params.items()}
        dn = {k: v.copy() for k, v in params.items()}
        up[key][idx] += h
        dn[key][idx] -= h
        grad[idx] = (f(up) - f(dn)) / (2 * h)
    return grad


@pytest.mark.parametrize("n_actions", [2, 3])
def test_every_update_is_the_gradient_of_the_semi_gradient_objective(n_actions):
    """update / eta == d/dtheta [delta_sg * (V(x) + log pi(a|x))] by central finite differences."""
    rng = np.random.default_rng(1)
    p = random_params(rng, n=6, a=n_actions)
    x, x_new, r, a, gamma, beta = 0.2, 0.25, 0.7, n_actions - 1, 0.9, 1.5
    new, delta = method.td_update(p, x, x_new, r, a, ETAS, gamma, beta)
    objective = lambda q: method.surrogate_objective(q, x, a, delta, beta)  # noqa: E731
    for key, eta in (("lam", "center"), ("sig", "width"), ("alp", "amp"), ("W_a", "actor"), ("w_c", "critic")):
        step = (new[key] - p[key]) / ETAS[eta]
        np.testing.assert_allclose(step, _fd_grad(objective, p, key), rtol=1e-6, atol=1e-9)


def test_critic_path_descends_the_td_loss_with_the_target_held_fixed():
    """With W_a = 0 the field gradient is the critic's alone: -d/dtheta 0.5 (r + gamma V(x') - V(x))^2."""
    rng = np.random.default_rng(2)
    p = random_params(rng, n=4)
    p["W_a"][:] = 0.0
    x, x_new, r, gamma = -0.3, -0.26, 0.4, 0.9
    new, delta = method.td_update(p, x, x_new, r, 0, ETAS, gamma, 1.0)
    phi_new = method.place_fields(p["lam"], p["sig"], p["alp"], x_new)
    target = r + gamma * phi_new @ p["w_c"]
    loss = lambda q: method.semi_gradient_td_loss(q, x, target)  # noqa: E731
    for key, eta in (("lam", "center"), ("sig", "width"), ("alp", "amp"), ("w_c", "critic")):
        np.testing.assert_allclose((new[key] - p[key]) / ETAS[eta], -_fd_grad(loss, p, key), rtol=1e-6, atol=1e-9)


def test_environment_known_case():
    goal_size = 0.05
    x, v = np.array([-0.75, 0.99, 0.0]), np.array([0.0, 0.05, 0.0])
    right = np.array([1, 1, 0])
    x1, v1, r1 = method.env_step(x, v, right, 0.5, goal_size)
    np.testing.assert_allclose(v1, [0.02, 0.0, -0.02])          # v + 0.2 (-v + 0.1 dir); wall zeroes v
    np.testing.assert_allclose(x1, [-0.73, 0.99, -0.02])        # 0.99 + 0.06 > 1: the step is refused
    np.testing.assert_allclose(r1, np.exp(-0.5 * ((x1 - 0.5) / 0.05) ** 2))
    x2, v2, _ = method.env_step(x1[:1], v1[:1], right[:1], 0.5, goal_size)
    assert v2[0] == pytest.approx(0.036) and x2[0] == pytest.approx(-0.694)
    _, _, r_goal = method.env_step(np.array([0.5]), np.array([0.0]), np.array([0]), np.array([0.5 - 0.02]), goal_size)
    assert r_goal[0] == pytest.approx(1.0)                      # at the goal the reward is 1


def test_minimal_latency_matches_brute_force_over_action_sequences():
    start, goal, goal_size, max_reward = 0.0, 0.3, 0.05, 1.5
    best = None
    for k in range(1, 12):
        for seq in itertools.product((0, 1), repeat=k):
            x, v, tot = np.array([start]), np.array([0.0]), 0.0
            for step, a in enumerate(seq):
                x, v, r = method.env_step(x, v, np.array([a]), goal, goal_size)
                tot += r[0]
                if tot >= max_reward:
                    best = step if best is None else min(best, step)
                    break
        if best is not None:
            break
    assert method.minimal_latency(start, goal, goal_size, max_reward) == best


def _numpy_reference_run(cfg, cond, seed, n_steps):
    """The online loop written with the NumPy reference functions, same random streams."""
    params = method.init_params(cfg.n_fields, cfg.sigma0, cfg.alpha0, np.random.default_rng([seed, 0]))
    u = np.random.default_rng([seed, 1]).random(n_steps)
    normals = np.random.default_rng([seed, 2]).standard_normal((n_steps, 3, cfg.n_fields), dtype=np.float32)
    learn = 1.0 if cond.learn_fields else 0.0
    etas = {"center": cfg.eta_center * learn, "width": cfg.eta_width * learn, "amp": cfg.eta_amp * learn,
            "actor": cfg.eta_actor, "critic": cfg.eta_critic}
    x, v, total, t, latencies = cfg.start, 0.0, 0.0, 0, []
    for k in range(n_steps):
        pi = method.action_probs(params, x, cfg.beta)
        a = int((u[k] >= np.cumsum(pi)[:-1]).sum())
        xn, vn, r = method.env_step(np.array([x]), np.array([v]), np.array([a]), cfg.goals[0], cfg.goal_size)
        params, _ = method.td_update(params, x, xn[0], r[0], a, etas, cfg.gamma, cfg.beta)
        if cond.noise > 0:
            for j, key in enumerate(("lam", "sig", "alp")):
                params[key] = params[key] + cond.noise * normals[k, j].astype(float)
        x, v, total, t = xn[0], vn[0], total + r[0], t + 1
        if total >= cfg.max_reward or t == cfg.t_max:
            latencies.append(t - 1)
            x, v, total, t = cfg.start, 0.0, 0.0, 0
    return params, latencies


@pytest.mark.parametrize("cond", [method.Condition("learned", True), method.Condition("noisy", True, 1e-3),
                                  method.Condition("fixed", False)])
def test_compiled_loop_matches_the_numpy_reference(cond):
    """Large field rates so the fields move; 300 steps cover several episodes and resets."""
    cfg = params_for("placefield_td", n_fields=16, t_max=40, eta_center=0.02, eta_width=0.02, eta_amp=0.02,
                     eta_actor=0.2, eta_critic=0.2, episodes_per_goal=1000)
    n = 300
    ref, ref_lat = _numpy_reference_run(cfg, cond, 7, n)
    params = method.init_params(cfg.n_fields, cfg.sigma0, cfg.alpha0, np.random.default_rng([7, 0]))
    u = np.random.default_rng([7, 1]).random(n)
    normals = (np.random.default_rng([7, 2]).standard_normal((n, 3, cfg.n_fields), dtype=np.float32)
               if cond.noise > 0 else np.zeros((0, 3, cfg.n_fields), dtype=np.float32))
    learn = 1.0 if cond.learn_fields else 0.0
    etas = np.array([cfg.eta_center * learn, cfg.eta_width * learn, cfg.eta_amp * learn, cfg.eta_actor, cfg.eta_critic])
    consts = np.array([cfg.gamma, cfg.beta, method.TAU_ACT, method.MAX_SPEED, method.ENV_SIZE, cfg.goal_size,
                       cfg.max_reward, cfg.t_max, cfg.start, cond.noise, 0.0, 0.0])
    fstate = np.array([cfg.start, 0.0, 0.0, cfg.goals[0]])
    istate = np.zeros(2, dtype=np.int64)
    latency = np.zeros(2000, dtype=np.int64)
    steps = method._train_chunk(params["lam"], params["sig"], params["alp"], params["W_a"], params["w_c"],
                                fstate, istate, etas, consts, method.DIRECTIONS, np.array(cfg.goals),
                                cfg.episodes_per_goal, 2000, u, normals, latency,
                                np.zeros(0, dtype=np.int64), np.zeros((0, 3, cfg.n_fields)))
    assert steps == n and len(ref_lat) >= 3
    assert latency[:istate[1]].tolist() == ref_lat
    for key in ref:
        np.testing.assert_allclose(params[key], ref[key], rtol=1e-9, atol=1e-12)
    if not cond.learn_fields and cond.noise == 0:
        init = method.init_params(cfg.n_fields, cfg.sigma0, cfg.alpha0, np.random.default_rng([7, 0]))
        for key in ("lam", "sig", "alp"):
            assert np.array_equal(params[key], init[key])        # fixed fields never move


def test_episodes_to_criterion_and_density():
    lat = np.array([90, 80, 30, 20, 20, 10, 99])
    assert method.episodes_to_criterion(lat, 2, 25) == 5         # mean(20, 20) < 25 after 5 episodes
    assert method.episodes_to_criterion(lat, 3, 5) == 7          # never: censored at the length
    assert method.density_near(np.array([0.35, 0.41, 0.5, 0.6, 0.61]), 0.5, 0.1) == pytest.approx(3 / 5)


SETTINGS = {"n_fields": 32, "episodes_per_goal": 30, "goals": [0.5, -0.2], "drift_noise": 1e-4,
            "criterion_window": 10, "criterion_latency": 25.0, "density_radius": 0.1, "late_fraction": 0.2,
            "curve_bin": 10}
P = params_for("placefield_td", **SETTINGS)


def test_run_seed_is_deterministic_by_seed():
    a, b, c = method.run_seed(P, 3), method.run_seed(P, 3), method.run_seed(P, 4)
    a.pop("timings"), b.pop("timings"), c.pop("timings")
    assert a == b
    assert a["conditions"]["learned"]["latency"] != c["conditions"]["learned"]["latency"]


def test_frozen_field_rates_make_learned_and_fixed_agents_identical():
    """Common random numbers: with zero field rates the 'learned' agent is the fixed one, step for step."""
    out = method.run_seed(params_for("placefield_td", **SETTINGS, eta_center=0.0, eta_width=0.0, eta_amp=0.0), 5)
    assert out["conditions"]["learned"]["latency"] == out["conditions"]["fixed"]["latency"]
    assert out["conditions"]["learned"]["fields"] == out["conditions"]["fixed"]["fields"]


def test_drift_only_control_moves_fields_by_noise_alone():
    """The control agent's field rates are zero: without noise it is the fixed agent step for step; with
    noise its centres move, by an amount that does not depend on the (ignored) field learning rates."""
    quiet = method.run_seed(params_for("placefield_td", **{**SETTINGS, "drift_noise": 0.0}), 5)
    assert quiet["conditions"]["drift_only"]["latency"] == quiet["conditions"]["fixed"]["latency"]
    assert quiet["conditions"]["drift_only"]["fields"] == quiet["conditions"]["fixed"]["fields"]
    noisy = method.run_seed(P, 5)
    other_rates = method.run_seed(params_for("placefield_td", **SETTINGS, eta_center=0.0, eta_width=0.0, eta_amp=0.0), 5)
    ends = [r["conditions"]["drift_only"]["fields"][str(2 * SETTINGS["episodes_per_goal"])]["lam"]
            for r in (noisy, other_rates)]
    assert ends[0] == ends[1]
    start = noisy["conditions"]["drift_only"]["fields"]["0"]["lam"]
    assert ends[0] != start


def test_control_density_is_measured_at_the_other_goal():
    """Block k's control density is the fraction of centres within the radius of the goal of the other block,
    from the same snapshots as the claim's density."""
    out = method.run_seed(P, 2)
    E = SETTINGS["episodes_per_goal"]
    m = out["conditions"]["learned"]
    for k, (goal, other) in enumerate([(0.5, -0.2), (-0.2, 0.5)]):
        blk = m["blocks"][k]
        assert (blk["goal"], blk["other_location"]) == (goal, other)
        before, after = m["fields"][str(k * E)]["lam"], m["fields"][str((k + 1) * E)]["lam"]
        assert blk["density_other_before"] == method.density_near(np.array(before), other, 0.1)
        assert blk["density_other_after"] == method.density_near(np.array(after), other, 0.1)
        lat = np.array(m["latency"][k * E:(k + 1) * E])
        late = int(round(SETTINGS["late_fraction"] * E))
        assert blk["early_latency"] == pytest.approx(lat[:late].mean())


def test_params_reject_inconsistent_config():
    from flows.placefield_td.params import SMOKE, Params

    good = P.model_dump()
    Params.model_validate({**good, **SMOKE})
    for bad in ({"criterion_window": 50, "episodes_per_goal": 40}, {"start": 0.5}, {"goals": [0.5]},
                {"goals": [0.5, -0.2, 0.1]}, {"late_fraction": 0.6}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})
