"""BLAE: batched linear bandit with arm elimination and regularized G-optimal design
(Yu & Oh, "Optimal and Practical Batched Linear Bandit Algorithm", ICML 2025), plain NumPy + SciPy.

Problem. K fixed arms x_1..x_K in R^d (``X``, shape (K, d)), unknown theta (d,); pulling arm a gives
reward x_a . theta + sigma * N(0, 1). The learner may change its policy only between batches:
the pulls of a batch are decided before any of its rewards is seen. Regret (pseudo-regret, as in
the official E4 code) = sum_t (max_a x_a . theta - x_{a_t} . theta) = sum_a n_a * gap_a.

Because rewards enter every method here only through per-arm sums within a batch, a batch that
pulls arm a n_a times draws its reward sum as n_a * mu_a + sigma * sqrt(n_a) * N(0, 1) -- the same
distribution as n_a separate draws, at O(K) cost whatever T is. Only the sequential reference
(LinUCB) simulates every round.

Methods (``run_method``):

* **BLAE** (the paper): batch grid T_l = ceil(T^(1 - 2^-l)), l = 1..L, L = ceil(log2 log2 T) + 1,
  the last batch runs to T. In batch l, on the active set A_l: a regularized G-optimal design
  pi_l (Frank-Wolfe, :func:`g_optimal_design`, regulariser lambda / T_l), each active arm pulled
  ceil(pi_l(a) T_l) times; ridge estimate theta_l from this batch's data only (regulariser lambda);
  eliminate x if max_{y in A_l} theta_l . (y - x) > 2 eps_l,
  eps_l = (sigma sqrt(min(log(K T), d log T)) + sqrt(lambda) S) * max_{x in A_l} ||x||_{V_l^-1}
  (= sqrt(d log(KT) / T_l) up to the ridge-bias term when the design value is d; S bounds ||theta||).
* **E4** (Ren, Jin & Xu, ICML 2024; reimplemented after panxulab/optimal-batched-linear-bandits):
  explore (G-optimal design, ~2 sqrt(T) pulls), estimate, solve the optimal allocation
  min_w sum_x w_x gap_x s.t. ||x - x*||^2_{H(w)^-1} <= gap_x^2 / 2 with the estimated gaps, pull
  w * alpha * log T, Chernoff stopping test -> commit; otherwise phased elimination.
* **Phased elimination** with the *unregularized* G-optimal design (Esfandiari et al. 2021;
  Lattimore & Szepesvari 2020, the official code's ``PhaElimD``): batches of T^(1 - 2^-l) pulls
  (times 2 g / d, as the official code), ridge on all data so far, eps = sqrt(d log(K T^2) / n).
* **rs-OFUL**: rarely-switching OFUL as in the official code: a new batch when det(V) grew by (1 + C);
  the UCB arm of the batch start is pulled for the whole batch (batch length in closed form).
* **LinUCB** (OFUL, fully sequential; the unbatched reference), vectorised over seeds.

Randomness only through ``np.random.default_rng`` streams keyed by (seed, instance, T, method), so a
seed's results do not depend on what else runs. Shapes are in the docstrings.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from flows.blae_bandit.params import Params

BATCHED_METHODS = ("blae", "e4", "phased_elim", "rs_oful")
SEQUENTIAL_METHODS = ("linucb",)
CONTROL_METHODS = ("blae_no_elim",)      # the negative control: BLAE's designs and batches, no arm ever eliminated
METHODS = BATCHED_METHODS + SEQUENTIAL_METHODS + CONTROL_METHODS   # appended last: the streams' ids stay
METHOD_ID = {name: i for i, name in enumerate(METHODS)}


# --------------------------------------------------------------------------------------------
# Instances
# --------------------------------------------------------------------------------------------
def random_instance(K: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The E4 code's random instance: theta = e_1, arms ~ U[0, 1]^d, arm 0 = theta (the best arm).

    Returns ``X`` (K, d) and ``theta`` (d,)."""
    theta = np.zeros(d)
    theta[0] = 1.0
    X = rng.uniform(0.0, 1.0, size=(K, d))
    X[0] = theta
    return X, theta


