"""FedDP-KMeans: differentially private federated k-means with server-side data
(Scott, Lampert & Saulpic, ICML 2025), plain NumPy + SciPy + scikit-learn.

Setting. m clients hold data sets P_1..P_m (rows in R^d); the server holds a small, possibly
out-of-distribution data set Q (public). Privacy is at the data-point level (the paper's cross-silo
setting): every message leaving the clients is a *sum over all clients* (secure aggregation), and the
server adds the DP noise once to that aggregate ("centrally applied" mechanism, as in the official
code built on pfl-research). Every client point is first clipped to L2 norm ``clip`` (Lambda).

FedDP-Init (Algorithm 1; official classes FederatedOuterProduct, FederatedServerPointWeighting,
FederatedInitFromProjectedCenters):

1. clients send sum_x x x^T; the server adds *symmetric* Gaussian noise (sensitivity Lambda^2, see
   :func:`outer_product_sensitivity`) and keeps the top-k eigenvectors V (k, d): a DP projection.
2. clients map each projected point to its nearest projected server point and send the counts per
   server point (sensitivity 1) + Laplace noise; server points with noisy weight < ``min_weight`` are
   dropped and the server runs weighted k-means (scikit-learn) on the rest, in the projected space.
3. clients assign their projected points to those k projected centres and send, per centre, the sum
   of the *original* points (Gaussian noise, sensitivity Lambda) and the count (Laplace noise,
   sensitivity 1); the budget eps_3 is split ``split`` / (1 - split). Centres = noisy sums / counts.

FedDP-Lloyds (Algorithm 2; official FederatedLloyds): T rounds of "assign to nearest centre, send
per-cluster sums (Gaussian) and counts (Laplace), centre = sum / count", the budget eps_L split the
same way and spread over the T rounds by calibrating the noise to the T-fold composition.

Privacy accounting (plain functions below, generic; see their docstrings for the formulas): the
Gaussian noise of one release is the analytic Gaussian mechanism (Balle & Wang 2018), which is what
pfl's ``GaussianMechanism.construct_single_iteration`` uses; a T-fold composition of Gaussians is
calibrated exactly through Gaussian DP (mu adds in quadrature), which is what a tight PLD accountant
(the official code: pfl ``PLDPrivacyAccountant``) returns up to its discretisation; Laplace noise of
a T-fold composition is calibrated by basic composition (b = T Delta / eps; at delta = 1e-6 a tight
accountant gives the same to 4e-4); the
total (eps, delta) of a whole run composes every release with the PRV accountant (the official code
composes with Google's ``dp_accounting`` PLD), and basic composition (sum of eps, sum of delta) is
reported beside it.

Baselines: data-independent sphere-packing init (Su et al. 2017, the official ``SpherePacking``) and
server-only k-means++ init (official ``ServerKMeans++``), both followed by the same FedDP-Lloyds;
k-FED (Dennis et al. 2021; one-shot, non-private, local Awasthi-Sheffet clustering); and the
non-private oracle: Lloyd's with k-means++ (scikit-learn ``KMeans``) on the pooled client data.
Negative controls: non-private k-means on the server data alone (Lloyd's with k-means++, no client data and
no privacy cost), for the claims that FedDP beats the DP baselines; the trivial solution (all k centres at
the pooled mean) for the cost-within-1.2-of-the-oracle claim.

Randomness only through ``np.random.default_rng`` streams keyed by (seed, dataset, method), so a seed's
results do not depend on what else runs; scikit-learn gets integer ``random_state`` drawn from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, stats
from scipy.linalg import eigh
from scipy.ndimage import gaussian_filter
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans, kmeans_plusplus

from flows.feddp_kmeans.params import Params
from tasks.data import save_parquet

DATASETS = ("gaussian", "digits")
DATASET_ID = {name: i for i, name in enumerate(DATASETS)}
METHOD_ID = {"data": 0, "feddp": 1, "sphere": 2, "serverpp": 3, "kfed": 4, "oracle": 5, "server_kmeans": 6}   # rng streams


# =============================================================================================
# Privacy accounting (generic: any Gaussian / Laplace release; no federated specifics)
# =============================================================================================
def gaussian_dp_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-Gaussian DP (Dong, Roth & Su 2019, Cor. 2.13), i.e. of one Gaussian release
    with noise std sigma and L2 sensitivity Delta, mu = Delta / sigma:

        delta(eps) = Phi(-eps/mu + mu/2) - e^eps * Phi(-eps/mu - mu/2).

    This is also the exact privacy profile of the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8),
    and of a composition of Gaussians with mu = sqrt(sum_i mu_i^2)."""
    if mu <= 0:
        return 0.0
    return float(stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))


