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
checked against each other in the tests); ``train_agent`` drives it; ``run_seed(p, seed)`` runs the
conditions of one seed (fixed fields, learned fields, learned fields + drift noise, and the control
of fields moved by drift noise alone) and measures them, ``p`` being the flow's typed params (model, environment and metric settings).
Randomness only through ``np.random.default_rng`` streams derived from the seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from flows.placefield_td.params import Params

# ----------------------------------------------------------------------------- fixed settings

# The official environment's constants (numpy/1D/env.py); the model's settings are the flow's Params.
ENV_SIZE = 1.0                       # track [-ENV_SIZE, ENV_SIZE]
MAX_SPEED = 0.1
TAU_ACT = 0.2                        # velocity smoothing
DIRECTIONS = np.array([-1.0, 1.0])   # velocity direction of each action, left and right (official ``onehot2dirmat``)
N_ACTIONS = len(DIRECTIONS)
# No clipping of the field widths and amplitudes (official default); the compiled loop would otherwise clip
# sigma to [1e-5, SIGMA_CLIP] and alpha to [1e-5, ALPHA_CLIP].
SIGMA_CLIP = 0.0
ALPHA_CLIP = 0.0


@dataclass(frozen=True)
class Condition:
    """One agent: whether its field parameters learn, and the drift noise s.d. they receive."""

    name: str
    learn_fields: bool
    noise: float = 0.0


# ----------------------------------------------------------------------------- NumPy reference


