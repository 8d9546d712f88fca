"""Unit tests of flows/gbrl_rl/method.py against independent references (hand-computed GAE,
the closed form of the clipped PPO objective, the functional-gradient descent property of a
boosting step, the official categorical MiniGrid encoding) and a determinism check by seed."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import params_for
from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, STATE_TO_IDX

from flows.gbrl_rl import method
from flows.gbrl_rl.params import SMOKE, GBRLConfig, Params

IDX_TO_STATE = {v: k for k, v in STATE_TO_IDX.items()}

TINY_VALUES = {
    "steps": {"cartpole": 256, "minigrid_empty": 128, "minigrid_doorkey": 128, "irregular": 512},
    "eval_episodes": 4, "gamma": 0.99, "gae_lambda": 0.95, "nn_encoding": "onehot",
    "irregular": {"n_relevant": 2, "n_categories": 3, "n_nuisance": 1, "n_nuisance_categories": 3, "n_actions": 3},
    "gbrl": {"n_envs": 4, "n_steps": 32, "batch_size": 64, "n_epochs": 2, "clip_range": 0.62, "ent_coef": 0.08,
             "vf_coef": 0.871923, "policy_lr": 0.17, "value_lr": 0.01, "max_depth": 4, "n_bins": 32},
    "nn": {"n_envs": 4, "n_steps": 32, "batch_size": 32, "n_epochs": 2, "clip_range": 0.2, "ent_coef": 0.0,
           "vf_coef": 0.5, "lr": 3e-4, "max_grad_norm": 0.5, "hidden": 16},
}
TINY = params_for("gbrl_rl", **TINY_VALUES)


# --- GAE ------------------------------------------------------------------------------------

def test_gae_matches_a_hand_computed_case():
    # one env, T = 3, the episode ends at t = 1; gamma 0.9, lambda 0.8, V(after rollout) = 0.7
    # t=2: delta = 2 + 0.9*0.7 - 0.3 = 2.33                      A2 = 2.33
    # t=1: terminal, delta = 0 - 0.4 = -0.4                       A1 = -0.4
    # t=0: delta = 1 + 0.9*0.4 - 0.5 = 0.86, A0 = 0.86 + 0.72*(-0.4) = 0.572
    adv, ret = method.compute_gae(np.array([[1.0], [0.0], [2.0]]), np.array([[0.5], [0.4], [0.3]]),
                                  np.array([[0.0], [1.0], [0.0]]), np.array([0.7]), 0.9, 0.8)
    np.testing.assert_allclose(adv[:, 0], [0.572, -0.4, 2.33], atol=1e-12)
    np.testing.assert_allclose(ret[:, 0], [1.072, 0.0, 2.63], atol=1e-12)


def test_gae_with_lambda_one_is_the_bootstrapped_monte_carlo_return():
    rng = np.random.default_rng(0)
    T, n, gamma = 12, 3, 0.97
    rewards, values = rng.normal(size=(T, n)), rng.normal(size=(T, n))
    dones = (rng.random((T, n)) < 0.2).astype(float)
    last = rng.normal(size=n)
    adv, _ = method.compute_gae(rewards, values, dones, last, gamma, 1.0)
    for j in range(n):  # brute force: sum of discounted rewards to the episode end (or bootstrap), minus V
        for t in range(T):
            g, disc, k = 0.0, 1.0, t
            while True:
                g += disc * rewards[k, j]
                if dones[k, j]:
                    break
                disc *= gamma
                if k == T - 1:
                    g += disc * last[j]
                    break
                k += 1
            assert adv[t, j] == pytest.approx(g - values[t, j], abs=1e-10)


# --- PPO clipped loss -----------------------------------------------------------------------

def test_ppo_clipped_loss_matches_the_closed_form():
    clip = 0.2
    # two actions; old log-prob log(0.5); new probabilities chosen so the ratios are known
    new_p = np.array([0.5, 0.8, 0.2, 0.8, 0.2, 0.55])   # prob of the taken action 0
    ratio = new_p / 0.5                                  # 1.0, 1.6, 0.4, 1.6, 0.4, 1.1
    raw_adv = np.array([1.0, 2.0, 1.5, -1.0, -2.0, 0.5])
    logits = torch.tensor(np.stack([np.log(new_p), np.log(1 - new_p)], 1), dtype=torch.float64, requires_grad=True)
    actions = torch.zeros(6, dtype=torch.long)
    old_logp = torch.full((6,), np.log(0.5), dtype=torch.float64)
    values, returns = torch.zeros(6, dtype=torch.float64), torch.zeros(6, dtype=torch.float64)
    loss, parts = method.ppo_loss(logits, values, actions, old_logp, torch.tensor(raw_adv), returns,
                                  clip, ent_coef=0.0, vf_coef=0.0)
    a = (raw_adv - raw_adv.mean()) / (raw_adv.std(ddof=1) + 1e-8)
    expected = -np.mean(np.minimum(ratio * a, np.clip(ratio, 1 - clip, 1 + clip) * a))
    assert loss.item() == pytest.approx(expected, abs=1e-10)
    # where the clipped branch is the minimum, the sample contributes no gradient
    loss.backward()
    active = ~(((a > 0) & (ratio > 1 + clip)) | ((a < 0) & (ratio < 1 - clip)))
    grad_norm = logits.grad.abs().sum(1).numpy()
    assert np.all(grad_norm[~active] == 0) and np.all(grad_norm[active] > 0)


def test_ppo_value_and_entropy_terms():
    n, A = 5, 4
    logits = torch.zeros(n, A, dtype=torch.float64)          # uniform policy: entropy log 4, ratio 1
    values = torch.arange(n, dtype=torch.float64)
    returns = values + torch.tensor([1.0, -1.0, 2.0, 0.0, 0.5], dtype=torch.float64)
    old_logp = torch.full((n,), -np.log(A), dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0, 0.5, 0.2, -0.3], dtype=torch.float64)
    base, _ = method.ppo_loss(logits, values, torch.zeros(n, dtype=torch.long), old_logp, adv, returns, 0.2, 0.0, 0.0)
    full, parts = method.ppo_loss(logits, values, torch.zeros(n, dtype=torch.long), old_logp, adv, returns, 0.2, 0.3, 0.7)
    value_loss = 0.5 * np.mean(np.array([1.0, -1.0, 2.0, 0.0, 0.5]) ** 2)
    assert parts["entropy"] == pytest.approx(np.log(A))
    assert parts["value"] == pytest.approx(value_loss)
    assert float(full - base) == pytest.approx(-0.3 * np.log(A) + 0.7 * value_loss)


# --- the boosting step ----------------------------------------------------------------------

def _fixed_batch(kind: str, rng: np.random.Generator, n: int = 256):
    if kind == "numeric":
        x = rng.normal(size=(n, 4)).astype(np.float32)
        adv = np.sign(x[:, 0]) + 0.1 * rng.normal(size=n)    # action 0 is good where x_0 > 0
        ret = 2.0 * x[:, 1]
    else:
        codes = rng.integers(0, 4, size=(n, 3))
        x = method.irregular_categorical(codes)
        adv = np.where(codes[:, 0] == 1, 1.0, -1.0) + 0.1 * rng.normal(size=n)
        ret = codes[:, 2].astype(float)
    return x, torch.zeros(n, dtype=torch.long), torch.tensor(adv, dtype=torch.float32), torch.tensor(ret, dtype=torch.float32)


@pytest.mark.parametrize("kind", ["numeric", "categorical"])
def test_boosting_step_descends_the_loss_on_a_fixed_batch(kind):
    rng = np.random.default_rng(1)
    x, actions, adv, ret = _fixed_batch(kind, rng)
    cfg = GBRLConfig(**dict(TINY_VALUES["gbrl"], n_bins=64))
    agent = method.GBRLActorCritic(x.shape[1], 2, cfg)
    old_logp = torch.full((len(x),), np.log(0.5))

    def loss_at():
        logits, values = agent.forward(x, requires_grad=True)
        loss, _ = method.ppo_loss(logits, values, actions, old_logp, adv, ret, 0.62, 0.0, 0.87)
        return loss, logits, values

    losses = []
    for _ in range(5):
        loss, logits, values = loss_at()
        losses.append(loss.item())
        loss.backward()
        g_pi, g_v = logits.grad.numpy().copy(), values.grad.numpy().copy()
        before = np.concatenate([logits.detach().numpy(), values.detach().numpy()[:, None]], 1)
        agent.model.step()
        after_logits, after_values = agent.forward(x)
        after = np.concatenate([after_logits.numpy(), after_values.numpy()[:, None]], 1)
        delta = after - before
        # functional gradient descent: the output change has negative inner product with dL/d(outputs)
        assert np.sum(delta[:, :2] * g_pi) < 0
        assert np.sum(delta[:, 2] * g_v) < 0
    assert losses[-1] < losses[0]
    assert agent.n_trees == 5


def test_gbrl_tree_update_uses_the_policy_and_value_learning_rates():
    """One tree, one constant-gradient batch: every output moves by -lr * gradient (leaf value = mean grad)."""
    x = np.random.default_rng(2).normal(size=(64, 3)).astype(np.float32)
    agent = method.GBRLActorCritic(3, 2, GBRLConfig(**dict(TINY_VALUES["gbrl"], policy_lr=0.17, value_lr=0.01)))
    logits, values = agent.forward(x, requires_grad=True)
    (logits[:, 0].sum() * 0.5 + logits[:, 1].sum() * -1.0 + values.sum() * 2.0).div(len(x)).backward()
    agent.model.step()
    after_logits, after_values = agent.forward(x)
    np.testing.assert_allclose(after_logits.numpy()[:, 0], -0.17 * 0.5, rtol=1e-5)
    np.testing.assert_allclose(after_logits.numpy()[:, 1], 0.17 * 1.0, rtol=1e-5)
    np.testing.assert_allclose(after_values.numpy(), -0.01 * 2.0, rtol=1e-5)


# --- observation encodings ------------------------------------------------------------------

def _official_cells(obs: dict) -> list[bytes]:
    """The gbrl_sb3 CategoricalObservationWrapper encoding, cell by cell (reference)."""
    img = obs["image"]
    return [f"{IDX_TO_OBJECT[img[i, j, 0]]},{IDX_TO_COLOR[img[i, j, 1]]},{IDX_TO_STATE[img[i, j, 2]]}".encode()
            for i in range(7) for j in range(7)] + [str(obs["direction"]).encode()]


@pytest.mark.parametrize("env_id", ["MiniGrid-Empty-5x5-v0", "MiniGrid-DoorKey-5x5-v0"])
def test_minigrid_categorical_encoding_matches_the_official_wrapper(env_id):
    env = gym.make(env_id, disable_env_checker=True)
    rng = np.random.default_rng(3)
    obs, _ = env.reset(seed=3)
    raws, refs = [], []
    for _ in range(30):
        raws.append(method.minigrid_raw(obs))
        refs.append(_official_cells(obs))
        obs, _, te, tr, _ = env.step(int(rng.integers(7)))
        if te or tr:
            obs, _ = env.reset()
    enc = method.minigrid_categorical(np.stack(raws))
    assert enc.dtype == np.dtype("S128") and enc.shape == (30, 50)
    assert enc.tolist() == refs
    assert b"door,yellow,locked" in method.CELL_STRINGS.ravel().tolist()


def test_one_hot_blocks_and_unseen_categories():
    codes = np.array([[0, 2, 1], [1, 0, 3]])            # 3 is unseen for the last column (size 3)
    out = method.one_hot(codes, [2, 3, 3])
    expected = np.array([[1, 0, 0, 0, 1, 0, 1, 0], [0, 1, 1, 0, 0, 0, 0, 0]], dtype=np.float32)
    np.testing.assert_array_equal(out, expected)
    raw = method.minigrid_raw({"image": np.zeros((7, 7, 3), np.uint8) + np.array([2, 5, 0], np.uint8), "direction": 3})
    oh = method.minigrid_onehot(raw[None])
    assert oh.shape == (1, 49 * 20 + 4) and oh.sum() == 49 * 3 + 1
    assert oh[0, 2] == 1 and oh[0, 11 + 5] == 1 and oh[0, 17] == 1 and oh[0, -1] == 1


def test_irregular_task_reward_strings_and_perturbation():
    task = method.IrregularTask.make(TINY.irregular, np.random.default_rng(4))
    codes = task.sample(200, np.random.default_rng(5))
    assert codes.shape == (200, 3) and codes.max() < 3
    best = np.array([task.table[c0, c1] for c0, c1 in codes[:, :2]])
    np.testing.assert_array_equal(task.reward(codes, best), 1.0)
    np.testing.assert_array_equal(task.reward(codes, (best + 1) % 3), 0.0)
    ood = task.perturb(codes)
    np.testing.assert_array_equal(ood[:, :2], codes[:, :2])
    assert np.all(ood[:, 2] == 3)
    strings = method.irregular_categorical(np.array([[0, 1, 2], [0, 1, 3]]))
    assert strings.tolist() == [[b"f0=0", b"f1=1", b"f2=2"], [b"f0=0", b"f1=1", b"f2=3"]]


def test_sampled_actions_follow_the_softmax():
    logits = np.log(np.array([[0.2, 0.5, 0.3]])).repeat(20000, 0)
    freq = np.bincount(method.sample_actions(logits, np.random.default_rng(6)), minlength=3) / 20000
    np.testing.assert_allclose(freq, [0.2, 0.5, 0.3], atol=0.015)


# --- determinism ----------------------------------------------------------------------------

@pytest.mark.parametrize("env_name,algo", [("irregular", "gbrl"), ("irregular", "nn"), ("cartpole", "gbrl"),
                                           ("cartpole", "nn"), ("minigrid_empty", "gbrl")])
def test_same_seed_same_result(env_name, algo):
    strip = lambda r: {k: v for k, v in r.items() if k not in ("train_s", "wall_s", "cpu_s")}  # noqa: E731
    a, b = method.run_one(TINY, env_name, algo, 0), method.run_one(TINY, env_name, algo, 0)
    np.testing.assert_equal(strip(a), strip(b))   # NaN-aware: early curve points may have no finished episode
    c = method.run_one(TINY, env_name, algo, 1)
    assert [r["train_return"] for r in c["curve"]] != [r["train_return"] for r in a["curve"]] or \
        c["final_return"] != a["final_return"]


def test_categorical_passthrough_gives_gbrl_the_same_bytes():
    """The speed shim must hand gbrl exactly what gbrl's own preprocessing would."""
    raw = np.random.default_rng(7).integers(0, 3, size=(64, 148))
    raw[:, -1] = raw[:, -1] % 4
    for arr in (method.minigrid_categorical(raw), method.irregular_categorical(raw[:, :5])):
        num_ref, ref = method._gbrl_process_array(arr)
        num_fast, fast = method._process_array_fast(arr)
        assert num_ref is None and num_fast is None
        assert ref.dtype == fast.dtype == np.dtype("S128") and np.array_equal(ref, fast)
    numeric = np.ones((3, 2), dtype=np.float64)
    assert method._process_array_fast(numeric)[0].dtype == np.float32   # non-categorical: gbrl's own path