def gaussian_dp_mu(eps: float, delta: float) -> float:
    """The largest mu with ``gaussian_dp_delta(eps, mu) <= delta`` (delta is increasing in mu)."""
    if not (eps > 0 and 0 < delta < 1):
        raise ValueError(f"need eps > 0 and 0 < delta < 1, got eps={eps}, delta={delta}")
    hi = 1.0
    while gaussian_dp_delta(eps, hi) < delta:
        hi *= 2.0
    return float(optimize.brentq(lambda m: gaussian_dp_delta(eps, m) - delta, 1e-12, hi, xtol=1e-14, rtol=1e-13))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest eps with ``gaussian_dp_delta(eps, mu) <= delta`` (eps of a mu-GDP mechanism at delta)."""
    if mu == 0:
        return 0.0
    hi = 1.0
    while gaussian_dp_delta(hi, mu) > delta:
        hi *= 2.0
    return float(optimize.brentq(lambda e: gaussian_dp_delta(e, mu) - delta, 0.0, hi, xtol=1e-12))


def analytic_gaussian_sigma(eps: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise std of the analytic Gaussian mechanism (Balle & Wang 2018): the smallest sigma with
    Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta) <= delta,
    i.e. sigma = Delta / mu*(eps, delta). Infinite eps -> 0 (no noise). Always below the classical
    sigma = Delta sqrt(2 ln(1.25/delta)) / eps of Dwork & Roth (valid for eps < 1)."""
    if math.isinf(eps):
        return 0.0
    return sensitivity / gaussian_dp_mu(eps, delta)


def classical_gaussian_sigma(eps: float, delta: float, sensitivity: float = 1.0) -> float:
    """Dwork & Roth (2014, Thm A.1): sigma = Delta * sqrt(2 ln(1.25 / delta)) / eps, (eps, delta)-DP for eps < 1."""
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / eps


def gaussian_sigma_for_compositions(eps: float, delta: float, compositions: int, sensitivity: float = 1.0) -> float:
    """Noise std for ``compositions`` Gaussian releases that together are (eps, delta)-DP.

    T Gaussians with mu_1 = Delta/sigma compose to mu = sqrt(T) Delta / sigma (Gaussian DP is exact
    under composition), so sigma_T = sqrt(T) * analytic_gaussian_sigma(eps, delta, Delta). This is the
    noise a tight PLD accountant (the official code's ``PLDPrivacyAccountant``) returns, up to its
    discretisation."""
    return math.sqrt(compositions) * analytic_gaussian_sigma(eps, delta, sensitivity)


def laplace_scale(eps: float, sensitivity: float = 1.0) -> float:
    """Laplace mechanism (pure eps-DP): b = Delta_1 / eps (0 for infinite eps)."""
    return 0.0 if math.isinf(eps) else sensitivity / eps


@lru_cache(maxsize=256)
def _prv_epsilon(gauss_noise_multipliers: tuple[tuple[float, int], ...],
                 laplace_eps: tuple[tuple[float, int], ...], delta: float, eps_error: float) -> float:
    """Upper bound on eps at ``delta`` of the composition of Gaussian releases (noise multiplier
    sigma/Delta, repeated n times) and Laplace releases (eps_0 = Delta/b, repeated n times), from the
    PRV accountant (Gopi, Lee & Wutschitz 2021)."""
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import (
        GaussianMechanism,
        LaplaceMechanism,
    )

    prvs, counts = [], []
    for z, n in gauss_noise_multipliers:
        prvs.append(GaussianMechanism(noise_multiplier=z))
        counts.append(n)
    for e0, n in laplace_eps:
        prvs.append(LaplaceMechanism(mu=e0))
        counts.append(n)
    for delta_error in (delta * 1e-4, delta * 1e-3, delta * 1e-2):   # its discretiser can reject a grid
        try:
            acc = PRVAccountant(prvs=prvs, eps_error=eps_error, delta_error=delta_error, max_self_compositions=counts)
            return float(acc.compute_epsilon(delta=delta, num_self_compositions=counts)[2])
        except RuntimeError:
            continue
    # Fallback (a valid, looser bound): the Gaussians composed exactly as mu-GDP at delta, plus the
    # Laplace releases by basic composition (pure DP).
    mu = math.sqrt(sum(n / z ** 2 for z, n in gauss_noise_multipliers))
    return gdp_epsilon(mu, delta) + sum(n * e0 for e0, n in laplace_eps)


def laplace_scale_for_compositions(eps: float, compositions: int, sensitivity: float = 1.0) -> float:
    """Laplace scale b for ``compositions`` Laplace releases that together are eps-DP (pure, so any
    delta): basic composition, b = T * Delta_1 / eps. A tight accountant gains nothing measurable here:
    at delta = 1e-6 the PRV accountant puts 5 releases of Lap(5/eps) at eps(1 + 4e-4) (tested), so the
    official code's PLD calibration gives the same noise up to discretisation."""
    if math.isinf(eps):
        return 0.0
    return compositions * laplace_scale(eps, sensitivity)


def total_epsilon(gaussian: list[tuple[float, int]], laplace: list[tuple[float, int]], delta: float,
                  eps_error: float = 1e-2) -> float:
    """eps at ``delta`` (PRV accountant, upper bound) of a run made of Gaussian releases given as
    (noise multiplier sigma/Delta, repetitions) and Laplace releases given as (eps_0 = Delta/b,
    repetitions). Releases with zero noise make it infinite."""
    if any(z == 0 for z, _ in gaussian) or any(math.isinf(e) for e, _ in laplace):
        return math.inf
    if not gaussian and not laplace:
        return 0.0
    return _prv_epsilon(tuple(gaussian), tuple(laplace), delta, eps_error)


