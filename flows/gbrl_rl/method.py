"""GBRL (Fuhrer, Tessler, Dalal; ICML 2025): PPO with a gradient-boosted-trees actor-critic
against PPO with a neural-network actor-critic, on CartPole, MiniGrid (categorical observations)
and a synthetic categorical task with an irregular lookup-table reward.

Read top to bottom:

1. environments: a small vectorised runner over gymnasium envs, the observation encoders
   (MiniGrid cells as "object,color,state" strings for the trees, one-hot for the network), and
   the synthetic "irregular" task;
2. the two actor-critics: ``GBRLActorCritic`` wraps NVIDIA's ``gbrl`` package (shared oblivious
   trees for policy logits and value; every minibatch step fits ONE new tree to the per-sample
   gradients of the PPO loss w.r.t. the model *outputs* and appends it with SGD learning rates),
   ``MLPActorCritic`` is the stable-baselines3-style MLP trained with Adam;
3. PPO pieces shared by both (GAE, the clipped loss, reward normalisation), the training loop and
   the evaluation (greedy actions, optional nuisance-feature perturbation);
4. ``run_one(p, env, algo, seed)``: one training run at the flow's typed params ``p``, JSON-able results.

Randomness only through ``np.random.default_rng`` (actions, minibatches, env seeds) and
``torch.Generator`` (network initialisation): the same seed gives bit-identical results. gbrl's
tree building runs on one OpenMP thread per Python thread (set through gbrl's own bundled
``libgomp``), so concurrent seeds do not oversubscribe the two cores and stay deterministic.
"""

from __future__ import annotations

import ctypes
import glob
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # minigrid imports pygame

import gymnasium as gym  # noqa: E402
import minigrid  # noqa: E402,F401  (registers the MiniGrid-* environments)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, STATE_TO_IDX  # noqa: E402
from torch import nn  # noqa: E402

from flows.gbrl_rl.params import GBRLConfig, IrregularConfig, NNConfig, Params  # noqa: E402
from paperflows.core.seeding import global_rngs_isolated  # noqa: E402
from tasks.train import torch_single_thread  # noqa: E402

CATEGORICAL_DTYPE = np.dtype("S128")  # what gbrl reads as categorical features

import gbrl  # noqa: E402
import gbrl.common.utils as _gbrl_utils  # noqa: E402
from gbrl.models.actor_critic import ActorCritic  # noqa: E402

_gbrl_process_array = _gbrl_utils.process_array


def _process_array_fast(arr: np.ndarray):
    """gbrl's ``process_array`` re-encodes every categorical array (S128 -> str -> utf-8 -> S128) on each
    predict/step call, which dominated run time here; an array that is already C-contiguous S128 (what
    the encoders below produce) is passed through unchanged -- the same bytes the round trip yields for
    ASCII strings (checked in tests/test_gbrl_rl.py). Everything else goes to gbrl's own function."""
    if isinstance(arr, np.ndarray) and arr.dtype == CATEGORICAL_DTYPE and arr.flags.c_contiguous:
        return None, arr
    return _gbrl_process_array(arr)


_gbrl_utils.process_array = _process_array_fast  # speed only: gbrl 1.1.9, pinned

ENV_IDS = {"cartpole": "CartPole-v1", "minigrid_empty": "MiniGrid-Empty-5x5-v0",
           "minigrid_doorkey": "MiniGrid-DoorKey-5x5-v0"}
ENV_NAMES = (*ENV_IDS, "irregular")
ALGOS = ("gbrl", "nn")

# ----------------------------------------------------------------------------------------------
# 1. Environments and observation encoders
# ----------------------------------------------------------------------------------------------

VIEW = 7  # MiniGrid's egocentric view is 7 x 7 cells, 3 integer codes each (object, colour, state)
N_OBJECTS, N_COLORS, N_STATES, N_DIRECTIONS = len(IDX_TO_OBJECT), len(IDX_TO_COLOR), len(STATE_TO_IDX), 4
IDX_TO_STATE = {v: k for k, v in STATE_TO_IDX.items()}
# CELL_STRINGS[o, c, s] = b"object,color,state": the official gbrl_sb3 categorical MiniGrid encoding
CELL_STRINGS = np.array([[[f"{IDX_TO_OBJECT[o]},{IDX_TO_COLOR[c]},{IDX_TO_STATE[s]}".encode()
                           for s in range(N_STATES)] for c in range(N_COLORS)] for o in range(N_OBJECTS)],
                        dtype=CATEGORICAL_DTYPE)
