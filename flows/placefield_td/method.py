"""TD-error-driven place-field reorganisation (Kumar, Bordelon, Zavatone-Veth, Pehlevan, ICML 2025).

A population of N Gaussian place fields encodes the position x of an agent on a 1-D track,

    phi_i(x) = alpha_i**2 * exp(-(x - lambda_i)**2 / (2 sigma_i**2))                     (N,)

and feeds a linear actor-critic:  V(x) = phi(x) . w_c,  pi(. | x) = softmax(beta * phi(x) @ W_a).
After every step the TD error  delta = r + gamma V(x') - V(x)  updates the critic w_c, the actor
W_a and -- the paper's point -- every field's centre lambda_i, width sigma_i and amplitude alpha_i,
by back-propagating delta through both read-outs (official ``numpy/1D/model.py::learn``):

    g        = delta * (W_a @ beta (onehot(a) - pi) + w_c)                               (N,)
    d lambda = eta_lambda * g * phi * (x - lambda) / sigma**2
    d sigma  = eta_sigma  * g * phi * (x - lambda)**2 / sigma**3
    d alpha  = eta_alpha  * g * phi * 2 / alpha
    d W_a    = eta_actor  * delta * phi (beta (onehot(a) - pi))^T
    d w_c    = eta_critic * delta * phi

This is gradient ascent on  delta_sg * (V(x) + log pi(a | x))  with the TD error held constant
(``delta_sg``): for the critic, descent on 0.5 delta**2 with the bootstrap target r + gamma V(x')
held fixed; for the actor, the policy gradient. All gradients use the parameters before the step.
Optional Gaussian noise on (lambda, sigma, alpha) after every update models representational drift.

The environment is the official ``OneDimNav`` (numpy/1D/env.py): track [-1, 1], start -0.75, two
actions (left, right), velocity smoothed as v <- v + 0.2 (-v + 0.1 dir); a step that would leave the
track is refused (position kept, velocity zeroed); Gaussian reward exp(-(x' - goal)**2 / (2 * 0.05**2))
at every step; the episode ends once 5 units of reward are collected or after t_max steps. The
official latency of an episode is the index of its last step (steps - 1).

Layout: the readable NumPy reference of one step (``place_fields``, ``td_update``, ``env_step``) comes
first; ``_train_chunk`` is the same step compiled with Numba for the long online loop (the two are
checked against each other in the tests); ``train_agent`` drives it; ``run_seed`` runs the three
conditions of one seed (fixed fields, learned fields, learned fields + drift noise) and measures them.
Randomness only through ``np.random.default_rng`` streams derived from the seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

# ----------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Config:
    """Hyper-parameters of the 1-D model (defaults: official ``numpy/1D/main.py``)."""

    n_fields: int = 64
    sigma0: float = 0.1            # initial field width
    alpha0: float = 1.0            # initial field amplitude (peak activity alpha0**2)
    n_actions: int = 2             # 2: left/right; 3: left/right/stay
    beta: float = 1.0              # softmax inverse temperature of the actor
    gamma: float = 0.9
    eta_actor: float = 0.01
    eta_critic: float = 0.01
    eta_center: float = 1e-4       # lambda
    eta_width: float = 1e-4        # sigma
    eta_amp: float = 1e-4          # alpha
    env_size: float = 1.0          # track [-env_size, env_size]
    start: float = -0.75
    goals: tuple[float, ...] = (0.5, -0.2)   # goal of each block of episodes (it moves: relearning)
    goal_size: float = 0.05        # s.d. of the Gaussian reward
    max_speed: float = 0.1
    tau_act: float = 0.2           # velocity smoothing
    max_reward: float = 5.0        # reward to collect before the episode ends
    t_max: int = 100
    episodes_per_goal: int = 200
    sigma_clip: float = 0.0        # 0 = off (official default); else sigma clipped to [1e-5, sigma_clip]
    alpha_clip: float = 0.0

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> "Config":
        """Pick the known keys of a params dict (others, e.g. metric settings, are ignored)."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: (tuple(v) if k == "goals" else v) for k, v in config.items() if k in known})

    @property
    def directions(self) -> np.ndarray:
        """Velocity direction of each action (official ``onehot2dirmat``)."""
        return np.array([-1.0, 1.0, 0.0][: self.n_actions])