def basic_composition(eps_list: list[float], delta_list: list[float]) -> tuple[float, float]:
    """Basic composition (Dwork & Roth Thm 3.16): (sum eps_i, sum delta_i)."""
    return float(sum(eps_list)), float(sum(delta_list))


# ---------------------------------------------------------------------------- mechanisms
def clip_rows(X: np.ndarray, bound: float) -> tuple[np.ndarray, float]:
    """Scale each row of ``X`` (n, d) down to L2 norm <= ``bound``; returns (clipped copy, fraction clipped)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    scale = np.minimum(1.0, bound / np.maximum(norms, 1e-300))
    return X * scale, float(np.mean(norms[:, 0] > bound))


def outer_product_sensitivity(clip: float) -> float:
    """L2 (Frobenius) sensitivity of sum_x x x^T when one point of norm <= clip is added or removed:
    ||x x^T||_F = ||x||^2 <= clip^2. (The official code scales this noise by clip, not clip^2.)"""
    return clip ** 2


def symmetric_gaussian_noise(d: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """(d, d) symmetric noise: iid N(0, sigma^2) on and above the diagonal, mirrored below (official
    ``add_symmetric_gaussian_noise``)."""
    noise = rng.normal(0.0, sigma, size=(d, d)) if sigma > 0 else np.zeros((d, d))
    upper = np.triu(noise)
    return upper + np.triu(upper, 1).T


# =============================================================================================
# Noise calibration of one FedDP-KMeans run
# =============================================================================================
@dataclass(frozen=True)
class Budget:
    """Per-step privacy parameters (the official config's names in brackets)."""
    eps_outer: float          # step 1 [outer_product_epsilon]
    eps_weight: float         # step 2 [weighting_epsilon]
    eps_init: float           # step 3, sums + counts [center_init_gaussian_epsilon]
    init_split: float         # share of eps_init for the sums [center_init_epsilon_split]
    eps_lloyd: float          # all Lloyd rounds, sums + counts [fedlloyds_epsilon]
    lloyd_split: float        # [fedlloyds_epsilon_split]
    delta: float              # delta of every Gaussian calibration and of the total [*_delta]
    clip: float               # Lambda: point norm bound [*_clipping_bound]
    count_clip: float = 1.0   # L1 sensitivity of counts [*_laplace_clipping_bound, weighting_clipping_bound]


@dataclass(frozen=True)
class Noise:
    """Noise scales actually used (std for Gaussian, scale b for Laplace); 0 = noise off."""
    outer_sigma: float
    weight_b: float
    init_sum_sigma: float
    init_count_b: float
    lloyd_sum_sigma: float
    lloyd_count_b: float


def init_noise(b: Budget) -> Noise:
    """Noise of the three FedDP-Init steps (the Lloyd fields are left at 0)."""
    return Noise(
        outer_sigma=analytic_gaussian_sigma(b.eps_outer, b.delta, outer_product_sensitivity(b.clip)),
        weight_b=laplace_scale(b.eps_weight, b.count_clip),
        init_sum_sigma=analytic_gaussian_sigma(b.eps_init * b.init_split, b.delta, b.clip),
        init_count_b=laplace_scale(b.eps_init * (1 - b.init_split), b.count_clip),
        lloyd_sum_sigma=0.0, lloyd_count_b=0.0)


def lloyd_noise(eps_lloyd: float, split: float, delta: float, clip: float, count_clip: float, T: int) -> tuple[float, float]:
    """(sum sigma, count b) per Lloyd round so that T rounds are (eps*split, delta) for the sums and
    (eps*(1-split), delta) for the counts (official ``get_mechanism('fedlloyds')``)."""
    if T == 0:
        return 0.0, 0.0
    return (gaussian_sigma_for_compositions(eps_lloyd * split, delta, T, clip),
            laplace_scale_for_compositions(eps_lloyd * (1 - split), T, count_clip))


def run_epsilon(clip: float, count_clip: float, delta: float, T: int, lloyd: tuple[float, float],
                init: Noise | None) -> dict:
    """Total privacy of one run: PRV eps at ``delta`` and basic composition of the per-release budgets."""
    gauss, lap = [], []
    if init is not None:
        if init.outer_sigma == 0 or init.init_sum_sigma == 0:
            return {"eps_prv": math.inf, "delta": delta}
        gauss += [(init.outer_sigma / outer_product_sensitivity(clip), 1), (init.init_sum_sigma / clip, 1)]
        lap += [(count_clip / init.weight_b, 1), (count_clip / init.init_count_b, 1)]
    if T > 0:
        sigma, b = lloyd
        if sigma == 0:
            return {"eps_prv": math.inf, "delta": delta}
        gauss.append((sigma / clip, T))
        lap.append((count_clip / b, T))
    return {"eps_prv": total_epsilon(gauss, lap, delta), "delta": delta}


# =============================================================================================
# Data
# =============================================================================================
@dataclass
class FedData:
    """Clients' data ``clients`` (list of (n_j, d)), their labels ``labels`` (list of (n_j,)), the
    server's data ``server`` (n_s, d) and its labels (``k`` = out of distribution)."""
    clients: list[np.ndarray]
    labels: list[np.ndarray]
    server: np.ndarray
    server_labels: np.ndarray
    k: int

    @property
    def pooled(self) -> np.ndarray:
        return np.vstack(self.clients)

    @property
    def pooled_labels(self) -> np.ndarray:
        return np.concatenate(self.labels)


def make_gaussian_mixture(k: int, d: int, variance: float, n_clients: int, per_client: int,
                          server_per_component: int, server_uniform: int, client_components: int,
                          rng: np.random.Generator) -> FedData:
    """The official ``GaussianMixtureUniform``: means ~ U[0,1]^(k x d), covariance variance * I, equal
    mixture weights. Each client draws ``per_client`` points from the mixture (``client_components``
    = 0, the official IID split) or from ``client_components`` components chosen at random (non-IID).
    The server holds ``server_per_component`` points of every component plus ``server_uniform``
    points ~ U[0,1]^d (out of distribution, label k)."""
    means = rng.uniform(0.0, 1.0, size=(k, d))
    sd = math.sqrt(variance)
    clients, labels = [], []
    for _ in range(n_clients):
        allowed = np.arange(k) if client_components == 0 else rng.choice(k, size=client_components, replace=False)
        y = allowed[rng.integers(0, allowed.size, size=per_client)]
        clients.append(means[y] + sd * rng.standard_normal((per_client, d)))
        labels.append(y)
    ys = np.repeat(np.arange(k), server_per_component)
    server = np.vstack([means[ys] + sd * rng.standard_normal((ys.size, d)), rng.uniform(0, 1, size=(server_uniform, d))])
    server_labels = np.concatenate([ys, np.full(server_uniform, k)])
    return FedData(clients, labels, server, server_labels, k)


def make_digits(X: np.ndarray, y: np.ndarray, n_clients: int, dirichlet_alpha: float, n_server: int,
                blur_sigma: float, server_noise: float, rng: np.random.Generator) -> FedData:
    """scikit-learn digits (``X`` (1797, 64) in [0, 16], ``y`` (1797,)) scaled to [0, 1]. ``n_server``
    random images go to the server *after a different preprocessing* (Gaussian blur of the 8x8 image
    with ``blur_sigma`` pixels plus N(0, server_noise^2), clipped to [0, 1]): out of distribution. The
    rest is split over ``n_clients`` by label skew: client shares per label ~ Dirichlet(alpha)."""
    X = np.asarray(X, dtype=float) / 16.0
    y = np.asarray(y, dtype=int)
    k = int(y.max()) + 1
    perm = rng.permutation(len(X))
    s_idx, c_idx = perm[:n_server], perm[n_server:]
    imgs = X[s_idx].reshape(-1, 8, 8)
    blurred = np.stack([gaussian_filter(im, blur_sigma) for im in imgs]).reshape(n_server, 64)
    server = np.clip(blurred + server_noise * rng.standard_normal(blurred.shape), 0.0, 1.0)
    owner = np.empty(c_idx.size, dtype=int)
    for label in range(k):
        idx = c_idx[y[c_idx] == label]
        shares = rng.dirichlet(np.full(n_clients, dirichlet_alpha))
        owner[np.isin(c_idx, idx)] = rng.choice(n_clients, size=idx.size, p=shares)
    clients = [X[c_idx[owner == j]] for j in range(n_clients)]
    labels = [y[c_idx[owner == j]] for j in range(n_clients)]
    keep = [j for j in range(n_clients) if len(clients[j]) > 0]
    return FedData([clients[j] for j in keep], [labels[j] for j in keep], server, y[s_idx], k)


# =============================================================================================
# FedDP-KMeans
# =============================================================================================
def nearest(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Index of the nearest row of ``C`` (k, d) for every row of ``X`` (n, d), shape (n,)."""
    d2 = (X * X).sum(1)[:, None] - 2.0 * X @ C.T + (C * C).sum(1)[None, :]
    return np.argmin(d2, axis=1)


def client_sums_counts(X: np.ndarray, assign: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums (k, d) and counts (k,) of one client's points ``X`` (n, d) under ``assign`` (n,);
    points with assign = -1 (not assigned) are left out."""
    onehot = (assign[None, :] == np.arange(k)[:, None]).astype(X.dtype)    # (k, n); -1 matches no row
    return onehot @ X, onehot.sum(axis=1)


def noisy_centres(sums: np.ndarray, counts: np.ndarray, sum_sigma: float, count_b: float,
                  rng: np.random.Generator, previous: np.ndarray | None = None) -> np.ndarray:
    """Server side of a DP centre update: (sums + N(0, sum_sigma^2)) / max(counts + Lap(count_b), 1),
    shapes (k, d) and (k,) -> (k, d). The floor at 1 is post-processing (the official code only
    replaces exact zeros by 1).

    A cluster whose released count is exactly 0 keeps its ``previous`` centre (Lloyd's rule for an
    empty cluster, as scipy's ``kmeans2``). Only a noise-free count can be exactly 0 (Laplace noise is
    0 with probability 0), so the DP runs are unchanged; without this rule an empty cluster's centre
    went to 0 / 1 = the origin, and the noise-off federated step left Lloyd's algorithm whenever a
    cluster emptied (the seed-dependent failure of the federated = centralised check)."""
    if sum_sigma > 0:
        sums = sums + rng.normal(0.0, sum_sigma, size=sums.shape)
    if count_b > 0:
        counts = counts + rng.laplace(0.0, count_b, size=counts.shape)
    centres = sums / np.maximum(counts, 1.0)[:, None]
    if previous is not None:
        empty = counts == 0
        centres[empty] = previous[empty]
    return centres


def fed_lloyd_step(clients: list[np.ndarray], centres: np.ndarray, sum_sigma: float, count_b: float,
                   rng: np.random.Generator) -> np.ndarray:
    """One FedDP-Lloyds round: every client assigns its points to the nearest centre and sends
    per-cluster sums and counts; the server aggregates, adds the noise and divides. (k, d) -> (k, d)."""
    k = centres.shape[0]
    sums, counts = np.zeros_like(centres, dtype=float), np.zeros(k)
    for X in clients:
        s, c = client_sums_counts(X, nearest(X, centres), k)
        sums += s
        counts += c
    return noisy_centres(sums, counts, sum_sigma, count_b, rng, previous=centres)


def fed_dp_lloyds(clients: list[np.ndarray], centres: np.ndarray, T: int, sum_sigma: float, count_b: float,
                  rng: np.random.Generator) -> np.ndarray:
    """T rounds of :func:`fed_lloyd_step` with the per-round noise from :func:`lloyd_noise`."""
    for _ in range(T):
        centres = fed_lloyd_step(clients, centres, sum_sigma, count_b, rng)
    return centres


def feddp_init(clients: list[np.ndarray], server: np.ndarray, k: int, noise: Noise, min_weight: float,
               margin: float, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    """FedDP-Init (Algorithm 1) on already-clipped client data. Returns centres (k, d) and diagnostics."""
    d = server.shape[1]
    # Step 1: DP top-k subspace from the noisy sum of outer products.
    outer = sum(X.T @ X for X in clients) + symmetric_gaussian_noise(d, noise.outer_sigma, rng)
    _, vecs = eigh(outer, subset_by_index=(d - k, d - 1))
    V = vecs.T                                                      # (k, d), orthonormal rows
    server_proj = server @ V.T                                      # (n_s, k) coordinates in span(V)
    # Step 2: DP weights of the server points = how many client points they are nearest to.
    weights = np.zeros(len(server))
    for X in clients:
        weights += np.bincount(nearest(X @ V.T, server_proj), minlength=len(server))
    if noise.weight_b > 0:
        weights = weights + rng.laplace(0.0, noise.weight_b, size=weights.shape)
    keep = weights >= min_weight
    if keep.sum() < k:                                              # guard: keep the k heaviest
        keep = np.zeros(len(server), dtype=bool)
        keep[np.argsort(-weights)[:k]] = True
    km = KMeans(n_clusters=k, n_init="auto", random_state=int(rng.integers(2**31 - 1)))
    km.fit(server_proj[keep], sample_weight=np.maximum(weights[keep], 1e-12))
    xi = km.cluster_centers_                                        # (k, k) projected centres
    # Step 3: lift the projected centres to R^d with DP sums and counts.
    sums, counts = np.zeros((k, d)), np.zeros(k)
    for X in clients:
        Z = X @ V.T
        d2 = ((Z[:, None, :] - xi[None, :, :]) ** 2).sum(-1)       # (n_j, k)
        two = np.sqrt(np.partition(d2, 1, axis=1)[:, :2])
        assign = np.where(two[:, 0] <= margin * two[:, 1], np.argmin(d2, axis=1), -1)
        s, c = client_sums_counts(X, assign, k)
        sums += s
        counts += c
    centres = noisy_centres(sums, counts, noise.init_sum_sigma, noise.init_count_b, rng)
    return centres, {"server_keep": keep}


# =============================================================================================
# Baselines
# =============================================================================================
def sphere_packing_init(r: float, d: int, k: int, rng: np.random.Generator, num_tries: int = 1000,
                        tol: float = 1e-4, max_iters: int = 1000) -> np.ndarray:
    """Data-independent init of Su et al. (2017) as in the official ``kmeans_initialise_sphere_packing``:
    binary search on a radius a, sampling up to ``num_tries`` points in [-r, r]^d farther than a from
    every corner and 2a from each other; like the official loop it stops at the first radius that
    succeeds. Returns (k, d)."""
    lo, hi = 0.0, r * math.sqrt(d)
    centres: list[np.ndarray] = []
    for _ in range(max_iters):
        if hi - lo <= tol:
            break
        a = 0.5 * (lo + hi)
        centres = []
        for _ in range(num_tries):
            p = rng.uniform(-r, r, size=d)
            if np.linalg.norm(p - np.sign(p) * r) > a and (
                    not centres or np.min(np.linalg.norm(np.asarray(centres) - p, axis=1)) > 2 * a):
                centres.append(p)
                if len(centres) == k:
                    break
        if len(centres) == k:
            break
        hi = a
    if len(centres) < k:
        raise RuntimeError("sphere packing found no feasible radius")
    return np.asarray(centres)


def server_kmeanspp_init(server: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding (scikit-learn) on the server data alone, unweighted (official ``ServerKMeans++``)."""
    centres, _ = kmeans_plusplus(server, k, random_state=int(rng.integers(2**31 - 1)))
    return centres


def awasthi_sheffet(X: np.ndarray, k: int, margin: float, rng: np.random.Generator, max_iter: int = 100) -> np.ndarray:
    """Local clustering of k-FED (official ``awasthisheffet_kmeans``): project X (n, d) on its top-k
    right singular vectors, k-means there, average the original points that satisfy the proximity
    margin, then Lloyd's from those means. Returns (k, d)."""
    _, _, Vt = np.linalg.svd(X, full_matrices=False)
    V = Vt[:k]
    Z = X @ V.T
    pc = KMeans(n_clusters=k, n_init="auto", random_state=int(rng.integers(2**31 - 1))).fit(Z).cluster_centers_
    d2 = ((Z[:, None, :] - pc[None]) ** 2).sum(-1)
    two = np.sqrt(np.partition(d2, 1, axis=1)[:, :2])
    assign = np.where(two[:, 0] <= margin * two[:, 1], np.argmin(d2, axis=1), -1)
    init = np.vstack([X[assign == j].mean(0) if np.any(assign == j) else X[rng.integers(len(X))] for j in range(k)])
    return KMeans(n_clusters=k, init=init, n_init=1, max_iter=max_iter).fit(X).cluster_centers_


def kfed(clients: list[np.ndarray], k: int, k_client: int, margin: float, rng: np.random.Generator) -> np.ndarray:
    """k-FED (Dennis, Li & Smith 2021) as in the official code: every client sends ``k_client`` local
    centres (Awasthi-Sheffet); the server seeds with one random client's centres and adds the farthest
    remaining local centres until k, then runs one Lloyd step on all local centres. Non-private. (k, d)."""
    local = []
    for X in clients:
        if len(np.unique(X, axis=0)) > k_client:
            local.append(awasthi_sheffet(X, k_client, margin, rng))
        else:
            local.append(np.vstack([X] * (k_client // len(X) + 1))[:k_client])
    first = int(rng.integers(len(local)))
    M = list(local[first][:k])
    rest = np.vstack([c for i, c in enumerate(local) if i != first])
    dist = np.min(np.linalg.norm(rest[:, None, :] - np.asarray(M)[None], axis=2), axis=1)
    while len(M) < k:
        i = int(np.argmax(dist))
        M.append(rest[i])
        dist = np.minimum(dist, np.linalg.norm(rest - rest[i], axis=1))
    allc = np.vstack(local)
    return KMeans(n_clusters=k, init=np.asarray(M), n_init=1, max_iter=1).fit(allc).cluster_centers_


def oracle_kmeans(X: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Non-private Lloyd's with k-means++ (scikit-learn ``KMeans``, official ``Optimal``) on pooled data."""
    return KMeans(n_clusters=k, n_init="auto", random_state=int(rng.integers(2**31 - 1))).fit(X).cluster_centers_


# =============================================================================================
# Metrics
# =============================================================================================
def kmeans_cost(X: np.ndarray, centres: np.ndarray) -> float:
    """sum_x min_j ||x - c_j||^2 over X (n, d)."""
    d2 = (X * X).sum(1)[:, None] - 2.0 * X @ centres.T + (centres * centres).sum(1)[None, :]
    return float(np.maximum(d2.min(axis=1), 0.0).sum())


def hungarian_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """Accuracy of the best one-to-one matching of predicted clusters to true labels (Hungarian)."""
    k = int(max(pred.max(), truth.max())) + 1
    conf = np.bincount(pred * k + truth, minlength=k * k).reshape(k, k).astype(float)
    rows, cols = linear_sum_assignment(conf, maximize=True)
    return float(conf[rows, cols].sum() / len(pred))


def majority_accuracy(pred: np.ndarray, truth: np.ndarray) -> float:
    """The official code's accuracy: every predicted cluster counts its majority true label."""
    return float(sum(np.bincount(truth[pred == j]).max() for j in np.unique(pred)) / len(pred))


# =============================================================================================
# One seed
# =============================================================================================
def budget_from(p: Params, dataset: str = "gaussian") -> Budget:
    """The privacy budget of a run on ``dataset``: the per-step eps, splits and delta of ``p``, and the
    data set's clipping bound (``p.clip`` for the Gaussian mixture, ``p.digits_clip`` for digits)."""
    return Budget(eps_outer=p.eps_outer, eps_weight=p.eps_weight, eps_init=p.eps_init, init_split=p.init_split,
                  eps_lloyd=p.eps_lloyd, lloyd_split=p.lloyd_split, delta=p.delta,
                  clip=p.clip if dataset == "gaussian" else p.digits_clip, count_clip=1.0)


def prepare_data(p: Params, dataset: str, seed: int) -> FedData:
    """The seed's federated data set (deterministic in (seed, dataset)): the Gaussian mixture from
    ``p.k``, ``p.dim``, ``p.variance``, ``p.n_clients``, ``p.per_client``, ``p.server_*`` and
    ``p.client_components``, or digits from the ``p.digits_*`` fields."""
    rng = np.random.default_rng([seed, DATASET_ID[dataset], METHOD_ID["data"]])
    if dataset == "gaussian":
        return make_gaussian_mixture(p.k, p.dim, p.variance, p.n_clients, p.per_client, p.server_per_component,
                                     p.server_uniform, p.client_components, rng)
    from sklearn.datasets import load_digits
    X, y = load_digits(return_X_y=True)
    return make_digits(X, y, p.digits_clients, p.digits_alpha, p.digits_server, p.digits_blur,
                       p.digits_server_noise, rng)


def dataset_frame(data: FedData, n_clients: int | None = None) -> pd.DataFrame:
    """A federated data set as one float32 table: features ``x0..``, ``client`` (server rows: -1) and
    ``label``; only the first ``n_clients`` clients (all when None)."""
    columns = [f"x{i}" for i in range(data.server.shape[1])]
    frames = [pd.DataFrame(X.astype(np.float32), columns=columns).assign(client=j, label=y)
              for j, (X, y) in enumerate(zip(data.clients[:n_clients], data.labels[:n_clients]))]
    frames.append(pd.DataFrame(data.server.astype(np.float32), columns=columns)
                  .assign(client=-1, label=data.server_labels))
    return pd.concat(frames, ignore_index=True)


def evaluate(data: FedData, centres: np.ndarray, X: np.ndarray | None = None, sq: np.ndarray | None = None) -> dict:
    """k-means cost and accuracies of ``centres`` on the pooled client data (``X``: the pooled data and
    ``sq`` its squared row norms, if at hand)."""
    X = data.pooled if X is None else X
    sq = (X * X).sum(1) if sq is None else sq
    y = data.pooled_labels
    d2 = -2.0 * X @ centres.T + (centres * centres).sum(1)[None, :]        # ||x - c||^2 - ||x||^2
    pred = np.argmin(d2, axis=1)
    cost = float(np.maximum(d2.min(axis=1) + sq, 0.0).sum())
    return {"cost": cost, "cost_per_point": cost / len(X), "accuracy": hungarian_accuracy(pred, y),
            "accuracy_majority": majority_accuracy(pred, y)}


def run_dataset(p: Params, dataset: str, seed: int, data: FedData | None = None) -> list[dict]:
    """All methods on one data set for one seed: a list of row dicts (dataset, method, T, budget, cost,
    accuracy, eps_prv, eps_basic, ...). Reads the budget (:func:`budget_from`), ``p.lloyd_steps``,
    ``p.min_server_weight``, ``p.margin`` and ``p.kfed_k_client``, and the data fields when ``data`` is None."""
    data = prepare_data(p, dataset, seed) if data is None else data
    budget = budget_from(p, dataset)
    k = data.k
    clipped = [clip_rows(X, budget.clip)[0] for X in data.clients]
    frac_clipped = float(np.mean(np.concatenate([np.linalg.norm(X, axis=1) > budget.clip for X in data.clients])))
    pooled = data.pooled
    sq = (pooled * pooled).sum(1)
    ood = data.server_labels == k
    base = {"dataset": dataset, "seed": seed, "n_points": int(sum(len(X) for X in data.clients)),
            "n_clients": len(data.clients), "frac_clipped": frac_clipped}
    rows = []
    stream = lambda name, *extra: np.random.default_rng([seed, DATASET_ID[dataset], METHOD_ID[name], *extra])
    init = init_noise(budget)
    per_step_sum = budget.eps_outer + budget.eps_weight + budget.eps_init + budget.eps_lloyd

    centres, diag = feddp_init(clipped, data.server, k, init, p.min_server_weight, p.margin, stream("feddp"))
    init_eval = evaluate(data, centres, pooled, sq)
    for T in p.lloyd_steps:                                        # one init, then T DP-Lloyd rounds
        rng = stream("feddp", T)
        lloyd = lloyd_noise(budget.eps_lloyd, budget.lloyd_split, budget.delta, budget.clip, budget.count_clip, T)
        final = fed_dp_lloyds(clipped, centres, T, *lloyd, rng)
        eps = run_epsilon(budget.clip, budget.count_clip, budget.delta, T, lloyd, init)
        eps_basic, delta_basic = basic_composition(
            [budget.eps_outer, budget.eps_weight, budget.eps_init, budget.eps_lloyd if T else 0.0],
            [budget.delta] * (2 + (1 if T else 0)))
        rows.append({**base, "method": "feddp", "T": T, "budget": "per_step", **evaluate(data, final, pooled, sq),
                     "init_cost_per_point": init_eval["cost_per_point"], "init_accuracy": init_eval["accuracy"],
                     "eps_prv": eps["eps_prv"], "eps_basic": eps_basic, "delta_basic": delta_basic,
                     "server_points_kept": int(diag["server_keep"].sum()),
                     "ood_server_points_kept": int((diag["server_keep"] & ood).sum())})

    for name in ("sphere", "serverpp"):
        for T in p.lloyd_steps:
            if T == 0:
                continue
            for label, eps_l in (("lloyd_only", budget.eps_lloyd), ("matched", per_step_sum)):
                rng = stream(name, T, 0 if label == "lloyd_only" else 1)
                if name == "sphere":
                    start = sphere_packing_init(float(np.max(np.abs(data.server))), data.server.shape[1], k, rng)
                else:
                    start = server_kmeanspp_init(data.server, k, rng)
                lloyd = lloyd_noise(eps_l, budget.lloyd_split, budget.delta, budget.clip, budget.count_clip, T)
                final = fed_dp_lloyds(clipped, start, T, *lloyd, rng)
                eps = run_epsilon(budget.clip, budget.count_clip, budget.delta, T, lloyd, None)
                rows.append({**base, "method": name, "T": T, "budget": label, **evaluate(data, final, pooled, sq),
                             "init_cost_per_point": evaluate(data, start, pooled, sq)["cost_per_point"],
                             "eps_prv": eps["eps_prv"], "eps_basic": eps_l, "delta_basic": budget.delta})

    rng = stream("kfed")
    centres = kfed(data.clients, k, p.kfed_k_client, p.margin, rng)
    rows.append({**base, "method": "kfed", "T": 0, "budget": "non_private", **evaluate(data, centres, pooled, sq),
                 "eps_prv": math.inf, "eps_basic": math.inf, "delta_basic": 0.0})
    centres = oracle_kmeans(pooled, k, stream("oracle"))
    rows.append({**base, "method": "oracle", "T": 0, "budget": "non_private", **evaluate(data, centres, pooled, sq),
                 "eps_prv": math.inf, "eps_basic": math.inf, "delta_basic": 0.0})
    # negative control of the beats-the-baselines claims: what the server data give alone, without any client
    # data (zero privacy cost); if it beats a DP baseline too, beating that baseline does not need FedDP-Init
    centres = oracle_kmeans(data.server, k, stream("server_kmeans"))
    rows.append({**base, "method": "server_kmeans", "T": 0, "budget": "non_private",
                 **evaluate(data, centres, pooled, sq), "eps_prv": 0.0, "eps_basic": 0.0, "delta_basic": 0.0})
    # negative control of the oracle claim: the trivial solution, all k centres at the pooled mean (no clustering at all)
    centres = np.repeat(pooled.mean(axis=0, keepdims=True), k, axis=0)
    rows.append({**base, "method": "global_mean", "T": 0, "budget": "non_private",
                 **evaluate(data, centres, pooled, sq), "eps_prv": math.inf, "eps_basic": math.inf, "delta_basic": 0.0})
    return rows


def equivalence_check(k: int, seed: int) -> float:
    """Max |federated Lloyd step (noise off) - centralised Lloyd step on the pooled data| over a few
    steps on a small Gaussian-mixture instance with ``k`` components; the centralised step is scipy's
    ``kmeans2`` with ``iter=1`` from the same centres. (scikit-learn's ``KMeans`` is no reference here:
    it moves an empty cluster's centre to the point farthest from its centre, taking that point from
    another cluster, which no federated step does.) The last starting centre is put far from the data,
    so that every seed exercises the empty-cluster rule."""
    from scipy.cluster.vq import kmeans2
    import warnings

    rng = np.random.default_rng([seed, 99])
    data = make_gaussian_mixture(k, 8, 0.5, 7, 60, 2, 3, 0, rng)
    centres = data.server[:k].copy()
    centres[-1] = 100.0                                             # no point is nearest to it: empty
    worst = 0.0
    for _ in range(3):
        fed = fed_lloyd_step(data.clients, centres, 0.0, 0.0, rng)
        with warnings.catch_warnings():                             # kmeans2 warns on an empty cluster
            warnings.simplefilter("ignore")
            central, _ = kmeans2(data.pooled, centres, iter=1, minit="matrix", missing="warn")
        worst = max(worst, float(np.max(np.abs(fed - central))))
        centres = fed
    return worst


def run_seed(p: Params, seed: int) -> dict:
    """Every data set of ``p.datasets`` and every method for one seed:
    ``{"rows": [...], "equivalence_max_abs": float}``."""
    rows = []
    for dataset in p.datasets:
        rows += run_dataset(p, dataset, seed)
    return {"rows": rows, "equivalence_max_abs": equivalence_check(p.k, seed)}


def save_datasets(p: Params, seed: int, data_dir: str, gaussian_clients: int) -> list[str]:
    """The seed's federated data sets as Parquet files ``<data_dir>/<dataset>_seed<seed>.parquet``
    (:func:`dataset_frame`). Of the Gaussian mixture only the server and the first ``gaussian_clients``
    clients are kept (the full set is 100k x 100 and regenerates from the seed); digits are saved whole."""
    paths = []
    for name in p.datasets:
        frame = dataset_frame(prepare_data(p, name, seed), gaussian_clients if name == "gaussian" else None)
        paths.append(str(save_parquet(frame, Path(data_dir) / f"{name}_seed{seed}.parquet")))
    return paths