DIRECTION_STRINGS = np.array([str(d).encode() for d in range(N_DIRECTIONS)], dtype=CATEGORICAL_DTYPE)


def minigrid_raw(obs: dict) -> np.ndarray:
    """One MiniGrid observation -> int64 codes of shape (148,): the 7x7x3 image flattened, then the direction."""
    return np.concatenate([obs["image"].reshape(-1), [obs["direction"]]]).astype(np.int64)


def minigrid_categorical(raw: np.ndarray) -> np.ndarray:
    """(n, 148) codes -> (n, 50) S128 strings: 49 cells as "object,color,state", then the direction.

    The mission string (the official wrapper's last column) is constant in Empty and DoorKey and is left out.
    """
    cells = raw[:, :VIEW * VIEW * 3].reshape(len(raw), VIEW * VIEW, 3)
    out = np.empty((len(raw), VIEW * VIEW + 1), dtype=CATEGORICAL_DTYPE)
    out[:, :-1] = CELL_STRINGS[cells[..., 0], cells[..., 1], cells[..., 2]]
    out[:, -1] = DIRECTION_STRINGS[raw[:, -1]]
    return out


def one_hot(codes: np.ndarray, sizes: list[int]) -> np.ndarray:
    """(n, k) integer codes with column j in [0, sizes[j]) -> (n, sum(sizes)) float32 one-hot.

    A code outside [0, sizes[j]) (an unseen category) gives an all-zero block.
    """
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    out = np.zeros((len(codes), int(np.sum(sizes))), dtype=np.float32)
    valid = (codes >= 0) & (codes < np.asarray(sizes))
    rows, cols = np.nonzero(valid)
    out[rows, offsets[cols] + codes[rows, cols]] = 1.0
    return out


MINIGRID_SIZES = [N_OBJECTS, N_COLORS, N_STATES] * (VIEW * VIEW) + [N_DIRECTIONS]


def minigrid_onehot(raw: np.ndarray) -> np.ndarray:
    """(n, 148) codes -> (n, 984) float32: one-hot object/colour/state per cell plus one-hot direction."""
    return one_hot(raw, MINIGRID_SIZES)


@dataclass
class IrregularTask:
    """Synthetic categorical task with an irregular state-action relation [ours, after the plan].

    Observation: ``n_relevant`` categorical features (``n_categories`` values each) followed by
    ``n_nuisance`` irrelevant ones (``n_nuisance_categories`` values each), drawn uniformly; as
    integer codes, shape (n, n_relevant + n_nuisance). Each episode is one decision: reward 1 if the
    action equals ``table[c_0, ..., c_{r-1}]``, a uniformly random lookup table (no smooth or monotone
    structure in the codes), else 0. Max return 1, uniform-random policy 1 / n_actions.
    """

    n_relevant: int
    n_categories: int
    n_nuisance: int
    n_nuisance_categories: int
    n_actions: int
    table: np.ndarray = field(repr=False)

    @classmethod
    def make(cls, cfg: IrregularConfig, rng: np.random.Generator) -> "IrregularTask":
        shape = (cfg.n_categories,) * cfg.n_relevant
        return cls(cfg.n_relevant, cfg.n_categories, cfg.n_nuisance, cfg.n_nuisance_categories,
                   cfg.n_actions, rng.integers(0, cfg.n_actions, size=shape))

    @property
    def sizes(self) -> list[int]:
        return [self.n_categories] * self.n_relevant + [self.n_nuisance_categories] * self.n_nuisance

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.stack([rng.integers(0, k, size=n) for k in self.sizes], axis=1)

    def reward(self, codes: np.ndarray, actions: np.ndarray) -> np.ndarray:
        best = self.table[tuple(codes[:, : self.n_relevant].T)]
        return (actions == best).astype(np.float64)

    def all_contexts(self) -> np.ndarray:
        """Every observation, shape (prod(sizes), k): the exact expected return is a mean over them."""
        grids = np.meshgrid(*[np.arange(k) for k in self.sizes], indexing="ij")
        return np.stack([g.ravel() for g in grids], axis=1)

    def perturb(self, codes: np.ndarray) -> np.ndarray:
        """The OOD test: every nuisance slot takes a category never seen in training."""
        out = codes.copy()
        out[:, self.n_relevant:] = self.n_nuisance_categories
        return out