def init_params(n: int, sigma0: float, alpha0: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Homogeneous population of ``n`` fields (official ``uniform_pc_weights``): centres evenly spaced
    over the track, widths ``sigma0``, amplitudes ``alpha0``; actor and critic weights 1e-5 N(0, 1).

    Returns lam, sig, alp (N,), W_a (N, A), w_c (N,).
    """
    return {
        "lam": np.linspace(-ENV_SIZE, ENV_SIZE, n),
        "sig": np.full(n, sigma0),
        "alp": np.full(n, alpha0),
        "W_a": 1e-5 * rng.standard_normal((n, N_ACTIONS)),
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


def env_step(x: np.ndarray, v: np.ndarray, action: np.ndarray, goal: np.ndarray | float, goal_size: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Official ``OneDimNav.step`` for arrays of agents: x, v, action (int) of shape (B,); the reward is
    a Gaussian of s.d. ``goal_size`` around ``goal``. Returns the new position, velocity and reward, each (B,)."""
    v = v + TAU_ACT * (-v + DIRECTIONS[action] * MAX_SPEED)
    x_new = x + v
    out = (x_new > ENV_SIZE) | (x_new < -ENV_SIZE)
    x_new = np.where(out, x, x_new)
    v = np.where(out, 0.0, v)
    return x_new, v, np.exp(-0.5 * ((x_new - goal) / goal_size) ** 2)


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


def train_agent(p: Params, cond: Condition, seed: int, snapshot_episodes: tuple[int, ...] = (),
                chunk: int = 4096) -> AgentLog:
    """Train one agent online for ``len(p.goals) * p.episodes_per_goal`` episodes (model and
    environment settings from ``p``: fields, rates, gamma, beta, start, goals, reward, t_max).

    The goal moves to ``p.goals[k]`` at episode ``k * episodes_per_goal``; parameters carry over.
    Streams: ``[seed, 0]`` initial weights, ``[seed, 1]`` action draws (the same for every
    condition of a seed: common random numbers), ``[seed, 2]`` drift noise.
    ``snapshot_episodes``: numbers of completed episodes at which (lam, sig, alp) are recorded.
    """
    params = init_params(p.n_fields, p.sigma0, p.alpha0, np.random.default_rng([seed, 0]))
    act_rng = np.random.default_rng([seed, 1])
    noise_rng = np.random.default_rng([seed, 2])
    learn = 1.0 if cond.learn_fields else 0.0
    etas = np.array([p.eta_center * learn, p.eta_width * learn, p.eta_amp * learn, p.eta_actor, p.eta_critic])
    consts = np.array([p.gamma, p.beta, TAU_ACT, MAX_SPEED, ENV_SIZE, p.goal_size,
                       p.max_reward, p.t_max, p.start, cond.noise, SIGMA_CLIP, ALPHA_CLIP])
    n_episodes = len(p.goals) * p.episodes_per_goal
    goals = np.asarray(p.goals, dtype=float)
    fstate = np.array([p.start, 0.0, 0.0, goals[0]])
    istate = np.zeros(2, dtype=np.int64)
    latency = np.zeros(n_episodes, dtype=np.int64)
    snap_eps = np.array(sorted(set(snapshot_episodes) - {0}), dtype=np.int64)
    snaps = np.zeros((len(snap_eps), 3, p.n_fields))
    log = AgentLog(latency=latency)
    if 0 in snapshot_episodes:
        log.snapshots[0] = {k: params[k].copy() for k in ("lam", "sig", "alp")}
    no_noise = np.zeros((0, 3, p.n_fields), dtype=np.float32)
    while istate[_EPISODE] < n_episodes:
        uniforms = act_rng.random(chunk)
        normals = noise_rng.standard_normal((chunk, 3, p.n_fields), dtype=np.float32) if cond.noise > 0 else no_noise
        log.steps += _train_chunk(params["lam"], params["sig"], params["alp"], params["W_a"], params["w_c"],
                                  fstate, istate, etas, consts, DIRECTIONS, goals, p.episodes_per_goal,
                                  n_episodes, uniforms, normals, latency, snap_eps, snaps)
    for j, e in enumerate(snap_eps):
        log.snapshots[int(e)] = {"lam": snaps[j, 0].copy(), "sig": snaps[j, 1].copy(), "alp": snaps[j, 2].copy()}
    log.final = {k: v.copy() for k, v in params.items()}
    return log


def warm_up(p: Params) -> None:
    """Compile (or load from Numba's cache) the online loop once, before seeds run in threads: a tiny
    agent (2 fields, one episode per goal) with ``p``'s other settings; the argument types are the run's."""
    tiny = p.model_copy(update={"n_fields": 2, "episodes_per_goal": 1})
    train_agent(tiny, Condition("warm", True, 1e-4), 0, chunk=8)


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


def minimal_latency(start: float, goal: float, goal_size: float, max_reward: float, horizon: int = 60,
                    keep: int = 200_000) -> int:
    """Smallest official latency reachable from ``start`` by any action sequence (the episode ends once
    ``max_reward`` is collected): breadth-first search over the exact dynamics (states merged to 1e-9;
    beyond ``keep`` states the best-rewarded are kept). A property of the environment alone: it tells
    whether a latency criterion is attainable."""
    states = np.array([[start, 0.0, 0.0]])                        # x, v, reward so far
    for step in range(1, horizon + 1):
        n = len(states)
        x, v, tot = (np.repeat(states[:, j], N_ACTIONS) for j in range(3))
        x, v, r = env_step(x, v, np.tile(np.arange(N_ACTIONS), n), goal, goal_size)
        tot = tot + r
        if np.any(tot >= max_reward):
            return step - 1
        states = np.unique(np.round(np.stack([x, v, tot], 1), 9), axis=0)
        if len(states) > keep:
            states = states[np.argsort(-states[:, 2], kind="stable")[:keep]]
    return horizon


def minimal_latencies(p: Params) -> list[int]:
    """:func:`minimal_latency` for each of ``p.goals`` (from ``p.start``, with ``p.goal_size`` and ``p.max_reward``)."""
    return [minimal_latency(p.start, g, p.goal_size, p.max_reward) for g in p.goals]


# ----------------------------------------------------------------------------- one seed


def conditions_from(drift_noise: float) -> tuple[Condition, ...]:
    """The plan's conditions: fixed fields (only W_a, w_c learn), learned fields, learned + drift noise; and
    the negative control ``drift_only``: fields that move by the drift noise alone, not by the TD error
    (field rates zero). It tells whether moving fields at all, rather than moving them by the TD error,
    is what a check detects."""
    return (Condition("fixed", False), Condition("learned", True), Condition("learned_noise", True, drift_noise),
            Condition("drift_only", False, drift_noise))


def binned(values: np.ndarray, width: int) -> list[float]:
    """Means of consecutive blocks of ``width`` values (the last block may be shorter)."""
    v = np.asarray(values, dtype=float)
    return [float(v[i:i + width].mean()) for i in range(0, len(v), width)]


def run_seed(p: Params, seed: int) -> dict[str, Any]:
    """Fixed vs TD-learned fields (and TD-learned fields with drift noise ``p.drift_noise``, and fields moved
    by that noise alone) on one seed.

    Besides the model settings :func:`train_agent` reads, the metrics read p.criterion_window,
    p.criterion_latency, p.density_radius, p.late_fraction and p.curve_bin. Returns JSON-able metrics
    per condition, binned latency curves and field snapshots (before learning, middle and end of each
    goal block).
    """
    E = p.episodes_per_goal
    n_goals = len(p.goals)
    snap_eps = tuple(sorted({0} | {k * E + E // 2 for k in range(n_goals)} | {(k + 1) * E for k in range(n_goals)}))
    late = max(1, int(round(p.late_fraction * E)))
    xs = np.linspace(-ENV_SIZE, ENV_SIZE, 201)
    out: dict[str, Any] = {"seed": seed, "timings": {}, "steps": {}, "conditions": {}}
    for cond in conditions_from(p.drift_noise):
        started = time.perf_counter()
        log = train_agent(p, cond, seed, snap_eps)
        out["timings"][cond.name] = time.perf_counter() - started
        out["steps"][cond.name] = log.steps
        lat, snaps = log.latency, log.snapshots
        s0 = snaps[0]
        between = (s0["lam"] > p.start) & (s0["lam"] < p.goals[0])   # fields on the first run
        m: dict[str, Any] = {"latency": lat.tolist(), "curve": binned(lat, p.curve_bin), "blocks": []}
        for k, goal in enumerate(p.goals):
            block = lat[k * E:(k + 1) * E]
            before, mid, after = snaps[k * E], snaps[k * E + E // 2], snaps[(k + 1) * E]
            other = p.goals[(k + 1) % n_goals]       # a location on the track that is not rewarded in this block
            m["blocks"].append({
                "goal": goal,
                "other_location": other,
                "episodes_to_criterion": episodes_to_criterion(block, p.criterion_window, p.criterion_latency),
                "mean_latency": float(block.mean()),
                "late_latency": float(block[-late:].mean()),
                "early_latency": float(block[:late].mean()),
                "density_before": density_near(before["lam"], goal, p.density_radius),
                "density_after": density_near(after["lam"], goal, p.density_radius),
                "density_other_before": density_near(before["lam"], other, p.density_radius),
                "density_other_after": density_near(after["lam"], other, p.density_radius),
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