def end_of_optimism_instance(eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Lattimore & Szepesvari's End-of-Optimism instance (d = 2, K = 3): theta = e_1, arms e_1,
    (1 - eps, 2 eps), e_2. The informative arm e_2 has a large gap; optimism never pulls it."""
    X = np.array([[1.0, 0.0], [1.0 - eps, 2.0 * eps], [0.0, 1.0]])
    return X, np.array([1.0, 0.0])


# --------------------------------------------------------------------------------------------
# Batch grid
# --------------------------------------------------------------------------------------------
def num_batches(T: int) -> int:
    """L = ceil(log2 log2 T) + 1 (T >= 3): the number of batches of BLAE's grid."""
    if T < 3:
        raise ValueError("the batch grid needs T >= 3")
    return int(math.ceil(math.log2(math.log2(T)) - 1e-12)) + 1


def batch_grid(T: int) -> list[int]:
    """[T_1, ..., T_L] with T_l = ceil(T^(1 - 2^-l)) (the design's pull budget of batch l; the
    last batch is run to T whatever T_L is)."""
    return [int(math.ceil(T ** (1.0 - 2.0 ** -l) - 1e-9)) for l in range(1, num_batches(T) + 1)]


def batch_bound(T: int) -> int:
    """The plan's check: BLAE uses at most ceil(log2 log2 T) + 2 batches."""
    return num_batches(T) + 1


# --------------------------------------------------------------------------------------------
# (Regularized) G-optimal design by Frank-Wolfe
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Design:
    pi: np.ndarray     # (K,) weights on the simplex
    g_max: float       # max_a ||x_a||^2_{(A(pi) + lam I)^-1}: the G-criterion value
    d_eff: float       # tr((A(pi) + lam I)^-1 A(pi)) = sum_a pi_a ||x_a||^2 (<= d; = rank when lam = 0)
    iterations: int


def design_matrix(X: np.ndarray, pi: np.ndarray, lam: float = 0.0) -> np.ndarray:
    """A(pi) + lam I = sum_a pi_a x_a x_a^T + lam I, shape (d, d)."""
    return X.T @ (pi[:, None] * X) + lam * np.eye(X.shape[1])


def g_value(X: np.ndarray, pi: np.ndarray, lam: float = 0.0) -> float:
    """max_a ||x_a||^2_{(A(pi) + lam I)^-1} (pseudo-inverse when lam = 0 and A(pi) is singular)."""
    M = design_matrix(X, pi, lam)
    Minv = np.linalg.pinv(M, hermitian=True) if lam == 0 else np.linalg.inv(M)
    return float(np.max(np.einsum("kd,de,ke->k", X, Minv, X)))


def _line_search(m: np.ndarray, v2: np.ndarray, lam: float, sign: int, gamma_max: float, stages: int = 3) -> float:
    """argmax_{0<=g<=gamma_max} log det((1 - s g) M + s g lam I + s g x x^T), s = sign (+1: toward
    vertex x, -1: away from it), given M = Q diag(m) Q^T and v2 = (Q^T x)^2. Concave in g, so a
    33-point grid search refined ``stages`` times (each 16x finer; 3 stages: precision ~1e-4 gamma_max)."""
    lo, hi = 0.0, gamma_max
    best = 0.0
    for _ in range(stages):
        g = np.linspace(lo, hi, 33)
        n = (1.0 - sign * g)[:, None] * m + (sign * g * lam)[:, None]          # (33, d)
        with np.errstate(divide="ignore", invalid="ignore"):
            inner = 1.0 + sign * g * (v2 / n).sum(axis=1)
            val = np.log(np.where(n > 0, n, np.nan)).sum(axis=1) + np.log(np.where(inner > 0, inner, np.nan))
        val = np.where(np.isnan(val), -np.inf, val)
        i = int(np.argmax(val))
        best = float(g[i])
        step = (hi - lo) / 32
        lo, hi = max(lo, best - step), min(hi, best + step)
    return best


def g_optimal_design(X: np.ndarray, lam: float = 0.0, tol: float = 1e-3, max_iter: int = 20000) -> Design:
    """Regularized G-optimal design on the arms ``X`` (K, d) by Frank-Wolfe with away steps.

    Maximises f(pi) = log det(A(pi) + lam I), A(pi) = sum_a pi_a x_a x_a^T, over the simplex
    (Kiefer-Wolfowitz: for lam = 0 its maximiser is G-optimal, max_a ||x_a||^2_{A(pi)^-1} = rank(X)).
    The gradient is df/dpi_a = ||x_a||^2_{M^-1} (M = A(pi) + lam I) and the Frank-Wolfe gap is
    g_max - d_eff, d_eff = sum_a pi_a ||x_a||^2_{M^-1} = tr(M^-1 A(pi)) <= d; at the maximiser
    g_max = d_eff, so the regularized design satisfies max_a ||x_a||^2 <= d_eff <= d.
    Stops when g_max <= (1 + tol) d_eff. Starts from the uniform design; exact (grid) line search;
    away steps drop arms, so the design is sparse. With lam = 0 the arms are first projected on
    their span (a rank-r set gets g_max = r)."""
    X = np.asarray(X, dtype=float)
    K, d = X.shape
    if lam == 0.0:
        _, s, Vt = np.linalg.svd(X, full_matrices=False)
        r = int(np.sum(s > 1e-10 * max(s[0], 1e-300)))
        if r == 0:
            raise ValueError("all arms are zero")
        X = X @ Vt[:r].T
        d = r
    pi = np.full(K, 1.0 / K)
    M = design_matrix(X, pi, lam)
    eye = np.eye(d)
    stages = 3 + max(0, math.ceil(math.log(1e-3 / tol, 16)))          # finer line search for tighter tol
    it = 0
    for it in range(1, max_iter + 1):
        m, Q = np.linalg.eigh(M)
        XQ = X @ Q
        norms = (XQ * XQ / m).sum(axis=1)
        d_eff = float(pi @ norms)
        a = int(np.argmax(norms))
        g_max = float(norms[a])
        if g_max <= (1.0 + tol) * d_eff:
            break
        support = np.flatnonzero(pi > 0)
        b = int(support[np.argmin(norms[support])])
        if g_max - d_eff >= d_eff - norms[b] or pi[b] >= 1.0:       # toward step
            gamma = _line_search(m, XQ[a] ** 2, lam, +1, 1.0, stages)
            pi *= 1.0 - gamma
            pi[a] += gamma
            M = (1.0 - gamma) * M + gamma * (np.outer(X[a], X[a]) + lam * eye)
        else:                                                       # away step
            gamma_max = pi[b] / (1.0 - pi[b])
            gamma = _line_search(m, XQ[b] ** 2, lam, -1, gamma_max, stages)
            pi *= 1.0 + gamma
            pi[b] -= gamma
            if gamma >= gamma_max:
                pi[b] = 0.0
            M = (1.0 + gamma) * M - gamma * (np.outer(X[b], X[b]) + lam * eye)
        if it % 50 == 0:                                            # no drift in M
            pi = np.maximum(pi, 0.0)
            pi /= pi.sum()
            M = design_matrix(X, pi, lam)
    return Design(pi=pi, g_max=g_max, d_eff=d_eff, iterations=it)


def round_counts(pi: np.ndarray, n: float, cap: int) -> np.ndarray:
    """ceil(pi_a * n) pulls per arm (int64, shape (K,)); if that exceeds ``cap`` (the rounds left),
    floor(pi_a * cap) plus the largest remainders, so the counts sum to exactly ``cap``."""
    counts = np.ceil(pi * n - 1e-9).astype(np.int64)
    counts[pi <= 0] = 0
    if counts.sum() <= cap:
        return counts
    raw = pi * cap
    counts = np.floor(raw).astype(np.int64)
    left = cap - int(counts.sum())
    if left > 0:
        order = np.argsort(-(raw - counts), kind="stable")
        counts[order[:left]] += 1
    return counts


# --------------------------------------------------------------------------------------------
# Bookkeeping: pulls, rewards and pseudo-regret of one run
# --------------------------------------------------------------------------------------------
@dataclass
class Ledger:
    """Everything one run pulls. ``X`` (K, d), ``theta`` (d,). A batch is one call of :meth:`pull`
    with at least one pull; ``curve`` holds (t, cumulative regret) at every batch end."""

    X: np.ndarray
    theta: np.ndarray
    T: int
    sigma: float
    rng: np.random.Generator
    t: int = 0
    regret: float = 0.0
    batches: int = 0
    pulls: np.ndarray = field(init=False)
    curve: list = field(init=False)
    info: dict = field(default_factory=dict)   # method-specific facts: arms left, E4's Chernoff stop

    def __post_init__(self):
        self.mu = self.X @ self.theta
        self.gaps = self.mu.max() - self.mu
        self.pulls = np.zeros(len(self.X), dtype=np.int64)
        self.curve = [(0, 0.0)]

    @property
    def remaining(self) -> int:
        return self.T - self.t

    def pull(self, arms: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Pull arm ``arms[i]`` ``counts[i]`` times in one batch; returns the per-arm reward sums (len(arms),)."""
        arms, counts = np.asarray(arms), np.asarray(counts, dtype=np.int64)
        n = int(counts.sum())
        if n > self.remaining or np.any(counts < 0):
            raise ValueError(f"batch of {n} pulls with {self.remaining} rounds left")
        z = self.rng.standard_normal(len(arms))
        sums = counts * self.mu[arms] + self.sigma * np.sqrt(counts) * z
        if n > 0:
            np.add.at(self.pulls, arms, counts)
            self.regret += float(counts @ self.gaps[arms])
            self.t += n
            self.batches += 1
            self.curve.append((self.t, self.regret))
        return sums

    def commit(self, arm: int) -> None:
        """The rest of the horizon on one arm, as one batch."""
        if self.remaining > 0:
            self.pull(np.array([arm]), np.array([self.remaining]))

    def result(self, name: str, seconds: float) -> dict:
        return {"method": name, "regret": self.regret, "batches": self.batches, "seconds": seconds,
                "pulls": self.pulls.tolist(), "curve": [list(p) for p in self.curve], **self.info}


def ridge_from_counts(X: np.ndarray, counts: np.ndarray, reward_sums: np.ndarray,
                      lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Ridge estimate from per-arm counts (K,) and reward sums (K,) of arms ``X`` (K, d):
    V = sum_a n_a x_a x_a^T + lam I, theta = V^-1 sum_a x_a R_a. Returns (theta (d,), V^-1 (d, d))."""
    V = X.T @ (counts[:, None] * X) + lam * np.eye(X.shape[1])
    Vinv = np.linalg.inv(V)
    return Vinv @ (X.T @ reward_sums), Vinv


# --------------------------------------------------------------------------------------------
# BLAE
# --------------------------------------------------------------------------------------------
def blae(X: np.ndarray, theta: np.ndarray, T: int, rng: np.random.Generator, *, sigma: float = 1.0,
         lam: float = 1.0, S: float = 1.0, fw_tol: float = 1e-3, eliminate: bool = True) -> Ledger:
    """BLAE on arms ``X`` (K, d) with parameter ``theta`` (d,) over T rounds (see the module doc).
    ``eliminate=False`` is the ablation used as a negative control: the same batch grid and regularized
    designs, but every arm stays active, so the run explores to T (pure exploration)."""
    K, d = X.shape
    led = Ledger(X, theta, T, sigma, rng)
    grid = batch_grid(T)
    L = len(grid)
    beta = sigma * math.sqrt(min(math.log(K * T), d * math.log(T))) + math.sqrt(lam) * S
    active = np.arange(K)
    for l in range(1, L + 1):
        if led.remaining <= 0:
            break
        if active.size == 1:
            led.commit(int(active[0]))
            break
        T_l = grid[l - 1]
        design = g_optimal_design(X[active], lam / T_l, fw_tol)
        n_target = led.remaining if l == L else T_l                   # the last batch runs to T
        counts = round_counts(design.pi, n_target, led.remaining)
        if l == L and counts.sum() < led.remaining:                   # (rounding) fill the horizon
            counts[int(np.argmax(design.pi))] += led.remaining - int(counts.sum())
        sums = led.pull(active, counts)
        if l == L or led.remaining <= 0:
            break
        if not eliminate:                                             # the ablation: no arm is ever dropped
            continue
        theta_l, Vinv = ridge_from_counts(X[active], counts, sums, lam)   # this batch's data only
        width = math.sqrt(float(np.max(np.einsum("kd,de,ke->k", X[active], Vinv, X[active]))))
        eps = beta * width
        est = X[active] @ theta_l
        active = active[est.max() - est <= 2.0 * eps]
    if led.remaining > 0:                                             # horizon left after L batches
        led.commit(int(active[0]))
    led.info["arms_left"] = int(active.size)
    return led


# --------------------------------------------------------------------------------------------
# Phased elimination with the unregularized G-optimal design (the official code's PhaElimD)
# --------------------------------------------------------------------------------------------
class _CumulativeRidge:
    """Ridge regression on all data so far: V = lam I + sum n_a x_a x_a^T, b = sum x_a R_a."""

    def __init__(self, d: int, lam: float):
        self.V = lam * np.eye(d)
        self.b = np.zeros(d)

    def add(self, Xa: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> None:
        self.V += Xa.T @ (counts[:, None] * Xa)
        self.b += Xa.T @ sums

    def theta(self) -> np.ndarray:
        return np.linalg.solve(self.V, self.b)


def _design_batch(led: Ledger, ridge: _CumulativeRidge, active: np.ndarray, n: float, fw_tol: float) -> None:
    """One batch of the official code's pull_arms_D_optimal_design: ceil(2 pi_a g n / d) pulls."""
    design = g_optimal_design(led.X[active], 0.0, fw_tol)
    d = led.X.shape[1]
    counts = round_counts(design.pi, 2.0 * design.g_max * n / d, led.remaining)
    sums = led.pull(active, counts)
    ridge.add(led.X[active], counts, sums)


def _eliminate(X: np.ndarray, active: np.ndarray, theta_hat: np.ndarray, eps: float) -> np.ndarray:
    est = X[active] @ theta_hat
    return active[est > est.max() - 2.0 * eps]


def _design_and_eliminate(led: "Ledger", ridge: "_CumulativeRidge", X: np.ndarray, active: np.ndarray,
                          n: float, T: int, fw_tol: float) -> np.ndarray:
    """One phased-elimination batch of about n pulls over ``active``: design, pull, then drop the arms
    eps = sqrt(d log(K T^2) / n) worse than the best estimate. Returns the arms left."""
    K, d = X.shape
    _design_batch(led, ridge, active, n, fw_tol)
    return _eliminate(X, active, ridge.theta(), math.sqrt(d * math.log(K * T ** 2) / n))


def _phase_out(led: "Ledger", ridge: "_CumulativeRidge", X: np.ndarray, active: np.ndarray, T: int,
               fw_tol: float) -> "Ledger":
    """Batches of n_l = T^(1 - 2^-l), l = 1, 2, ..., until one arm is left or the horizon is spent;
    the rest of the horizon goes to the first arm left."""
    l = 1
    while active.size > 1 and led.remaining > 0:
        active = _design_and_eliminate(led, ridge, X, active, T ** (1.0 - 2.0 ** -l), T, fw_tol)
        l += 1
    led.commit(int(active[0]))
    led.info["arms_left"] = int(active.size)
    return led


def phased_elimination(X: np.ndarray, theta: np.ndarray, T: int, rng: np.random.Generator, *,
                       sigma: float = 1.0, lam: float = 1.0, fw_tol: float = 1e-3) -> Ledger:
    """Batched phased elimination: batch l uses n_l = T^(1 - 2^-l), eps_l = sqrt(d log(K T^2) / n_l)."""
    K, d = X.shape
    led = Ledger(X, theta, T, sigma, rng)
    ridge = _CumulativeRidge(d, lam)
    return _phase_out(led, ridge, X, np.arange(K), T, fw_tol)


# --------------------------------------------------------------------------------------------
# E4: Explore, Estimate, Eliminate, Exploit
# --------------------------------------------------------------------------------------------
def transductive_design(Z: np.ndarray, Y: np.ndarray, iters_per_stage: int = 100,
                        stages: tuple[float, ...] = (10.0, 100.0, 1000.0)) -> tuple[np.ndarray, float]:
    """min over the simplex of max_k ||y_k||^2_{A(pi)^+}, A(pi) = sum_j pi_j z_j z_j^T (design points
    ``Z`` (m, d), targets ``Y`` (n, d) in the span of Z). Returns (pi (m,), value).

    The max is smoothed, F(pi) = log sum_k exp(b f_k(pi)) / b with b = b0 / (current max), b0 raised
    over ``stages``; each stage runs Frank-Wolfe with away steps and a grid line search on F. Every
    step is a rank-one change of A, so f_k along it is in closed form (Sherman-Morrison):
    toward z: f_k((1-g) A + g z z^T) = (f_k - s c_k^2 / (1 + s q)) / (1 - g), s = g / (1 - g);
    away:     f_k((1+g) A - g z z^T) = (f_k + s c_k^2 / (1 - s q)) / (1 + g), s = g / (1 + g),
    c_k = z^T A^-1 y_k, q = z^T A^-1 z. The best iterate (true max) is returned. Like the official
    code's SCS solve (eps = 1e-2), an approximate solution (within a few per cent in the tests)."""
    _, sv, Vt = np.linalg.svd(Z, full_matrices=False)
    r = int(np.sum(sv > 1e-10 * max(sv[0], 1e-300)))
    Z, Y = Z @ Vt[:r].T, Y @ Vt[:r].T
    m = len(Z)
    pi = np.full(m, 1.0 / m)
    Ainv = np.linalg.inv(Z.T @ (pi[:, None] * Z))
    best_pi, best_val = pi.copy(), float("inf")
    unit = np.linspace(0.0, 1.0, 41)[1:]

    def smooth(fk, b):                                     # (..., n) -> (...,)
        top = fk.max(axis=-1, keepdims=True)
        return top[..., 0] + np.log(np.exp(b * (fk - top)).sum(axis=-1)) / b

    for b0 in stages:
        for it in range(iters_per_stage):
            if it % 25 == 0:
                Ainv = np.linalg.inv(Z.T @ (pi[:, None] * Z))
            f = np.einsum("kd,de,ke->k", Y, Ainv, Y)
            val = float(f.max())
            if val < best_val:
                best_pi, best_val = pi.copy(), val
            b = b0 / val
            p = np.exp(b * (f - val))
            p /= p.sum()
            C2 = (Z @ Ainv @ Y.T) ** 2                                     # (m, n)
            grad = -(C2 @ p)                                               # dF/dpi_j
            q = np.einsum("jd,de,je->j", Z, Ainv, Z)
            j = int(np.argmin(grad))
            supp = np.flatnonzero(pi > 0)
            a = int(supp[np.argmax(grad[supp])])
            toward_gap, away_gap = float(pi @ grad - grad[j]), float(grad[a] - pi @ grad)
            if max(toward_gap, away_gap) <= 1e-6 * val:
                break
            F0 = smooth(f, b)
            if toward_gap >= away_gap or pi[a] >= 1.0:
                g = unit * 0.999
                s = g / (1.0 - g)
                fk = (f[None] - s[:, None] * C2[j][None] / (1.0 + s[:, None] * q[j])) / (1.0 - g)[:, None]
                Fg = smooth(fk, b)
                i = int(np.argmin(Fg))
                if Fg[i] >= F0:
                    g2 = unit * g[0]                                       # finer steps near 0
                    s2 = g2 / (1.0 - g2)
                    fk = (f[None] - s2[:, None] * C2[j][None] / (1.0 + s2[:, None] * q[j])) / (1.0 - g2)[:, None]
                    Fg, g = smooth(fk, b), g2
                    i = int(np.argmin(Fg))
                    if Fg[i] >= F0:
                        continue
                gam, z = float(g[i]), Z[j]
                pi *= 1.0 - gam
                pi[j] += gam
                u = Ainv @ z
                sg = gam / (1.0 - gam)
                Ainv = (Ainv - sg * np.outer(u, u) / (1.0 + sg * (z @ u))) / (1.0 - gam)
            else:
                gmax = pi[a] / (1.0 - pi[a])
                g = unit * gmax
                s = g / (1.0 + g)
                den = 1.0 - s * q[a]
                ok = den > 1e-12
                fk = (f[None] + s[:, None] * C2[a][None] / np.where(ok, den, 1.0)[:, None]) / (1.0 + g)[:, None]
                Fg = np.where(ok, smooth(fk, b), np.inf)
                i = int(np.argmin(Fg))
                if Fg[i] >= F0:
                    continue
                gam, z = float(g[i]), Z[a]
                pi *= 1.0 + gam
                pi[a] -= gam
                if i == len(g) - 1:
                    pi[a] = 0.0
                u = Ainv @ z
                sg = gam / (1.0 + gam)
                Ainv = (Ainv + sg * np.outer(u, u) / (1.0 - sg * (z @ u))) / (1.0 + gam)
    f = np.einsum("kd,de,ke->k", Y, np.linalg.pinv(Z.T @ (pi[:, None] * Z)), Y)
    if float(f.max()) < best_val:
        best_pi, best_val = pi.copy(), float(f.max())
    return best_pi, best_val


def e4_allocation(X: np.ndarray, theta_hat: np.ndarray, gap_floor: float) -> np.ndarray:
    """The optimal allocation of the asymptotic lower bound with the estimated gaps, w (K,):
    min_w sum_x w_x gap_x  s.t.  ||x - x*||^2_{H(w)^-1} <= gap_x^2 / 2 (x != x*), w >= 0,
    H(w) = sum_x w_x x x^T, x* the empirically best arm, gaps floored at ``gap_floor``.

    x* costs nothing, so its weight is unbounded (w[x*] = inf; the batch caps it) and the constraints
    live in the complement of x*: with P the projection on it, w_x = v_x / gap_x and z_x = P x / sqrt(gap_x)
    the problem is min sum v s.t. ||P x / sqrt(gap_x^2/2)||^2_{(sum v_x z_x z_x^T)^+} <= 1, i.e. by
    homogeneity v = rho pi with (pi, rho) the transductive G-optimal design of :func:`transductive_design`."""
    K, d = X.shape
    est = X @ theta_hat
    best = int(np.argmax(est))
    others = np.array([k for k in range(K) if k != best])
    gaps = np.maximum(est[best] - est, gap_floor)
    xs = X[best]
    P = np.eye(d) - np.outer(xs, xs) / max(float(xs @ xs), 1e-300)
    PX = X[others] @ P
    w = np.full(K, np.inf)
    if np.all(np.abs(PX) < 1e-12):                                        # every arm parallel to x*
        w[others] = 0.0
        return w
    Z = PX / np.sqrt(gaps[others])[:, None]
    Y = PX / np.sqrt(gaps[others] ** 2 / 2.0)[:, None]
    pi, rho = transductive_design(Z, Y)
    w[others] = rho * pi / gaps[others]
    return w


def e4(X: np.ndarray, theta: np.ndarray, T: int, rng: np.random.Generator, *, sigma: float = 1.0,
       lam: float = 1.0, gamma: float = 10.0, fw_tol: float = 1e-3) -> Ledger:
    """E4 with the official code's constants (E3TC class): batch 1 explores with the G-optimal design
    (n = sqrt(T)); batch 2 pulls min(w alpha log T, min(log(T)^(1+gamma), T/(2K))) by the optimal
    allocation w, alpha = 1 + d (log log T)^4 / log T; Chernoff stopping: commit to the empirical best
    arm if min_x gap_x^2 / (2 ||x - x*||^2_{V^-1}) > log(t^(d/2) T) / 2. Otherwise batch 3 explores with
    n = log(T)^(1+gamma) and batches 4.. run phased elimination with n_l = T^(1 - 2^-l), l = 1, 2, ...
    (elimination eps = sqrt(d log(K T^2) / n)); the remaining arm is committed to."""
    K, d = X.shape
    led = Ledger(X, theta, T, sigma, rng)
    ridge = _CumulativeRidge(d, lam)
    active = np.arange(K)
    logT = math.log(T)
    _design_batch(led, ridge, active, math.sqrt(T), fw_tol)                        # batch 1: explore
    if led.remaining > 0:                                                          # batch 2: allocation
        w = e4_allocation(X, ridge.theta(), gap_floor=1.0 / math.sqrt(T))
        alpha = 1.0 + d * math.log(logT) ** 4 / logT
        cap = min(logT ** (1.0 + gamma), T / (2.0 * K))
        counts = np.ceil(np.minimum(w * alpha * logT, cap) - 1e-9).astype(np.int64)
        if counts.sum() > led.remaining:
            counts = round_counts(counts / counts.sum(), led.remaining, led.remaining)
        sums = led.pull(active, counts)
        ridge.add(X, counts, sums)
    theta_hat = ridge.theta()
    est = X @ theta_hat
    best = int(np.argmax(est))
    Vinv = np.linalg.inv(ridge.V)
    Y = X - X[best]
    others = np.arange(K) != best
    Z = float(np.min((est[best] - est[others]) ** 2 / (2.0 * np.einsum("kd,de,ke->k", Y[others], Vinv, Y[others]))))
    led.info["chernoff_stop"] = bool(Z > 0.5 * math.log(max(led.t, 1) ** (d / 2.0) * T))
    if led.info["chernoff_stop"]:                                                  # Chernoff stop: exploit
        led.commit(best)
        led.info["arms_left"] = 1
        return led
    if led.remaining > 0:                                                          # batch 3
        active = _design_and_eliminate(led, ridge, X, active, logT ** (1.0 + gamma), T, fw_tol)
    return _phase_out(led, ridge, X, active, T, fw_tol)                            # batches 4, 5, ...


# --------------------------------------------------------------------------------------------
# Rarely-switching OFUL (batched) and LinUCB (sequential)
# --------------------------------------------------------------------------------------------
def rs_oful_batch_length(q: float, C: float) -> int:
    """Pulls of one rs-OFUL batch: the official loop pulls the batch's arm x while
    det(V_now) <= (1 + C) det(V_start); after n pulls det(V_now) / det(V_start) = 1 + n q,
    q = x^T V_start^-1 x (matrix determinant lemma), so it pulls floor(C / q) + 1 times."""
    return int(math.floor(C / q)) + 1


def rs_oful(X: np.ndarray, theta: np.ndarray, T: int, rng: np.random.Generator, *, sigma: float = 1.0,
            lam: float = 1.0, C: float = 0.5) -> Ledger:
    """Rarely-switching OFUL with the official code's confidence width
    nu_t = max(sqrt(128 d log t), 8/3 log t) (nu = 1 before the first pull)."""
    K, d = X.shape
    led = Ledger(X, theta, T, sigma, rng)
    ridge = _CumulativeRidge(d, lam)
    while led.remaining > 0:
        Vinv = np.linalg.inv(ridge.V)
        t = led.t
        nu = 1.0 if t == 0 else max(math.sqrt(128.0 * d * math.log(t)), 8.0 / 3.0 * math.log(t))
        norms = np.einsum("kd,de,ke->k", X, Vinv, X)
        a = int(np.argmax(X @ (Vinv @ ridge.b) + nu * np.sqrt(norms)))
        n = min(rs_oful_batch_length(float(norms[a]), C), led.remaining)
        counts = np.array([n])
        sums = led.pull(np.array([a]), counts)
        ridge.add(X[a:a + 1], counts, sums)
    return led


def linucb_many(Xs: np.ndarray, theta: np.ndarray, T: int, noise: np.ndarray, *, sigma: float = 1.0,
                lam: float = 1.0, S: float = 1.0, delta: float | None = None,
                checkpoints: tuple[int, ...] = ()) -> dict:
    """Fully sequential LinUCB (OFUL) on R independent runs at once.

    ``Xs`` (R, K, d) arms of each run, ``theta`` (d,), ``noise`` (R, T) standard normals of each run.
    Pulls argmax_a x_a . theta_t + beta_t ||x_a||_{V_t^-1} with the ridge estimate theta_t (regulariser
    lam) and radius beta_t = sigma sqrt(2 log(1/delta) + d log(1 + t / (lam d))) + sqrt(lam) S, delta = 1/T.
    V^-1, the estimates x . theta_t and the norms are updated by rank-one (recursive least squares)
    steps and recomputed every 1,000 rounds. Returns {"regret": (R,), "at": {t: (R,)} for the
    ``checkpoints``, "curve_t": (n,), "curve": (R, n)} (curve every T/100 rounds)."""
    R, K, d = Xs.shape
    delta = 1.0 / T if delta is None else delta
    mu = Xs @ theta                                          # (R, K)
    gaps = mu.max(axis=1, keepdims=True) - mu
    Vinv = np.repeat(np.eye(d)[None] / lam, R, axis=0)       # (R, d, d)
    b = np.zeros((R, d))
    est = np.zeros((R, K))                                   # x_a . theta_t
    norms = (Xs ** 2).sum(axis=2) / lam                      # ||x_a||^2_{V_t^-1}
    rows = np.arange(R)
    regret = np.zeros(R)
    every = max(T // 100, 1)
    curve_t, curve, at = [], [], {}
    wanted = set(checkpoints)
    log_term = 2.0 * math.log(1.0 / delta)
    root_lam_S = math.sqrt(lam) * S
    for t in range(T):
        beta = sigma * math.sqrt(log_term + d * math.log(1.0 + t / (lam * d))) + root_lam_S
        a = (est + beta * np.sqrt(np.maximum(norms, 0.0))).argmax(axis=1)
        x = Xs[rows, a]                                      # (R, d)
        u = np.matmul(Vinv, x[:, :, None])[:, :, 0]          # V^-1 x
        den = 1.0 + (x * u).sum(axis=1)
        Xu = np.matmul(Xs, u[:, :, None])[:, :, 0]           # (R, K)
        r = mu[rows, a] + sigma * noise[:, t]
        b += r[:, None] * x
        est += Xu * ((r - est[rows, a]) / den)[:, None]
        norms -= Xu * Xu / den[:, None]
        Vinv -= u[:, :, None] * (u / den[:, None])[:, None, :]
        regret += gaps[rows, a]
        if (t + 1) % 1000 == 0:                              # no drift in the rank-one updates
            est = np.matmul(Xs, np.matmul(Vinv, b[:, :, None]))[:, :, 0]
            norms = np.einsum("rkd,rde,rke->rk", Xs, Vinv, Xs)
        if (t + 1) % every == 0 or t + 1 == T:
            curve_t.append(t + 1)
            curve.append(regret.copy())
        if t + 1 in wanted:
            at[t + 1] = regret.copy()
    return {"regret": regret, "at": at, "curve_t": np.array(curve_t), "curve": np.array(curve).T}


# --------------------------------------------------------------------------------------------
# Experiments
# --------------------------------------------------------------------------------------------
def instances(p: Params) -> list[tuple[str, int]]:
    """(name, stream id) of every instance family of a run: "random", "eoo", then the extra
    End-of-Optimism gaps ``p.extra_eoo_eps`` as "eoo_eps<eps>"."""
    out = [("random", 0), ("eoo", 1)]
    out += [(f"eoo_eps{e:g}", 2 + i) for i, e in enumerate(p.extra_eoo_eps)]
    return out


def make_instance(p: Params, name: str, inst_id: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Arms ``X`` (K, d) and ``theta`` (d,) of instance ``name`` for one seed (reads ``p.random_K``,
    ``p.random_d`` and ``p.eoo_eps``; the random instance is drawn from the stream (seed, inst_id))."""
    if name == "random":
        return random_instance(p.random_K, p.random_d, np.random.default_rng([seed, inst_id]))
    if name == "eoo":
        return end_of_optimism_instance(p.eoo_eps)
    return end_of_optimism_instance(float(name.removeprefix("eoo_eps")))


def run_method(name: str, X: np.ndarray, theta: np.ndarray, T: int, rng: np.random.Generator, p: Params) -> dict:
    """One batched method on one instance; returns regret, batches, pulls, curve and the seconds it took.
    Reads ``p.sigma``, ``p.ridge_lambda``, ``p.fw_tol``, ``p.e4_gamma`` and ``p.rs_oful_C``.

    The clock is the calling thread's CPU time: NumPy's BLAS runs on one thread (the entry points pin it), so
    that is all of the method's work, while the wall clock would also count the time another seed's thread
    holds the core (seeds run in parallel threads) or other processes' load."""
    sigma, lam, tol = p.sigma, p.ridge_lambda, p.fw_tol
    started = time.thread_time()
    if name in ("blae", "blae_no_elim"):
        led = blae(X, theta, T, rng, sigma=sigma, lam=lam, S=float(np.linalg.norm(theta)), fw_tol=tol,
                   eliminate=name == "blae")
    elif name == "e4":
        led = e4(X, theta, T, rng, sigma=sigma, lam=lam, gamma=p.e4_gamma, fw_tol=tol)
    elif name == "phased_elim":
        led = phased_elimination(X, theta, T, rng, sigma=sigma, lam=lam, fw_tol=tol)
    elif name == "rs_oful":
        led = rs_oful(X, theta, T, rng, sigma=sigma, lam=lam, C=p.rs_oful_C)
    else:
        raise ValueError(f"unknown batched method '{name}'")
    return led.result(name, time.thread_time() - started)


def run_seed(p: Params, seed: int) -> dict:
    """Every batched method on every instance (:func:`instances`) and horizon ``p.horizons`` for one seed
    (the methods read ``p`` through :func:`run_method`).

    Besides the batched methods, the control ``blae_no_elim`` runs beside them, and E4 runs a second time
    (same stream, so the same pulls) just before BLAE, for its time only: an A/A timing control that
    tells whether a time ratio below 1 can come from the order or the contention of the runs.

    Returns {"seed", "rows": [{instance, K, d, T, method, regret, batches, arms_left (-1: not an
    elimination method), chernoff_stop (E4), seconds}],
    "curves": [{instance, T, method, t, regret}] (batch ends, largest T only), "arms": [...],
    "e4_rerun": [{instance, T, seconds}]}."""
    rows, curves, arms, rerun = [], [], [], []
    T_max = max(p.horizons)
    for name, inst_id in instances(p):
        X, theta = make_instance(p, name, inst_id, seed)
        K, d = X.shape
        arms += [{"seed": seed, "instance": name, "arm": k, **{f"x{j}": float(X[k, j]) for j in range(d)}}
                 for k in range(K)]
        for T in p.horizons:
            again = run_method("e4", X, theta, T, np.random.default_rng([seed, inst_id, T, METHOD_ID["e4"]]), p)
            rerun.append({"instance": name, "T": T, "seconds": again["seconds"]})
            for method_name in BATCHED_METHODS + CONTROL_METHODS:
                rng = np.random.default_rng([seed, inst_id, T, METHOD_ID[method_name]])
                res = run_method(method_name, X, theta, T, rng, p)
                rows.append({"seed": seed, "instance": name, "K": K, "d": d, "T": T, "method": method_name,
                             "regret": res["regret"], "batches": res["batches"],
                             "arms_left": res.get("arms_left", -1), "chernoff_stop": res.get("chernoff_stop", False),
                             "seconds": res["seconds"]})
                if T == T_max:
                    curves += [{"seed": seed, "instance": name, "T": T, "method": method_name, "t": int(t),
                                "regret": float(r)} for t, r in res["curve"]]
    return {"seed": seed, "rows": rows, "curves": curves, "arms": arms, "e4_rerun": rerun}


def run_linucb(p: Params, seeds: list[int]) -> dict:
    """Sequential LinUCB on the headline instances ("random", "eoo"), all seeds at once (vectorised;
    each seed's noise comes from its own stream, so a seed's result does not depend on the others).
    LinUCB is anytime: one run of T_max = max(p.horizons) rounds (delta = 1/T_max) gives its regret at
    every horizon; reads the instance fields of ``p``, ``p.sigma`` and ``p.ridge_lambda``. Returns {"rows": [...], "curves": [...], "seconds": {instance: wall seconds for all seeds}}."""
    rows, curves, seconds = [], [], {}
    T_max = max(p.horizons)
    for name, inst_id in instances(p)[:2]:
        pairs = [make_instance(p, name, inst_id, s) for s in seeds]
        Xs = np.stack([pair[0] for pair in pairs])
        theta = pairs[0][1]
        noise = np.stack([np.random.default_rng([s, inst_id, T_max, METHOD_ID["linucb"]]).standard_normal(T_max)
                          for s in seeds])
        started = time.perf_counter()
        out = linucb_many(Xs, theta, T_max, noise, sigma=p.sigma, lam=p.ridge_lambda,
                          S=float(np.linalg.norm(theta)), checkpoints=tuple(p.horizons))
        seconds[name] = time.perf_counter() - started
        K, d = Xs.shape[1:]
        for i, s in enumerate(seeds):
            for T in p.horizons:
                rows.append({"seed": s, "instance": name, "K": K, "d": d, "T": T, "method": "linucb",
                             "regret": float(out["at"][T][i]), "batches": T, "arms_left": -1,
                             "chernoff_stop": False, "seconds": seconds[name] / len(seeds)})
            curves += [{"seed": s, "instance": name, "T": T_max, "method": "linucb", "t": int(t),
                        "regret": float(r)} for t, r in zip(out["curve_t"], out["curve"][i])]
    return {"rows": rows, "curves": curves, "seconds": seconds}