def irregular_categorical(raw: np.ndarray) -> np.ndarray:
    """(n, k) codes -> (n, k) S128 strings "f<j>=<code>" (a category is a label, not a number)."""
    cols = np.arange(raw.shape[1])[None, :].repeat(len(raw), 0)
    return np.char.add(np.char.add(np.char.add(b"f", cols.astype("S4")), b"="), raw.astype("S8")).astype(CATEGORICAL_DTYPE)


class VecEnv:
    """``n`` copies of an environment stepped in lock-step with automatic reset.

    ``step(actions)`` returns (raw_obs, rewards, terminated, truncated, final_raw): ``raw_obs`` is the
    observation after any reset; ``final_raw`` holds the last observation of episodes that ended (the
    truncation bootstrap needs it). Observations are raw arrays: float (n, 4) for CartPole, int
    codes (n, 148) for MiniGrid, int codes (n, k) for the irregular task.
    """

    def __init__(self, name: str, n: int, rng: np.random.Generator, task: IrregularTask | None = None):
        self.name, self.n, self.rng, self.task = name, n, rng, task
        self.episode_returns: list[float] = []
        self._running = np.zeros(n)
        if name == "irregular":
            self.envs = []
            self.n_actions = task.n_actions
        else:
            self.envs = [gym.make(ENV_IDS[name], disable_env_checker=True) for _ in range(n)]
            self.n_actions = int(self.envs[0].action_space.n)

    def _raw(self, obs) -> np.ndarray:
        return minigrid_raw(obs) if self.name.startswith("minigrid") else np.asarray(obs, dtype=np.float32)

    def reset(self) -> np.ndarray:
        if self.name == "irregular":
            self._obs = self.task.sample(self.n, self.rng)
            return self._obs
        seeds = self.rng.integers(0, 2**31 - 1, size=self.n)
        self._obs = np.stack([self._raw(env.reset(seed=int(s))[0]) for env, s in zip(self.envs, seeds)])
        return self._obs

    def step(self, actions: np.ndarray):
        if self.name == "irregular":  # one-step episodes
            rewards = self.task.reward(self._obs, actions)
            final = self._obs
            self.episode_returns.extend(rewards.tolist())
            self._obs = self.task.sample(self.n, self.rng)
            return self._obs, rewards, np.ones(self.n, bool), np.zeros(self.n, bool), final
        obs, final = self._obs.copy(), self._obs.copy()
        rewards = np.zeros(self.n)
        terminated, truncated = np.zeros(self.n, bool), np.zeros(self.n, bool)
        for i, env in enumerate(self.envs):
            o, r, te, tr, _ = env.step(int(actions[i]))
            rewards[i], terminated[i], truncated[i] = r, te, tr
            final[i] = self._raw(o)
            self._running[i] += r
            if te or tr:
                self.episode_returns.append(float(self._running[i]))
                self._running[i] = 0.0
                o, _ = env.reset()
            obs[i] = self._raw(o)
        self._obs = obs
        return obs, rewards, terminated, truncated, final


def make_encoders(env_name: str, task: IrregularTask | None, nn_encoding: str):
    """Feature functions raw -> model input: (for gbrl, for the network)."""
    if env_name == "cartpole":
        ident = lambda raw: np.ascontiguousarray(raw, dtype=np.float32)  # noqa: E731
        return ident, ident
    if env_name.startswith("minigrid"):
        nn_fn = minigrid_onehot if nn_encoding == "onehot" else (lambda raw: raw.astype(np.float32))
        return minigrid_categorical, nn_fn
    sizes = task.sizes
    nn_fn = (lambda raw: one_hot(raw, sizes)) if nn_encoding == "onehot" else (lambda raw: raw.astype(np.float32))
    return irregular_categorical, nn_fn


# ----------------------------------------------------------------------------------------------
# 2. The two actor-critics
# ----------------------------------------------------------------------------------------------

_GOMP = None
@contextmanager
def single_threaded() -> Iterator[None]:
    """One OpenMP thread for gbrl (its bundled libgomp, this Python thread only) and one torch
    intra-op thread while any run is inside. The trees and the 64-unit MLP are small: one thread per
    seed is faster on two shared cores and fixes the reduction order, so results are bit-identical
    whatever runs beside them."""
    gbrl_threads(1)
    with torch_single_thread():
        yield


