"""Isolated eigenvalues of the conjugate kernel (CK) and neural tangent kernel (NTK) of deep random
networks on Gaussian-mixture inputs (Li, Han & Yang, ICML 2025), with a derived limit to compare.

Read top to bottom:

1. Activations, normalised so that E sigma(xi) = 0 and E sigma(xi)^2 = 1 for xi ~ N(0, 1), and their
   Gaussian moments b^2 = (E sigma'(xi))^2 (how much of a layer's input passes linearly) and
   a = E sigma'(xi)^2 (what the NTK's backward pass adds).
2. Data: a K-class Gaussian mixture x_i = (mu_{y_i} + z_i) / sqrt(p + |mu|^2) whose class means form a
   centred simplex, so the planted signal has rank K - 1 and squared singular value ``snr`` = theta^2
   (an information-plus-noise matrix); ``load_digits`` 1 vs 7 with the class means subtracted.
3. The random network (Fan & Wang 2020 scaling): X_l = sigma(W_l X_{l-1}) / sqrt(d_l), W_l with
   N(0, 1) entries, readout w ~ N(0, I). CK_l = X_l^T X_l (n x n, CK_0 = the input Gram matrix);
   NTK = sum_l CK_{l-1} o (S_l^T S_l) + CK_L with S_l the backpropagated signals (d_l x n).
4. Spectral tools: top eigenpairs, outliers beyond a null bulk edge, the alignment of the outlier
   eigenspace with the class structure, the block-constant fit of its projection matrix, k-means ARI.
5. The limit (our derivation, not transcribed from the paper, whose formulas we could not read):
   * input: the outliers of X_0^T X_0 for a rank-r signal plus N(0, 1/p) noise (Benaych-Georges &
     Nadakuditi 2012): lambda_0 = (1 + theta^2)(c_0 + theta^2) / theta^2 once theta^2 > sqrt(c_0),
     c_0 = n / p, with eigenvector alignment zeta_0 = 1 - c_0 (1 + theta^2) / (theta^2 (theta^2 + c_0));
   * every layer, by Gaussian equivalence, is a sample covariance of d_l rows with population
     Phi_l = b^2 CK_{l-1} + (1 - b^2) I (Fan & Wang's iterated Marchenko-Pastur map), and the NTK is
     to first order r_+ I + sum_l b^{2(L-l)} CK_l with r_+ = sum_{k=1..L} (a^k - b^{2k});
   * a deterministic equivalent of the resolvent of any such combination sum_j a_j CK_j - z I
     reduces it, layer by layer, to A_0(z) CK_0 - Z_0(z) I with scalar fixed points delta_j(z); an
     outlier of the combination sits where A_0(z) lambda_0 = Z_0(z) (above the bulk edge) and its
     eigenvector keeps the fraction zeta_0 / (-d/dz [A_0 lambda_0 - Z_0]) of the class signal.
   For the CK alone this is the generalised spiked model of Bai & Yao (2012), iterated over layers
   (the tests check the two against each other).
6. Experiments: ``null_edges`` (bulk edges: the same network on pure-noise inputs), ``run_seed``
   (the SNR sweep and the digits of one seed), ``theory_predictions`` (the limit for every setting);
   these take the flow's typed params as ``params`` (not ``p``, which is a field: the input dimension).

Shapes: data matrices are (p, n) (columns are samples), kernels (n, n), eigenvector blocks (n, k).
Randomness only through ``np.random.default_rng([seed, stream])``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, get_args

import numpy as np
from scipy import integrate, linalg, optimize
from scipy.sparse import linalg as sparse_linalg
from scipy.cluster import vq
from sklearn.metrics import adjusted_rand_score

from flows.ck_ntk_spikes.params import Activation, Params
from tasks.data import load_xy

# ---------------------------------------------------------------------------------------------
# 1. Activations
# ---------------------------------------------------------------------------------------------

SIN_FREQ = 1.5  # sin(1.5 x): odd, bounded, Lipschitz and far from linear (b^2 ~ 0.48)
CUBIC_BETA = 1.0 / math.sqrt(6.0)  # x + beta (x^3 - 3x): b^2 = 1/2, but not Lipschitz (see notes)
ACTIVATIONS: tuple[str, ...] = get_args(Activation)  # ("tanh", "relu", "sin", "cubic")


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _gauss_mean(f: Callable[[float], float]) -> float:
    """E f(xi), xi ~ N(0, 1), by adaptive quadrature split at the kink 0."""
    left = integrate.quad(lambda x: f(x) * _phi(x), -np.inf, 0.0, limit=200, epsabs=1e-13)[0]
    right = integrate.quad(lambda x: f(x) * _phi(x), 0.0, np.inf, limit=200, epsabs=1e-13)[0]
    return left + right


@lru_cache(maxsize=None)
def _tanh_scale() -> float:
    return 1.0 / math.sqrt(_gauss_mean(lambda x: math.tanh(x) ** 2))


_RELU_MEAN = 1.0 / math.sqrt(2.0 * math.pi)
_RELU_STD = math.sqrt(0.5 - 1.0 / (2.0 * math.pi))
_SIN_STD = math.sqrt((1.0 - math.exp(-2.0 * SIN_FREQ ** 2)) / 2.0)
_CUBIC_STD = math.sqrt(1.0 + 6.0 * CUBIC_BETA ** 2)


def activation(name: str) -> tuple[Callable, Callable]:
    """(sigma, sigma') of a normalised activation, elementwise on arrays (dtype preserved)."""
    if name == "tanh":
        k = _tanh_scale()
        return (lambda x: np.tanh(x) * k), (lambda x: (1.0 - np.tanh(x) ** 2) * k)
    if name == "relu":
        return ((lambda x: (np.maximum(x, 0) - _RELU_MEAN) / _RELU_STD),
                (lambda x: (x > 0).astype(x.dtype) / _RELU_STD))
    if name == "sin":
        return ((lambda x: np.sin(SIN_FREQ * x) / _SIN_STD),
                (lambda x: SIN_FREQ * np.cos(SIN_FREQ * x) / _SIN_STD))
    if name == "cubic":
        return ((lambda x: (x + CUBIC_BETA * (x ** 3 - 3 * x)) / _CUBIC_STD),
                (lambda x: (1 + CUBIC_BETA * (3 * x ** 2 - 3)) / _CUBIC_STD))
    raise ValueError(f"unknown activation '{name}'; choose one of {', '.join(ACTIVATIONS)}")


@lru_cache(maxsize=None)
def gaussian_moments(name: str) -> dict[str, float]:
    """E sigma, E sigma^2, b^2 = (E sigma')^2 and a = E sigma'^2 under N(0, 1)."""
    f, fp = activation(name)
    one = lambda g: (lambda x: float(g(np.array([x]))[0]))  # noqa: E731
    return {"mean": _gauss_mean(one(f)), "second": _gauss_mean(lambda x: one(f)(x) ** 2),
            "b2": _gauss_mean(one(fp)) ** 2, "a": _gauss_mean(lambda x: one(fp)(x) ** 2)}


def ntk_coefficients(name: str, depth: int) -> tuple[np.ndarray, float]:
    """First-order NTK = r_+ I + sum_{j=0..L} r_j CK_j: r_j = b^{2(L-j)}, r_+ = sum_k (a^k - b^{2k})."""
    m = gaussian_moments(name)
    r = np.array([m["b2"] ** (depth - j) for j in range(depth + 1)])
    r_plus = sum(m["a"] ** k - m["b2"] ** k for k in range(1, depth + 1))
    return r, float(r_plus)


# ---------------------------------------------------------------------------------------------
# 2. Data
# ---------------------------------------------------------------------------------------------


def simplex_means(p: int, classes: int, n_per_class: int, snr: float) -> np.ndarray:
    """Class means (p, K): a centred simplex in the first K coordinates, scaled so that the signal
    matrix M J^T / sqrt(p) has its K - 1 nonzero squared singular values equal to ``snr``."""
    if classes < 2 or classes > p:
        raise ValueError("need 2 <= classes <= p")
    norm2 = snr * p * (classes - 1) / (classes * n_per_class)
    M = np.zeros((p, classes))
    for a in range(classes):
        v = np.full(classes, -1.0 / classes)
        v[a] += 1.0
        M[:classes, a] = v / np.linalg.norm(v) * math.sqrt(norm2)
    return M


def gmm_inputs(noise: np.ndarray, labels: np.ndarray, classes: int, snr: float) -> tuple[np.ndarray, float]:
    """x_i = (mu_{y_i} + z_i) / sqrt(p + |mu|^2) for noise z (p, n): columns of unit mean square norm.

    Returns X (p, n) and s0 = p / (p + |mu|^2), the scale of the noise part (used by the limit).
    """
    p, n = noise.shape
    M = simplex_means(p, classes, n // classes, snr)
    norm2 = float(M[:, 0] @ M[:, 0])
    return (M[:, labels] + noise) / math.sqrt(p + norm2), p / (p + norm2)


def digits_inputs(images: np.ndarray, labels: np.ndarray, per_class: int,
                  digits: tuple[int, int] = (1, 7)) -> tuple[np.ndarray, np.ndarray]:
    """The first ``per_class`` images (n_images, 64) of each digit, class means subtracted (as the
    paper does with MNIST 1 vs 7), scaled to unit mean square norm. Returns X (64, n) and y (n,)."""
    blocks, ys = [], []
    for k, digit in enumerate(digits):
        rows = images[labels == digit][:per_class].astype(float)
        if len(rows) < per_class:
            raise ValueError(f"digit {digit} has only {len(rows)} images")
        blocks.append(rows - rows.mean(axis=0))
        ys.append(np.full(per_class, k))
    X = np.concatenate(blocks).T
    X /= math.sqrt((X ** 2).sum(axis=0).mean())
    return X, np.concatenate(ys)


# ---------------------------------------------------------------------------------------------
# 3. The random network and its kernels
# ---------------------------------------------------------------------------------------------


def random_weights(rng: np.random.Generator, p: int, width: int, depth: int,
                   dtype=np.float32) -> tuple[list[np.ndarray], np.ndarray]:
    """W_1 (d, p), W_2..W_L (d, d) and the readout w (d,), all N(0, 1)."""
    dims = [p] + [width] * depth
    Ws = [rng.standard_normal((dims[l + 1], dims[l])).astype(dtype) for l in range(depth)]
    return Ws, rng.standard_normal(width).astype(dtype)


def kernels(X: np.ndarray, Ws: list[np.ndarray], w: np.ndarray, act: str) -> tuple[list[np.ndarray], np.ndarray]:
    """CK_0..CK_L (each (n, n), CK_0 = X^T X) and the NTK (n, n) of f(x) = w^T x_L.

    x_l = sigma(W_l x_{l-1}) / sqrt(d_l). The NTK sums, over the parameters W_1..W_L and w, the
    Gram matrices of the per-sample gradients: d f / d W_l = delta_l x_{l-1}^T gives
    CK_{l-1} o (delta_l^T delta_l), with delta_L = sigma'(h_L) o w / sqrt(d_L) and
    delta_l = sigma'(h_l) o (W_{l+1}^T delta_{l+1}) / sqrt(d_l) (columns = samples).
    """
    f, fp = activation(act)
    X = X.astype(Ws[0].dtype)
    xs, hs = [X], []
    for W in Ws:
        h = W @ xs[-1]
        hs.append(h)
        xs.append(f(h) / np.sqrt(np.asarray(W.shape[0], dtype=X.dtype)))
    cks = [x.T @ x for x in xs]
    ntk = cks[-1].copy()
    delta = fp(hs[-1]) * w[:, None] / np.sqrt(np.asarray(len(w), dtype=X.dtype))
    for l in range(len(Ws) - 1, -1, -1):
        ntk += cks[l] * (delta.T @ delta)
        if l > 0:
            delta = fp(hs[l - 1]) * (Ws[l].T @ delta) / np.sqrt(np.asarray(hs[l - 1].shape[0], dtype=X.dtype))
    return cks, ntk


# ---------------------------------------------------------------------------------------------
# 4. Spectral tools
# ---------------------------------------------------------------------------------------------


def top_eigh(M: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest eigenvalues (descending, float64) and their eigenvectors (n, k) of symmetric M."""
    n = M.shape[0]
    k = min(k, n)
    vals, vecs = linalg.eigh(M, subset_by_index=[n - k, n - 1], driver="evr")
    return vals[::-1].astype(float), vecs[:, ::-1].astype(float)


def largest_eigenvalue(M: np.ndarray) -> float:
    """The largest eigenvalue of symmetric PSD M by Lanczos (ARPACK) from a fixed start vector;
    dense LAPACK below n = 64."""
    n = M.shape[0]
    if n < 64:
        return float(linalg.eigh(M, eigvals_only=True)[-1])
    v0 = np.random.default_rng(12345).standard_normal(n).astype(M.dtype)
    return float(sparse_linalg.eigsh(M, k=1, which="LA", v0=v0, tol=1e-8, return_eigenvectors=False)[0])


def class_contrasts(labels: np.ndarray, classes: int) -> np.ndarray:
    """Orthonormal basis (n, K - 1) of the centred class indicators: the signal's span in sample space."""
    J = np.eye(classes)[labels]
    J = J - J.mean(axis=0)
    U, s, _ = np.linalg.svd(J, full_matrices=False)
    return U[:, s > 1e-8 * s.max()]


def alignment(U: np.ndarray, V: np.ndarray) -> float:
    """zeta = |V^T U|_F^2 / k: the mean squared projection of the k columns of U onto span(V)."""
    if U.shape[1] == 0:
        return 0.0
    return float(np.sum((V.T @ U) ** 2) / U.shape[1])


def block_fit_error(U: np.ndarray, labels: np.ndarray, classes: int) -> float:
    """|P - P_block|_F / |P|_F for P = U U^T (U orthonormal, (n, k)) and P_block its best
    class-by-class constant fit (block means). P_block is an orthogonal projection of P in matrix
    space, so |P - P_block|^2 = |P|^2 - |P_block|^2 and P itself is never formed."""
    k = U.shape[1]
    if k == 0:
        return 1.0
    J = np.eye(classes)[labels]
    sizes = J.sum(axis=0)
    block = (J.T @ U) @ (J.T @ U).T / np.outer(sizes, sizes)  # (K, K) block means of P
    fit2 = float(np.sum(np.outer(sizes, sizes) * block ** 2))
    return math.sqrt(max(k - fit2, 0.0) / k)


def kmeans_labels(U: np.ndarray, classes: int, seed: int, n_init: int = 5) -> np.ndarray:
    """k-means (k-means++ starts, Lloyd iterations; scipy ``kmeans2``) on the rows of U (n, k):
    the best of ``n_init`` runs by within-cluster sum of squares. Labels (n,)."""
    rng = np.random.default_rng([seed, 7])
    best, best_inertia = None, np.inf
    for _ in range(n_init):
        centres, lab = vq.kmeans2(U, classes, minit="++", seed=rng, iter=50)
        inertia = float(np.sum((U - centres[lab]) ** 2))
        if inertia < best_inertia:
            best, best_inertia = lab, inertia
    return best


def kmeans_ari(U: np.ndarray, labels: np.ndarray, classes: int, seed: int, n_init: int = 5) -> float:
    """ARI of k-means (K clusters) on the rows of the eigenvector block U (n, k); 0 when k = 0."""
    if U.shape[1] == 0:
        return 0.0
    return float(adjusted_rand_score(labels, kmeans_labels(U, classes, seed, n_init)))


def class_localisation(U: np.ndarray, labels: np.ndarray) -> float:
    """Mean over the columns of U of the largest share of a column's squared mass held by one class
    (1/K for a vector spread evenly, 1 for a vector living on one class)."""
    if U.shape[1] == 0:
        return float("nan")
    shares = np.stack([np.sum(U[labels == k] ** 2, axis=0) for k in np.unique(labels)])
    return float(np.mean(shares.max(axis=0) / shares.sum(axis=0)))


# ---------------------------------------------------------------------------------------------
# 5. The limit
# ---------------------------------------------------------------------------------------------


def input_spike(snr: float, c0: float) -> tuple[float | None, float]:
    """Limit outlier of X^T X (n x n) for X = signal (squared singular value snr) + N(0, 1/p) noise,
    c0 = n / p, and the squared alignment of its eigenvector with the signal's right singular vector.
    (None, 0) below the transition snr <= sqrt(c0)."""
    if snr <= math.sqrt(c0):
        return None, 0.0
    lam = (1 + snr) * (c0 + snr) / snr
    return lam, 1 - c0 * (1 + snr) / (snr * (snr + c0))


@dataclass(frozen=True)
class LimitModel:
    """Layer ratios c_j = n / d_j (j = 0 is the input, d_0 = p), the activation's b^2, and the scale
    s0 of the input noise (the input Gram bulk is s0 times Marchenko-Pastur(c_0))."""

    c: tuple[float, ...]
    b2: float
    s0: float = 1.0

    @property
    def s(self) -> float:
        return 1.0 - self.b2


def _effective(delta: np.ndarray, coeffs: np.ndarray, z: float, model: LimitModel):
    """Top-down pass: effective coefficients A_j and spectral parameters Z_j (levels j = T..0) of the
    deterministic equivalent, and g = (1/n) tr (sum_j coeffs_j CK_j - z)^{-1} = -1 / Z_{-1}."""
    T = len(coeffs) - 1
    A, Z = np.empty(T + 1), np.empty(T + 1)
    A[T], Z[T] = coeffs[T], z
    for j in range(T, 0, -1):
        A[j - 1] = coeffs[j - 1] + A[j] * model.b2 / (1 + delta[j])
        Z[j - 1] = Z[j] - A[j] * model.s / (1 + delta[j])
    z_bottom = Z[0] - A[0] * model.s0 / (1 + delta[0])
    return A, Z, -1.0 / z_bottom


def _residual(delta: np.ndarray, coeffs: np.ndarray, z: float, model: LimitModel) -> np.ndarray:
    """delta_j = (A_j / d_j) tr(Phi_j R^{-1}) with Phi_j = b^2 CK_{j-1} + (1 - b^2) I (Phi_0 = s0 I),
    where (1/n) tr(CK_{j-1} R^{-1}) = delta_{j-1} / (c_{j-1} A_{j-1} (1 + delta_{j-1}))."""
    A, _, g = _effective(delta, coeffs, z, model)
    c = model.c
    r = np.empty_like(delta)
    r[0] = delta[0] - A[0] * c[0] * model.s0 * g
    for j in range(1, len(delta)):
        tau = delta[j - 1] / (c[j - 1] * A[j - 1] * (1 + delta[j - 1]))
        r[j] = delta[j] - A[j] * c[j] * (model.b2 * tau + model.s * g)
    return r


def _solve(coeffs: np.ndarray, z: float, model: LimitModel, init: np.ndarray) -> np.ndarray | None:
    """The fixed point delta(z) on the branch that continues from z = +infinity (-1 < delta_j < 0),
    or None where it does not exist (inside the bulk)."""
    sol, _, _, _ = optimize.fsolve(_residual, init, args=(coeffs, z, model), full_output=True, xtol=1e-12)
    if not np.all(np.isfinite(sol)) or np.max(np.abs(_residual(sol, coeffs, z, model))) > 1e-10:
        return None
    if np.any(sol <= -1.0) or np.any(sol > 1e-12):
        return None
    return sol


class _Branch:
    """The deterministic equivalent of sum_j coeffs_j CK_j along z, followed down from far above
    the spectrum to the bulk edge (where the real solution ceases to exist)."""

    def __init__(self, coeffs: np.ndarray, model: LimitModel):
        if model.b2 <= 0 or coeffs[-1] <= 0 or len(coeffs) != len(model.c):
            raise ValueError("need b^2 > 0, a positive top coefficient and one ratio per level")
        self.coeffs, self.model = np.asarray(coeffs, dtype=float), model
        # far above the spectrum: each layer at most multiplies the top of the spectrum by (1 + sqrt c)^2
        top, bound = 1.0, 0.0
        for a, c in zip(self.coeffs, model.c):
            top *= (1 + math.sqrt(c)) ** 2
            bound += a * top
        self.z_hi = 20.0 * bound + 10.0
        self.path: list[tuple[float, np.ndarray]] = []
        z, delta = self.z_hi, np.zeros(len(coeffs))
        while True:
            nxt = _solve(self.coeffs, z, model, delta)
            if nxt is None:
                break
            self.path.append((z, nxt))
            delta, z = nxt, z * 0.9
        if not self.path:
            raise RuntimeError("no solution far above the spectrum")
        lo, hi = z, self.path[-1][0]  # solvable at hi, not at lo
        for _ in range(45):
            mid = math.sqrt(lo * hi)
            sol = _solve(self.coeffs, mid, model, self.path[-1][1])
            if sol is None:
                lo = mid
            else:
                hi = mid
                self.path.append((mid, sol))
        self.edge = hi
        self.edge_delta = next(d for zz, d in reversed(self.path) if zz == hi)

    def at(self, z: float) -> tuple[np.ndarray, np.ndarray, float]:
        """(A, Z, g) at z >= edge, warm-started from the closest point above on the path."""
        if z < self.edge:
            raise ValueError("z below the bulk edge")
        if z == self.edge:
            return _effective(self.edge_delta, self.coeffs, z, self.model)
        above = [(zz, d) for zz, d in self.path if zz >= z]
        init = min(above, key=lambda t: t[0])[1] if above else self.path[0][1]
        sol = _solve(self.coeffs, z, self.model, init)
        if sol is None:
            raise RuntimeError(f"fixed point lost at z={z}")
        return _effective(sol, self.coeffs, z, self.model)

    def stieltjes(self, z: float) -> float:
        return self.at(z)[2]

    def mismatch(self, z: float, lam0: float) -> float:
        """D(z) = A_0(z) lambda_0 - Z_0(z): zero at an outlier driven by the input outlier lambda_0."""
        A, Z, _ = self.at(z)
        return A[0] * lam0 - Z[0]

    def critical_input(self) -> float:
        """The smallest input outlier lambda_0 that still produces an outlier: Z_0 / A_0 at the edge."""
        A, Z, _ = self.at(self.edge)
        return Z[0] / A[0]

    def outlier(self, lam0: float) -> tuple[float, float] | None:
        """(location, eigenvector retention factor) of the outlier driven by lambda_0, or None."""
        if self.mismatch(self.edge, lam0) <= 0:
            return None
        hi = self.z_hi
        while self.mismatch(hi, lam0) > 0:  # a very strong spike: look further up
            hi *= 2.0
        z = optimize.brentq(self.mismatch, self.edge, hi, args=(lam0,), xtol=1e-12, rtol=1e-12)
        h = 1e-6 * z
        slope = (self.mismatch(z + h, lam0) - self.mismatch(max(z - h, self.edge), lam0)) / (z + h - max(z - h, self.edge))
        return z, -1.0 / slope


def kernel_coefficients(kernel: str, act: str, depth: int) -> tuple[np.ndarray, float]:
    """(coeffs over CK_0..CK_T, shift) of a kernel's first-order form: 'CK<l>' is CK_l alone,
    'NTK' is r_+ I + sum_j r_j CK_j."""
    if kernel == "NTK":
        return ntk_coefficients(act, depth)
    level = int(kernel[2:])
    coeffs = np.zeros(level + 1)
    coeffs[level] = 1.0
    return coeffs, 0.0


def kernel_names(depth: int) -> list[str]:
    return [f"CK{l}" for l in range(depth + 1)] + ["NTK"]


def noise_scale(snr: float, n: int, classes: int) -> float:
    """s0 = p / (p + |mu|^2) of ``gmm_inputs``: 1 / (1 + snr (K - 1) / n)."""
    return 1.0 / (1.0 + snr * (classes - 1) / n)


def limit_model(act: str, n: int, p: int, width: int, level: int, s0: float = 1.0) -> LimitModel:
    return LimitModel(c=tuple([n / p] + [n / width] * level), b2=gaussian_moments(act)["b2"], s0=s0)


def predict(act: str, n: int, p: int, width: int, depth: int, classes: int, snr: float,
            kernel: str) -> dict[str, float | None]:
    """Limit of one kernel ('CK0'..'CK<L>' or 'NTK') at one snr: its bulk edge, the location of the
    (K - 1)-fold outlier and the alignment zeta of the outlier eigenspace with the class contrasts
    (outlier None and zeta 0 below the transition)."""
    coeffs, shift = kernel_coefficients(kernel, act, depth)
    s0 = noise_scale(snr, n, classes)
    branch = _Branch(coeffs, limit_model(act, n, p, width, len(coeffs) - 1, s0))
    lam_raw, zeta0 = input_spike(snr, n / p)
    hit = None if lam_raw is None else branch.outlier(s0 * lam_raw)
    return {"edge": branch.edge + shift, "outlier": None if hit is None else hit[0] + shift,
            "zeta": 0.0 if hit is None else zeta0 * hit[1]}


def population_outlier(act: str, n: int, depth: int, classes: int, snr: float, kernel: str) -> float:
    """The outlier of ``kernel`` without random-matrix corrections, as if n/p and n/d were 0 (population
    kernels): input spike s0 (1 + snr), each layer b^2 lambda + 1 - b^2 (the population of a layer is
    b^2 CK_(l-1) + (1 - b^2) I), the NTK the same first-order combination of those. Its eigenvectors would
    be the class contrasts themselves (zeta = 1). The negative control of the position and alignment claims:
    a tolerance that this naive limit also meets cannot tell the random-matrix limit from no theory."""
    coeffs, shift = kernel_coefficients(kernel, act, depth)
    b2 = gaussian_moments(act)["b2"]
    lam = noise_scale(snr, n, classes) * (1.0 + snr)
    layers = [lam]
    for _ in range(len(coeffs) - 1):
        layers.append(b2 * layers[-1] + 1.0 - b2)
    return float(shift + np.dot(coeffs, layers))


def transition_snr(act: str, n: int, p: int, width: int, depth: int, classes: int, kernel: str) -> float:
    """The smallest snr whose input outlier survives to an outlier of ``kernel`` (its phase
    transition): solve s0(snr) lambda_0(snr) = critical input outlier, s0 refreshed twice."""
    coeffs, _ = kernel_coefficients(kernel, act, depth)
    c0, snr = n / p, math.sqrt(n / p)
    for _ in range(3):
        s0 = noise_scale(snr, n, classes)
        need = _Branch(coeffs, limit_model(act, n, p, width, len(coeffs) - 1, s0)).critical_input() / s0
        # (1 + t)(c0 + t) / t = need  <=>  t^2 + (1 + c0 - need) t + c0 = 0, larger root
        bq = 1 + c0 - need
        disc = bq * bq - 4 * c0
        snr = max((-bq + math.sqrt(max(disc, 0.0))) / 2, math.sqrt(c0))
    return float(snr)


# ---------------------------------------------------------------------------------------------
# 6. Experiments
# ---------------------------------------------------------------------------------------------

NOISE_STREAM, WEIGHT_STREAM, NULL_STREAM, DIGITS_NULL_STREAM = 0, 1, 2, 3


def _kernels_of(X: np.ndarray, Ws, w, act: str) -> dict[str, np.ndarray]:
    cks, ntk = kernels(X, Ws, w, act)
    return {**{f"CK{l}": K for l, K in enumerate(cks)}, "NTK": ntk}


def null_edges(null_inputs: list[np.ndarray], Ws: list[np.ndarray], w: np.ndarray, act: str) -> dict[str, float]:
    """Bulk edge of every kernel without class structure: the same network (Ws, w) on pure-noise
    inputs (each (p, n), same covariance trace as the data, no class means); the largest
    eigenvalue averaged over the draws."""
    tops: dict[str, list[float]] = {}
    for X in null_inputs:
        for name, K in _kernels_of(X, Ws, w, act).items():
            tops.setdefault(name, []).append(largest_eigenvalue(K))
    return {name: float(np.mean(v)) for name, v in tops.items()}


def spike_summary(K: np.ndarray, edge: float, labels: np.ndarray, classes: int, V: np.ndarray,
                  seed: int, n_top: int) -> dict:
    """Outliers of one kernel beyond ``edge`` and what their eigenvectors carry.

    ``count``: eigenvalues above the edge (among the top ``n_top``); ``mean_top_r`` and ``top``:
    mean and largest of the r = K - 1 largest eigenvalues (the planted spike's limit is r-fold);
    ``zeta``: alignment of the top-r eigenvectors with the class contrasts V; ``ari`` and
    ``block_fit``: k-means ARI and block-constant fit error of the eigenvectors of the counted outliers;
    ``ones_next``: squared cosine between the (r+1)-th eigenvector and the all-ones vector (an
    uninformative global spike, see the notes).
    """
    r = classes - 1
    vals, vecs = top_eigh(K, n_top)
    count = int(np.sum(vals > edge))
    U = vecs[:, :count]
    return {"count": count, "edge": float(edge), "top": float(vals[0]), "mean_top_r": float(vals[:r].mean()),
            "eigs": [float(v) for v in vals[: r + 2]], "zeta": alignment(vecs[:, :r], V),
            "ones_next": float(vecs[:, r].sum() ** 2 / len(vecs)),
            "ari": kmeans_ari(U, labels, classes, seed), "block_fit": block_fit_error(U, labels, classes)}


def run_seed(params: Params, seed: int, digits: tuple[np.ndarray, np.ndarray] | str | None = None) -> dict:
    """One seed: the SNR sweep on the Gaussian mixture (every activation of ``params.sweep_activations``
    at every snr of ``params.snr_grid``, the others of ``params.top_activations`` only at the top snr)
    and the digits experiment (``run_digits``).

    Common random numbers: one data-noise matrix Z (p, n) and one set of weights per seed, shared
    by every snr and activation; the null edges use the same weights on ``params.null_draws`` fresh
    pure-noise inputs X = Z' / sqrt(p). An outlier must exceed the null edge by the factor
    1 + ``params.edge_margin``. ``digits``: the inputs (X (64, n), y (n,)) of ``digits_inputs``, or the
    path of a Parquet file of ``load_digits`` (features and a ``target`` column; the first
    ``params.digits_per_class`` images of 1 and of 7 are used), or None to skip the digits.
    Returns {"seed", "rows", "digits", "digits_vectors", "timings"}, JSON-able.
    """
    n, p, width, depth, classes = params.n, params.p, params.width, params.depth, params.classes
    margin, n_top = 1.0 + params.edge_margin, classes - 1 + 4
    started = time.perf_counter()
    labels = np.repeat(np.arange(classes), n // classes)
    noise = np.random.default_rng([seed, NOISE_STREAM]).standard_normal((p, n))
    Ws, w = random_weights(np.random.default_rng([seed, WEIGHT_STREAM]), p, width, depth)
    nulls = [np.random.default_rng([seed, NULL_STREAM, k]).standard_normal((p, n)) / math.sqrt(p)
             for k in range(params.null_draws)]
    V = class_contrasts(labels, classes)
    top_snr = max(params.snr_grid)
    rows, edges = [], {}
    for act in params.top_activations:
        edges[act] = null_edges(nulls, Ws, w, act)
        snrs = params.snr_grid if act in params.sweep_activations else [top_snr]
        for snr in snrs:
            X, _ = gmm_inputs(noise, labels, classes, snr)
            for name, K in _kernels_of(X, Ws, w, act).items():
                rows.append({"seed": seed, "activation": act, "snr": float(snr), "kernel": name,
                             **spike_summary(K, margin * edges[act][name], labels, classes, V, seed, n_top)})
    sweep_s = time.perf_counter() - started
    digit_rows, vectors = [], {}
    if isinstance(digits, str):
        images, targets = load_xy(digits)
        digits = digits_inputs(images.to_numpy(), targets.to_numpy(), params.digits_per_class)
    if digits is not None:
        digit_rows, vectors = run_digits(params, seed, *digits)
    return {"seed": seed, "rows": rows, "null_edges": edges, "digits": digit_rows, "digits_vectors": vectors,
            "timings": {"sweep_s": sweep_s, "digits_s": time.perf_counter() - started - sweep_s}}


def run_digits(params: Params, seed: int, X: np.ndarray, y: np.ndarray) -> tuple[list[dict], dict]:
    """Digits 1 vs 7 (class means subtracted, X (64, n)) through the seed's random network (``params.width``,
    ``params.depth``), every activation of ``params.top_activations``. The null is the same network on
    ``params.null_draws`` white-noise inputs of the same trace; outliers exceed it by 1 + ``params.edge_margin``. Reported, not gated: number of outliers, k-means ARI on (at most 10)
    outlier eigenvectors, and how much each outlier eigenvector lives on one class (``localisation``)."""
    p, n = X.shape
    width, depth, margin = params.width, params.depth, 1.0 + params.edge_margin
    Ws, w = random_weights(np.random.default_rng([seed, WEIGHT_STREAM]), p, width, depth)
    scale = math.sqrt(np.sum(X ** 2) / (n * p))
    nulls = [scale * np.random.default_rng([seed, DIGITS_NULL_STREAM, k]).standard_normal((p, n))
             for k in range(params.null_draws)]
    rows, vectors = [], {}
    for act in params.top_activations:
        edges = null_edges(nulls, Ws, w, act)
        for name, K in _kernels_of(X, Ws, w, act).items():
            edge = margin * edges[name]
            vals, vecs = top_eigh(K, 30)
            count = int(np.sum(vals > edge))
            U = vecs[:, :min(count, 10)]
            rows.append({"seed": seed, "activation": act, "kernel": name, "count": count, "edge": edge,
                         "top": float(vals[0]), "ari": kmeans_ari(U, y, 2, seed),
                         "localisation": class_localisation(U, y)})
            if name == f"CK{depth}" and act == params.top_activations[0]:
                vectors = {"activation": act, "kernel": name, "labels": y.tolist(),
                           "v1": vecs[:, 0].tolist(), "v2": vecs[:, 1].tolist()}
    return rows, vectors


def theory_predictions(params: Params) -> dict:
    """The limit for every activation of ``params.top_activations`` (network n, p, width, depth, classes):
    per kernel its transition snr, and its edge, outlier and zeta at every snr of ``params.snr_grid``
    (sweep activations) or at the top snr (the others), plus a dense snr grid of ``params.theory_points``
    values for the sweep activations' curves."""
    n, p, width, depth, classes = params.n, params.p, params.width, params.depth, params.classes
    top = max(params.snr_grid)
    dense = list(np.geomspace(math.sqrt(n / p) * 1.001, top, params.theory_points))
    out = {}
    for act in params.top_activations:
        snrs = sorted(set(params.snr_grid) | set(dense)) if act in params.sweep_activations else [top]
        rows = []
        for kernel in kernel_names(depth):
            for snr in snrs:
                pred = predict(act, n, p, width, depth, classes, float(snr), kernel)
                rows.append({"activation": act, "kernel": kernel, "snr": float(snr),
                             "on_grid": snr in params.snr_grid, **{k: (None if v is None else float(v))
                                                                     for k, v in pred.items()}})
        out[act] = {"moments": gaussian_moments(act),
                    "ntk": {"r": ntk_coefficients(act, depth)[0].tolist(), "r_plus": ntk_coefficients(act, depth)[1]},
                    "transition_snr": {k: transition_snr(act, n, p, width, depth, classes, k) for k in kernel_names(depth)},
                    "rows": rows}
    return out