@dataclass(frozen=True)
class Condition:
    """One agent: whether its field parameters learn, and the drift noise s.d. they receive."""

    name: str
    learn_fields: bool
    noise: float = 0.0


# ----------------------------------------------------------------------------- NumPy reference


def init_params(cfg: Config, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Homogeneous population (official ``uniform_pc_weights``): centres evenly spaced over the track,
    equal widths and amplitudes; actor and critic weights 1e-5 N(0, 1).

    Returns lam, sig, alp (N,), W_a (N, A), w_c (N,).
    """
    n = cfg.n_fields
    return {
        "lam": np.linspace(-cfg.env_size, cfg.env_size, n),
        "sig": np.full(n, cfg.sigma0),
        "alp": np.full(n, cfg.alpha0),
        "W_a": 1e-5 * rng.standard_normal((n, cfg.n_actions)),
        "w_c": 1e-5 * rng.standard_normal(n),
    }


def place_fields(lam: np.ndarray, sig: np.ndarray, alp: np.ndarray, x: np.ndarray | float) -> np.ndarray:
    """phi of shape (..., N) at positions x of shape (...,)."""
    z = (np.asarray(x, dtype=float)[..., None] - lam) / sig
    return alp**2 * np.exp(-0.5 * z * z)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis."""
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def action_probs(params: dict[str, np.ndarray], x: float, beta: float) -> np.ndarray:
    """pi(. | x), shape (A,)."""
    phi = place_fields(params["lam"], params["sig"], params["alp"], x)
    return softmax(beta * phi @ params["W_a"])


def td_update(params: dict[str, np.ndarray], x: float, x_new: float, reward: float, action: int,
              etas: dict[str, float], gamma: float, beta: float) -> tuple[dict[str, np.ndarray], float]:
    """One online actor-critic step with TD-driven field updates (one agent, shapes as in
    :func:`init_params`). etas: {"center", "width", "amp", "actor", "critic"}.
    Returns the updated parameters (new arrays) and the TD error."""
    lam, sig, alp, W_a, w_c = (params[k] for k in ("lam", "sig", "alp", "W_a", "w_c"))
    phi = place_fields(lam, sig, alp, x)
    phi_new = place_fields(lam, sig, alp, x_new)
    delta = float(reward + gamma * phi_new @ w_c - phi @ w_c)
    pi = softmax(beta * phi @ W_a)
    decay = beta * (np.eye(len(pi))[action] - pi)          # d log pi(a|x) / d logits, (A,)
    g = delta * (W_a @ decay + w_c)                        # TD error back-propagated to phi, (N,)
    d = x - lam
    new = {
        "lam": lam + etas["center"] * g * phi * d / sig**2,
        "sig": sig + etas["width"] * g * phi * d**2 / sig**3,
        "alp": alp + etas["amp"] * g * phi * 2.0 / alp,
        "W_a": W_a + etas["actor"] * delta * np.outer(phi, decay),
        "w_c": w_c + etas["critic"] * delta * phi,
    }
    return new, delta


def surrogate_objective(params: dict[str, np.ndarray], x: float, action: int, delta_fixed: float,
                        beta: float) -> float:
    """delta_sg * (V(x) + log pi(a | x)): the objective :func:`td_update` ascends (times the rates)."""
    phi = place_fields(params["lam"], params["sig"], params["alp"], x)
    logits = beta * phi @ params["W_a"]
    top = logits.max()
    log_pi = logits[action] - top - np.log(np.exp(logits - top).sum())
    return float(delta_fixed * (phi @ params["w_c"] + log_pi))


def semi_gradient_td_loss(params: dict[str, np.ndarray], x: float, target: float) -> float:
    """0.5 (target - V(x))**2 with the bootstrap target r + gamma V(x') held fixed."""
    phi = place_fields(params["lam"], params["sig"], params["alp"], x)
    return float(0.5 * (target - phi @ params["w_c"]) ** 2)


def env_step(x: np.ndarray, v: np.ndarray, action: np.ndarray, goal: np.ndarray | float, cfg: Config
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Official ``OneDimNav.step`` for arrays of agents: x, v, action (int) of shape (B,).
    Returns the new position, velocity and reward, each (B,)."""
    v = v + cfg.tau_act * (-v + cfg.directions[action] * cfg.max_speed)
    x_new = x + v
    out = (x_new > cfg.env_size) | (x_new < -cfg.env_size)
    x_new = np.where(out, x, x_new)
    v = np.where(out, 0.0, v)
    return x_new, v, np.exp(-0.5 * ((x_new - goal) / cfg.goal_size) ** 2)


# ----------------------------------------------------------------------------- compiled online loop

_X, _V, _TOTAL, _GOAL = 0, 1, 2, 3          # float state slots
_T, _EPISODE = 0, 1                         # integer state slots


@njit(cache=True, nogil=True)
def _train_chunk(lam, sig, alp, W_a, w_c, fstate, istate, etas, consts, directions, goals,
                 episodes_per_goal, n_episodes, uniforms, normals, latency, snap_episodes, snaps):
    """Run the online loop of one agent for at most len(uniforms) steps, in place.

    lam, sig, alp, w_c: (N,); W_a: (N, A); fstate: [x, v, total reward, goal]; istate: [t, episode].
    etas: [center, width, amp, actor, critic]; consts: [gamma, beta, tau_act, max_speed, env_size,
    goal_size, max_reward, t_max, start, noise, sigma_clip, alpha_clip]. uniforms: (C,) action draws;
    normals: (C, 3, N) drift noise or (0, 3, N). latency: (n_episodes,) written per finished episode;
    snaps: (len(snap_episodes), 3, N) field parameters once ``episode`` reaches snap_episodes[j].
    Same arithmetic as ``td_update`` + ``env_step``. Returns the number of steps taken.
    """
    n, n_act = W_a.shape
    gamma, beta, tau, vmax, size = consts[0], consts[1], consts[2], consts[3], consts[4]
    gsize, rmax, tmax, start, noise = consts[5], consts[6], consts[7], consts[8], consts[9]
    sclip, aclip = consts[10], consts[11]
    d = np.empty(n)
    phi = np.empty(n)
    logits = np.empty(n_act)
    pi = np.empty(n_act)
    decay = np.empty(n_act)
    steps = 0
    for k in range(uniforms.shape[0]):
        if istate[_EPISODE] >= n_episodes:
            break
        x = fstate[_X]
        for i in range(n):                                   # place-field activity at x
            d[i] = x - lam[i]
            z = d[i] / sig[i]
            phi[i] = alp[i] * alp[i] * np.exp(-0.5 * z * z)
        top = -np.inf
        for a in range(n_act):                               # actor: softmax(beta phi W_a)
            s = 0.0
            for i in range(n):
                s += phi[i] * W_a[i, a]
            logits[a] = beta * s
            top = max(top, logits[a])
        norm = 0.0
        for a in range(n_act):
            pi[a] = np.exp(logits[a] - top)
            norm += pi[a]
        action = 0
        cum = 0.0
        for a in range(n_act - 1):                           # inverse-CDF sampling
            pi[a] /= norm
            cum += pi[a]
            if uniforms[k] >= cum:
                action = a + 1
        pi[n_act - 1] /= norm
        v = fstate[_V] + tau * (-fstate[_V] + directions[action] * vmax)   # environment
        x_new = x + v
        if x_new > size or x_new < -size:
            x_new = x
            v = 0.0
        zr = (x_new - fstate[_GOAL]) / gsize
        reward = np.exp(-0.5 * zr * zr)
        value = 0.0
        value_new = 0.0
        for i in range(n):                                   # critic at x and x'
            z = (x_new - lam[i]) / sig[i]
            value += phi[i] * w_c[i]
            value_new += alp[i] * alp[i] * np.exp(-0.5 * z * z) * w_c[i]
        delta = reward + gamma * value_new - value
        for a in range(n_act):
            decay[a] = beta * ((1.0 if a == action else 0.0) - pi[a])
        for i in range(n):                                   # updates from the pre-step parameters
            back = w_c[i]
            for a in range(n_act):
                back += W_a[i, a] * decay[a]
            gp = delta * back * phi[i]
            s_old = sig[i]
            a_old = alp[i]
            lam[i] += etas[0] * gp * d[i] / (s_old * s_old)
            sig[i] += etas[1] * gp * d[i] * d[i] / (s_old * s_old * s_old)
            alp[i] += etas[2] * gp * 2.0 / a_old
            for a in range(n_act):
                W_a[i, a] += etas[3] * delta * phi[i] * decay[a]
            w_c[i] += etas[4] * delta * phi[i]
        if noise > 0.0:                                      # drift noise on the field parameters
            for i in range(n):
                lam[i] += noise * normals[k, 0, i]
                sig[i] += noise * normals[k, 1, i]
                alp[i] += noise * normals[k, 2, i]
        if sclip > 0.0:
            for i in range(n):
                sig[i] = min(max(sig[i], 1e-5), sclip)
        if aclip > 0.0:
            for i in range(n):
                alp[i] = min(max(alp[i], 1e-5), aclip)
        fstate[_X] = x_new
        fstate[_V] = v
        fstate[_TOTAL] += reward
        istate[_T] += 1
        steps += 1
        if fstate[_TOTAL] >= rmax or istate[_T] == tmax:      # episode over: log, reset
            ep = istate[_EPISODE]
            latency[ep] = istate[_T] - 1
            ep += 1
            istate[_EPISODE] = ep
            for j in range(snap_episodes.shape[0]):
                if snap_episodes[j] == ep:
                    for i in range(n):
                        snaps[j, 0, i] = lam[i]
                        snaps[j, 1, i] = sig[i]
                        snaps[j, 2, i] = alp[i]
            if ep < n_episodes:
                fstate[_GOAL] = goals[ep // episodes_per_goal]
            fstate[_X] = start
            fstate[_V] = 0.0
            fstate[_TOTAL] = 0.0
            istate[_T] = 0
    return steps


@dataclass
class AgentLog:
    """What one trained agent leaves behind."""

    latency: np.ndarray                                     # (n_episodes,) official latency
    snapshots: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # episodes done -> fields
    final: dict[str, np.ndarray] = field(default_factory=dict)                 # all parameters at the end
    steps: int = 0


def train_agent(cfg: Config, cond: Condition, seed: int, snapshot_episodes: tuple[int, ...] = (),
                chunk: int = 4096) -> AgentLog:
    """Train one agent online for ``len(cfg.goals) * cfg.episodes_per_goal`` episodes.

    The goal moves to ``cfg.goals[k]`` at episode ``k * episodes_per_goal``; parameters carry over.
    Streams: ``[seed, 0]`` initial weights, ``[seed, 1]`` action draws (the same for every
    condition of a seed: common random numbers), ``[seed, 2]`` drift noise.
    ``snapshot_episodes``: numbers of completed episodes at which (lam, sig, alp) are recorded.
    """
    params = init_params(cfg, np.random.default_rng([seed, 0]))
    act_rng = np.random.default_rng([seed, 1])
    noise_rng = np.random.default_rng([seed, 2])
    learn = 1.0 if cond.learn_fields else 0.0
    etas = np.array([cfg.eta_center * learn, cfg.eta_width * learn, cfg.eta_amp * learn,
                     cfg.eta_actor, cfg.eta_critic])
    consts = np.array([cfg.gamma, cfg.beta, cfg.tau_act, cfg.max_speed, cfg.env_size, cfg.goal_size,
                       cfg.max_reward, cfg.t_max, cfg.start, cond.noise, cfg.sigma_clip, cfg.alpha_clip])
    n_episodes = len(cfg.goals) * cfg.episodes_per_goal
    goals = np.asarray(cfg.goals, dtype=float)
    fstate = np.array([cfg.start, 0.0, 0.0, goals[0]])
    istate = np.zeros(2, dtype=np.int64)
    latency = np.zeros(n_episodes, dtype=np.int64)
    snap_eps = np.array(sorted(set(snapshot_episodes) - {0}), dtype=np.int64)
    snaps = np.zeros((len(snap_eps), 3, cfg.n_fields))
    log = AgentLog(latency=latency)
    if 0 in snapshot_episodes:
        log.snapshots[0] = {k: params[k].copy() for k in ("lam", "sig", "alp")}
    no_noise = np.zeros((0, 3, cfg.n_fields), dtype=np.float32)
    while istate[_EPISODE] < n_episodes:
        uniforms = act_rng.random(chunk)
        normals = noise_rng.standard_normal((chunk, 3, cfg.n_fields), dtype=np.float32) if cond.noise > 0 else no_noise
        log.steps += _train_chunk(params["lam"], params["sig"], params["alp"], params["W_a"], params["w_c"],
                                  fstate, istate, etas, consts, cfg.directions, goals, cfg.episodes_per_goal,
                                  n_episodes, uniforms, normals, latency, snap_eps, snaps)
    for j, e in enumerate(snap_eps):
        log.snapshots[int(e)] = {"lam": snaps[j, 0].copy(), "sig": snaps[j, 1].copy(), "alp": snaps[j, 2].copy()}
    log.final = {k: v.copy() for k, v in params.items()}
    return log


def warm_up() -> None:
    """Compile (or load from Numba's cache) the online loop once, before seeds run in threads."""
    train_agent(Config(n_fields=2, episodes_per_goal=1), Condition("warm", True, 1e-4), 0, chunk=8)


# ----------------------------------------------------------------------------- metrics


def episodes_to_criterion(latency: np.ndarray, window: int, threshold: float) -> int:
    """Episodes needed until the mean latency of the last ``window`` episodes first drops below
    ``threshold``; ``len(latency)`` (censored) if it never does. latency: (n_episodes,)."""
    lat = np.asarray(latency, dtype=float)
    if lat.size < window:
        return int(lat.size)
    means = np.convolve(lat, np.ones(window) / window, mode="valid")   # means[j] = mean(lat[j:j+window])
    hit = np.flatnonzero(means < threshold)
    return int(hit[0] + window) if hit.size else int(lat.size)


def density_near(lam: np.ndarray, goal: float, radius: float) -> float:
    """Fraction of field centres within +-radius of the goal."""
    return float(np.mean(np.abs(np.asarray(lam) - goal) <= radius))


def pv_correlation(a: dict[str, np.ndarray], b: dict[str, np.ndarray], xs: np.ndarray) -> float:
    """Pearson correlation of the flattened population activity maps phi(xs) (official ``get_pvcorr``)."""
    pa = place_fields(a["lam"], a["sig"], a["alp"], xs).ravel()
    pb = place_fields(b["lam"], b["sig"], b["alp"], xs).ravel()
    return float(np.corrcoef(pa, pb)[0, 1])


def minimal_latency(cfg: Config, goal: float, horizon: int = 60, keep: int = 200_000) -> int:
    """Smallest official latency reachable from the start by any action sequence: breadth-first
    search over the exact dynamics (states merged to 1e-9; beyond ``keep`` states the best-rewarded
    are kept). A property of the environment alone: it tells whether a latency criterion is attainable."""
    states = np.array([[cfg.start, 0.0, 0.0]])                    # x, v, reward so far
    for step in range(1, horizon + 1):
        n = len(states)
        x, v, tot = (np.repeat(states[:, j], cfg.n_actions) for j in range(3))
        x, v, r = env_step(x, v, np.tile(np.arange(cfg.n_actions), n), goal, cfg)
        tot = tot + r
        if np.any(tot >= cfg.max_reward):
            return step - 1
        states = np.unique(np.round(np.stack([x, v, tot], 1), 9), axis=0)
        if len(states) > keep:
            states = states[np.argsort(-states[:, 2], kind="stable")[:keep]]
    return horizon


# ----------------------------------------------------------------------------- one seed


def conditions_from(config: dict[str, Any]) -> tuple[Condition, ...]:
    """The plan's conditions: fixed fields (only W_a, w_c learn), learned fields, learned + drift noise."""
    return (Condition("fixed", False), Condition("learned", True),
            Condition("learned_noise", True, float(config["drift_noise"])))


def binned(values: np.ndarray, width: int) -> list[float]:
    """Means of consecutive blocks of ``width`` values (the last block may be shorter)."""
    v = np.asarray(values, dtype=float)
    return [float(v[i:i + width].mean()) for i in range(0, len(v), width)]


def run_seed(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Fixed vs TD-learned fields (and TD-learned fields with drift noise) on one seed.

    ``config``: the model keys of :class:`Config` plus drift_noise, criterion_window,
    criterion_latency, density_radius, late_fraction, curve_bin. Returns JSON-able metrics per
    condition, binned latency curves and field snapshots (before learning, middle and end of each
    goal block).
    """
    cfg = Config.from_dict(config)
    E = cfg.episodes_per_goal
    n_goals = len(cfg.goals)
    snap_eps = tuple(sorted({0} | {k * E + E // 2 for k in range(n_goals)} | {(k + 1) * E for k in range(n_goals)}))
    window, crit = int(config["criterion_window"]), float(config["criterion_latency"])
    radius = float(config["density_radius"])
    late = max(1, int(round(float(config["late_fraction"]) * E)))
    xs = np.linspace(-cfg.env_size, cfg.env_size, 201)
    out: dict[str, Any] = {"seed": seed, "timings": {}, "steps": {}, "conditions": {}}
    for cond in conditions_from(config):
        started = time.perf_counter()
        log = train_agent(cfg, cond, seed, snap_eps)
        out["timings"][cond.name] = time.perf_counter() - started
        out["steps"][cond.name] = log.steps
        lat, snaps = log.latency, log.snapshots
        s0 = snaps[0]
        between = (s0["lam"] > cfg.start) & (s0["lam"] < cfg.goals[0])   # fields on the first run
        m: dict[str, Any] = {"latency": lat.tolist(), "curve": binned(lat, int(config["curve_bin"])), "blocks": []}
        for k, goal in enumerate(cfg.goals):
            block = lat[k * E:(k + 1) * E]
            before, mid, after = snaps[k * E], snaps[k * E + E // 2], snaps[(k + 1) * E]
            m["blocks"].append({
                "goal": goal,
                "episodes_to_criterion": episodes_to_criterion(block, window, crit),
                "mean_latency": float(block.mean()),
                "late_latency": float(block[-late:].mean()),
                "density_before": density_near(before["lam"], goal, radius),
                "density_after": density_near(after["lam"], goal, radius),
                "pv_corr_second_half": pv_correlation(mid, after, xs),
                "mean_abs_center_change_second_half": float(np.abs(after["lam"] - mid["lam"]).mean()),
            })
        end1 = snaps[E]
        m["shift_between_start_goal"] = float((end1["lam"] - s0["lam"])[between].mean())
        # phi depends on sigma**2 only: a width that crossed zero (possible without clipping, as in the
        # official default) is |sigma|
        m["width_change_between_start_goal"] = float((np.abs(end1["sig"]) - np.abs(s0["sig"]))[between].mean())
        m["negative_sigma_fraction_end"] = float(np.mean(snaps[n_goals * E]["sig"] < 0))
        m["amp_change_between_start_goal"] = float((end1["alp"] - s0["alp"])[between].mean())
        m["fields"] = {str(e): {k: np.round(v, 6).tolist() for k, v in s.items() if k in ("lam", "sig", "alp")}
                       for e, s in snaps.items()}
        out["conditions"][cond.name] = m
    return out