def gbrl_threads(n: int) -> None:
    """Set the OpenMP threads of gbrl's bundled libgomp for the calling thread only."""
    global _GOMP
    if _GOMP is None:
        libs = glob.glob(os.path.join(os.path.dirname(gbrl.__file__), "..", "gbrl.libs", "libgomp*"))
        _GOMP = ctypes.CDLL(libs[0]) if libs else False
    if _GOMP:
        _GOMP.omp_set_num_threads(int(n))


class GBRLActorCritic:
    """gbrl's shared-structure actor-critic: one ensemble of oblivious trees, outputs (logits, value).

    ``forward(x)`` -> (logits (n, A), values (n,)) as torch leaf tensors; after ``loss.backward()``
    ``update()`` fits one tree to the per-sample output gradients and appends it:
    logits <- logits - policy_lr * tree_policy(x), value <- value - value_lr * tree_value(x).
    """

    kind = "gbrl"

    def __init__(self, input_dim: int, n_actions: int, cfg: GBRLConfig):
        self.model = ActorCritic(
            tree_struct={"max_depth": cfg.max_depth, "grow_policy": "oblivious", "n_bins": cfg.n_bins,
                         "min_data_in_leaf": 0, "par_th": 2},
            input_dim=input_dim, output_dim=n_actions + 1,
            policy_optimizer={"policy_algo": "SGD", "policy_lr": cfg.policy_lr, "start_idx": 0, "stop_idx": n_actions},
            value_optimizer={"value_algo": "SGD", "value_lr": cfg.value_lr, "start_idx": n_actions,
                             "stop_idx": n_actions + 1},
            shared_tree_struct=True,
            params={"split_score_func": "cosine", "generator_type": "Quantile", "control_variates": False},
            device="cpu")

    def forward(self, x: np.ndarray, requires_grad: bool = False):
        logits, values = self.model(x, requires_grad=requires_grad)
        return logits, values  # leaf tensors, shapes (n, A) and (n,)

    def update(self, loss: torch.Tensor) -> None:
        loss.backward()
        self.model.step()  # policy/value grads = output grads x batch size (per-sample gradients)

    @property
    def n_trees(self) -> int:
        return int(self.model.get_num_trees())


class MLPActorCritic(nn.Module):
    """stable-baselines3's PPO MlpPolicy: separate tanh MLPs for policy and value, orthogonal init,
    Adam; inputs standardised by running mean/std (VecNormalize ``norm_obs``)."""

    kind = "nn"

    def __init__(self, input_dim: int, n_actions: int, cfg: NNConfig, generator: torch.Generator):
        super().__init__()
        h = cfg.hidden
        with global_rngs_isolated():   # the layers' own init is overwritten below from ``generator``
            self.pi = nn.Sequential(nn.Linear(input_dim, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, n_actions))
            self.vf = nn.Sequential(nn.Linear(input_dim, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, 1))
        for net in (self.pi, self.vf):
            for layer in net:
                if isinstance(layer, nn.Linear):
                    nn.init.orthogonal_(layer.weight, gain=np.sqrt(2), generator=generator)
                    nn.init.zeros_(layer.bias)
        nn.init.orthogonal_(self.pi[-1].weight, gain=0.01, generator=generator)
        nn.init.orthogonal_(self.vf[-1].weight, gain=1.0, generator=generator)
        self.opt = torch.optim.Adam(self.parameters(), lr=cfg.lr, eps=1e-5)
        self.max_grad_norm = cfg.max_grad_norm
        self.obs_rms = RunningMeanStd(input_dim)

    def forward(self, x: np.ndarray, requires_grad: bool = False):
        z = torch.from_numpy(np.clip((x - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + 1e-8), -10, 10).astype(np.float32))
        with torch.set_grad_enabled(requires_grad):
            return self.pi(z), self.vf(z).reshape(-1)

    def update(self, loss: torch.Tensor) -> None:
        self.opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.parameters(), self.max_grad_norm)
        self.opt.step()