# --- params ---------------------------------------------------------------------------------

def test_random_policy_control_is_uniform_and_scores_low():
    """The negative control: argmax of the random agent's logits is uniform over actions, and on CartPole
    (random play lasts ~20 steps) its return is far below a trained agent's ceiling of 500."""
    agent = method.UniformRandomAgent(3, np.random.default_rng(0))
    actions = agent.forward(np.zeros((30000, 5)))[0].numpy().argmax(axis=1)
    np.testing.assert_allclose(np.bincount(actions, minlength=3) / 30000, [1 / 3] * 3, atol=0.015)
    ret = method.random_policy_return(TINY, "cartpole", seed=0)
    assert 5 <= ret <= 60
    assert ret == method.random_policy_return(TINY, "cartpole", seed=0)       # deterministic by seed


def test_params_reject_inconsistent_config():
    good = {**TINY.model_dump(), **SMOKE}
    Params.model_validate(good)
    for bad in ({"envs": ["cartpole", "irregular", "minigrid_empty", "cartpole"]}, {"envs": ["cartpole", "irregular", "bogus"]},
                {"envs": ["cartpole", "minigrid_empty", "minigrid_doorkey"]},
                {"steps": {"cartpole": 1024, "minigrid_empty": 1024, "irregular": 1024, "minigrid_doorkey": 64}},
                {"steps": {"cartpole": 1024, "minigrid_empty": 1024, "irregular": 1024}},
                {"irregular": {**TINY_VALUES["irregular"], "n_categories": 300}}):
        with pytest.raises(ValueError):
            Params.model_validate({**good, **bad})