class RunningMeanStd:
    """Parallel-update running mean/variance (stable-baselines3 ``RunningMeanStd``)."""

    def __init__(self, shape):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4

    def update(self, x: np.ndarray) -> None:
        b_mean, b_var, b_count = x.mean(axis=0), x.var(axis=0), x.shape[0]
        delta, total = b_mean - self.mean, self.count + b_count
        self.mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.var, self.count = m2 / total, total


# ----------------------------------------------------------------------------------------------
# 3. PPO: GAE, clipped loss, reward normalisation, training loop, evaluation
# ----------------------------------------------------------------------------------------------

def compute_gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_values: np.ndarray,
                gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over a rollout of shape (T, n_envs).

    ``dones[t]`` is 1 where the episode ended at step t (no bootstrap across it); ``last_values`` (n_envs,)
    bootstraps the step after the rollout. Returns (advantages, returns = advantages + values).
    """
    T = rewards.shape[0]
    adv = np.zeros_like(rewards, dtype=np.float64)
    gae = np.zeros(rewards.shape[1])
    for t in reversed(range(T)):
        next_values = last_values if t == T - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_values * nonterminal - values[t]
        gae = delta + gamma * lam * nonterminal * gae
        adv[t] = gae
    return adv, adv + values


def ppo_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor, old_logp: torch.Tensor,
             advantages: torch.Tensor, returns: torch.Tensor, clip: float, ent_coef: float, vf_coef: float):
    """The PPO-clip objective (as in stable-baselines3 / gbrl_sb3), to be minimised.

    loss = -mean(min(r A, clip(r, 1-eps, 1+eps) A)) - ent_coef mean(H) + vf_coef 0.5 mean((R - V)^2),
    r = exp(logp - old_logp); advantages are standardised over the minibatch. Returns (loss, parts).
    """
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(1, actions[:, None]).squeeze(1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8) if len(advantages) > 1 else advantages
    ratio = torch.exp(logp - old_logp)
    policy_loss = -torch.min(adv * ratio, adv * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
    value_loss = 0.5 * ((returns - values) ** 2).mean()
    loss = policy_loss - ent_coef * entropy.mean() + vf_coef * value_loss
    return loss, {"policy": policy_loss.item(), "value": value_loss.item(), "entropy": entropy.mean().item()}


class RewardNormalizer:
    """VecNormalize ``norm_reward``: divide rewards by the running std of the discounted return, clip at 10."""

    def __init__(self, n_envs: int, gamma: float):
        self.ret, self.rms, self.gamma = np.zeros(n_envs), RunningMeanStd(()), gamma

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        self.ret = self.ret * self.gamma + rewards
        self.rms.update(self.ret)
        out = np.clip(rewards / np.sqrt(self.rms.var + 1e-8), -10, 10)
        self.ret[dones] = 0.0
        return out


def sample_actions(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Categorical sampling by inverse CDF with the run's own generator; logits (n, A) -> (n,) int."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    return np.minimum((rng.random(len(p))[:, None] > cdf).sum(axis=1), p.shape[1] - 1)


def log_softmax_np(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def train_ppo(agent, env: VecEnv, features, algo_cfg: GBRLConfig | NNConfig, total_steps: int, gamma: float,
              lam: float, rng: np.random.Generator, curve_window: int = 20) -> list[dict]:
    """Train ``agent`` with PPO for ``total_steps`` environment steps; returns the learning curve as rows
    {"steps", "train_return"}: after each rollout, the mean undiscounted return of the episodes that finished
    in it, or of the last ``curve_window`` finished episodes if that is more (NaN before the first one).

    ``algo_cfg`` gives the rollout shape (n_envs x n_steps), batch_size, n_epochs and the loss
    coefficients clip_range, ent_coef, vf_coef."""
    n_envs, n_steps = algo_cfg.n_envs, algo_cfg.n_steps
    batch = n_envs * n_steps
    n_rollouts = max(1, total_steps // batch)
    normalize = RewardNormalizer(n_envs, gamma)
    raw = env.reset()
    curve, n_done_before = [], 0
    for rollout in range(n_rollouts):
        obs_buf = np.empty((n_steps, n_envs, *raw.shape[1:]), dtype=raw.dtype)
        act_buf = np.empty((n_steps, n_envs), dtype=np.int64)
        rew_buf, val_buf, logp_buf, done_buf = (np.zeros((n_steps, n_envs)) for _ in range(4))
        for t in range(n_steps):
            x = features(raw)
            if agent.kind == "nn":
                agent.obs_rms.update(x)
            logits, values = agent.forward(x)
            logits, values = logits.detach().numpy().astype(np.float64), values.detach().numpy().astype(np.float64)
            actions = sample_actions(logits, rng)
            next_raw, rewards, terminated, truncated, final_raw = env.step(actions)
            done = terminated | truncated
            r = normalize(rewards, done)
            if truncated.any():  # bootstrap time-limit truncations with V(final observation), as gbrl_sb3
                _, v_final = agent.forward(features(final_raw[truncated]))
                r[truncated] += gamma * v_final.detach().numpy()
            obs_buf[t], act_buf[t], rew_buf[t], val_buf[t] = raw, actions, r, values
            logp_buf[t] = log_softmax_np(logits)[np.arange(n_envs), actions]
            done_buf[t] = done
            raw = next_raw
        _, last_v = agent.forward(features(raw))
        adv, ret = compute_gae(rew_buf, val_buf, done_buf, last_v.detach().numpy().astype(np.float64), gamma, lam)

        flat_obs = obs_buf.reshape(batch, *raw.shape[1:])
        acts = torch.from_numpy(act_buf.reshape(-1))
        old_logp = torch.from_numpy(logp_buf.reshape(-1)).float()
        adv_t, ret_t = torch.from_numpy(adv.reshape(-1)).float(), torch.from_numpy(ret.reshape(-1)).float()
        mb = algo_cfg.batch_size
        for _ in range(algo_cfg.n_epochs):
            perm = rng.permutation(batch)
            for start in range(0, batch, mb):
                idx = perm[start:start + mb]
                logits, values = agent.forward(features(flat_obs[idx]), requires_grad=True)
                loss, _ = ppo_loss(logits, values, acts[idx], old_logp[idx], adv_t[idx], ret_t[idx],
                                   algo_cfg.clip_range, algo_cfg.ent_coef, algo_cfg.vf_coef)
                agent.update(loss)
        finished = len(env.episode_returns) - n_done_before
        n_done_before = len(env.episode_returns)
        recent = env.episode_returns[-max(curve_window, finished):]
        curve.append({"steps": (rollout + 1) * batch, "train_return": float(np.mean(recent)) if recent else float("nan")})
    return curve


def evaluate(agent, env_name: str, features, n_episodes: int, rng: np.random.Generator,
             task: IrregularTask | None = None, perturb: bool = False) -> np.ndarray:
    """Undiscounted returns (n_episodes,) of the greedy (argmax) policy on fresh episodes.

    On the irregular task the returns of every possible observation are returned instead (their mean is
    the exact expected return); ``perturb`` then sets the nuisance features to an unseen category (OOD).
    """
    if env_name == "irregular":
        raw = task.all_contexts()
        x = task.perturb(raw) if perturb else raw
        logits, _ = agent.forward(features(x))
        return task.reward(raw, logits.detach().numpy().argmax(axis=1))
    env = VecEnv(env_name, n_episodes, rng)
    raw = env.reset()
    returns, active = np.zeros(n_episodes), np.ones(n_episodes, bool)
    while active.any():
        logits, _ = agent.forward(features(raw[active]))
        actions = np.zeros(n_episodes, dtype=np.int64)
        actions[active] = logits.detach().numpy().argmax(axis=1)
        for i in np.flatnonzero(active):
            o, r, te, tr, _ = env.envs[i].step(int(actions[i]))
            returns[i] += r
            raw[i] = env._raw(o)
            if te or tr:
                active[i] = False
    return returns


class UniformRandomAgent:
    """The negative control of the flow's gym-env claims: ignores its input; its "logits" are i.i.d.
    normal, so the greedy (argmax) action of :func:`evaluate` is uniformly random."""

    kind = "random"

    def __init__(self, n_actions: int, rng: np.random.Generator):
        self.n_actions, self.rng = n_actions, rng

    def forward(self, x: np.ndarray, requires_grad: bool = False):
        return torch.from_numpy(self.rng.standard_normal((len(x), self.n_actions))), torch.zeros(len(x))


def random_policy_return(p: Params, env_name: str, seed: int) -> float:
    """Mean return of the uniform random policy on the same ``p.eval_episodes`` evaluation episodes (same
    env seeds) as the agents trained by :func:`run_one` for ``seed``; gym environments only."""
    eval_rng = np.random.default_rng([seed, ENV_STREAM[env_name], 3])   # as in _run_one
    n_actions = int(gym.make(ENV_IDS[env_name], disable_env_checker=True).action_space.n)
    agent = UniformRandomAgent(n_actions, np.random.default_rng([seed, ENV_STREAM[env_name], 4]))
    return float(evaluate(agent, env_name, lambda raw: raw, p.eval_episodes, eval_rng).mean())


# ----------------------------------------------------------------------------------------------
# 4. One run: (environment, algorithm, seed) -> results
# ----------------------------------------------------------------------------------------------

ALGO_STREAM = {"gbrl": 1, "nn": 2}
ENV_STREAM = {name: i for i, name in enumerate(ENV_NAMES)}


def run_one(p: Params, env_name: str, algo: str, seed: int) -> dict:
    """See ``_run_one``; runs single-threaded (gbrl OpenMP and torch intra-op)."""
    with single_threaded():
        return _run_one(p, env_name, algo, seed)


def _run_one(p: Params, env_name: str, algo: str, seed: int) -> dict:
    """Train one agent (``algo`` in {"gbrl", "nn"}, hyperparameters ``p.gbrl`` / ``p.nn``) on ``env_name``
    for ``p.steps[env_name]`` steps (discount ``p.gamma``, GAE ``p.gae_lambda``, network inputs encoded as
    ``p.nn_encoding``, the irregular task built from ``p.irregular``), then evaluate it greedily on
    ``p.eval_episodes`` fresh episodes (and, on the irregular task, with the nuisance features perturbed).
    Returns JSON-able scalars and the learning-curve rows.

    The task instance (irregular lookup table) and the environment seeds depend on (seed, env) only, so
    both algorithms of a seed face the same task; actions/minibatches use an (seed, env, algo) stream.
    """
    algo_cfg = p.gbrl if algo == "gbrl" else p.nn
    started, cpu_started = time.perf_counter(), time.thread_time()
    task_rng = np.random.default_rng([seed, ENV_STREAM[env_name], 0])
    task = IrregularTask.make(p.irregular, task_rng) if env_name == "irregular" else None
    env = VecEnv(env_name, algo_cfg.n_envs, np.random.default_rng([seed, ENV_STREAM[env_name], 1]), task)
    gbrl_features, nn_features = make_encoders(env_name, task, p.nn_encoding)
    features = gbrl_features if algo == "gbrl" else nn_features
    input_dim = features(env.reset()).shape[1]
    if algo == "gbrl":
        agent = GBRLActorCritic(input_dim, env.n_actions, p.gbrl)
    else:
        agent = MLPActorCritic(input_dim, env.n_actions, p.nn,
                               torch.Generator().manual_seed(int(seed) * 1000 + ENV_STREAM[env_name]))
    rng = np.random.default_rng([seed, ENV_STREAM[env_name], 2, ALGO_STREAM[algo]])
    curve = train_ppo(agent, env, features, algo_cfg, p.steps[env_name], p.gamma, p.gae_lambda, rng)
    train_s = time.perf_counter() - started
    eval_rng = np.random.default_rng([seed, ENV_STREAM[env_name], 3])  # same eval episodes for both algos
    returns = evaluate(agent, env_name, features, p.eval_episodes, eval_rng, task)
    curve_y = np.array([row["train_return"] for row in curve])
    out = {"env": env_name, "algo": algo, "seed": int(seed), "final_return": float(returns.mean()),
           "curve_mean": float(np.nanmean(curve_y)) if np.isfinite(curve_y).any() else 0.0,
           "steps": int(curve[-1]["steps"]), "curve": [{"env": env_name, "algo": algo, "seed": int(seed), **row}
                                                     for row in curve]}
    if env_name == "irregular":
        ood = evaluate(agent, env_name, features, p.eval_episodes, np.random.default_rng([seed, ENV_STREAM[env_name], 3]),
                       task, perturb=True)
        out["ood_return"] = float(ood.mean())
        out["optimal_return"] = 1.0
        out["random_return"] = 1.0 / task.n_actions
    if algo == "gbrl":
        out["n_trees"] = agent.n_trees
    out["train_s"] = train_s
    out["wall_s"] = time.perf_counter() - started
    out["cpu_s"] = time.thread_time() - cpu_started
    return out
