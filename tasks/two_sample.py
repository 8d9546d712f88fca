"""Two-sample distances and tests for generated data: energy distance, RBF-MMD, sliced Wasserstein, permutation tests.

All functions take samples as arrays of shape (n, d) and (m, d) (a 1-D array is read as d = 1) and are plain NumPy.
They serve generative-quality metrics (synthetic tables, diffusion samples) and exactness checks (are two samplers
drawing from the same distribution?).
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def _as_2d(sample: np.ndarray) -> np.ndarray:
    array = np.asarray(sample, dtype=float)
    return array[:, None] if array.ndim == 1 else array


def pairwise_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distances, shape (n, m), computed from Gram matrices (clipped at 0 against round-off)."""
    a, b = _as_2d(a), _as_2d(b)
    squared = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.sqrt(np.maximum(squared, 0.0))


def energy_distance(x: np.ndarray, y: np.ndarray) -> float:
    """Székely's energy distance 2 E|X-Y| - E|X-X'| - E|Y-Y'| (V-statistic; zero iff the laws agree)."""
    return float(2.0 * pairwise_distances(x, y).mean() - pairwise_distances(x, x).mean()
                 - pairwise_distances(y, y).mean())


def median_bandwidth(x: np.ndarray, y: np.ndarray, max_points: int = 1000) -> float:
    """The median heuristic: the median pairwise distance in the pooled sample (first ``max_points`` of each)."""
    pooled = np.concatenate([_as_2d(x)[:max_points], _as_2d(y)[:max_points]])
    distances = pairwise_distances(pooled, pooled)
    positive = distances[np.triu_indices_from(distances, k=1)]
    positive = positive[positive > 0]
    return float(np.median(positive)) if positive.size else 1.0


def mmd_rbf(x: np.ndarray, y: np.ndarray, bandwidth: float | None = None) -> float:
    """Squared maximum mean discrepancy with the kernel exp(-|a-b|² / (2 h²)), biased (V-statistic) estimate.

    ``bandwidth`` h defaults to the median heuristic on the pooled sample.
    """
    h = median_bandwidth(x, y) if bandwidth is None else bandwidth

    def kernel_mean(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.exp(-pairwise_distances(a, b) ** 2 / (2.0 * h * h)).mean())

    return kernel_mean(x, x) + kernel_mean(y, y) - 2.0 * kernel_mean(x, y)


def sliced_wasserstein(x: np.ndarray, y: np.ndarray, n_projections: int = 128, seed: int = 0) -> float:
    """Sliced Wasserstein-2 distance: the root mean squared W2 over random unit directions.

    Each 1-D W2 compares empirical quantiles at the same levels (exact for equal sample sizes: sorted values are
    matched), so unequal sample sizes are allowed.
    """
    x, y = _as_2d(x), _as_2d(y)
    directions = np.random.default_rng(seed).standard_normal((x.shape[1], n_projections))
    directions /= np.linalg.norm(directions, axis=0, keepdims=True)
    if len(x) == len(y):
        quantiles_x, quantiles_y = np.sort(x @ directions, axis=0), np.sort(y @ directions, axis=0)
    else:
        levels = (np.arange(max(len(x), len(y))) + 0.5) / max(len(x), len(y))
        quantiles_x = np.quantile(x @ directions, levels, axis=0, method="inverted_cdf")
        quantiles_y = np.quantile(y @ directions, levels, axis=0, method="inverted_cdf")
    return float(np.sqrt(((quantiles_x - quantiles_y) ** 2).mean()))


def permutation_test(x: np.ndarray, y: np.ndarray,
                     statistic: Callable[[np.ndarray, np.ndarray], float] = energy_distance,
                     n_permutations: int = 200, seed: int = 0) -> dict[str, float]:
    """Permutation test of "x and y come from the same law": the statistic and its p-value.

    The p-value counts the observed split among the permutations, (1 + #{T_perm >= T_obs}) / (1 + n_permutations),
    so it is never 0 and is exactly uniform-or-larger under the null.
    """
    x, y = _as_2d(x), _as_2d(y)
    pooled = np.concatenate([x, y])
    labels = np.arange(len(pooled)) >= len(x)
    observed = statistic(x, y)
    rng = np.random.default_rng(seed)
    exceed = 0
    for _ in range(n_permutations):
        in_y = rng.permutation(labels)
        exceed += statistic(pooled[~in_y], pooled[in_y]) >= observed
    return {"statistic": float(observed), "p_value": (1.0 + exceed) / (1.0 + n_permutations)}


def kernel_permutation_tests(x: np.ndarray, y: np.ndarray, n_permutations: int = 200, seed: int = 0
                             ) -> dict[str, float]:
    """Energy-distance and RBF-MMD² (median bandwidth) permutation tests of "x and y share a law", from the same
    permutations: {"energy", "energy_p", "mmd", "mmd_p", "bandwidth"}.

    The statistics and p-values equal ``permutation_test`` with ``energy_distance`` / ``mmd_rbf`` under the same
    seed, but each permutation's statistic is a quadratic form aᵀ M a of its label vector a, so all of them come
    from one (N, N) @ (N, P) product over a single pooled distance matrix.
    """
    x, y = _as_2d(x), _as_2d(y)
    pooled = np.concatenate([x, y])
    n_x, n_y = len(x), len(y)
    distances = pairwise_distances(pooled, pooled)
    bandwidth = median_bandwidth(x, y)
    kernel = np.exp(-distances ** 2 / (2.0 * bandwidth * bandwidth))
    labels = np.zeros(len(pooled), dtype=bool)
    labels[n_x:] = True
    rng = np.random.default_rng(seed)
    in_y = np.stack([labels] + [rng.permutation(labels) for _ in range(n_permutations)], axis=1)  # (N, P + 1)
    in_x = (~in_y).astype(float)
    out = {"bandwidth": bandwidth}
    for name, matrix, sign in (("mmd", kernel, 1.0), ("energy", distances, -1.0)):
        row_sums = matrix.sum(1)
        xx = (in_x * (matrix @ in_x)).sum(0)
        xy = in_x.T @ row_sums - xx
        yy = row_sums.sum() - 2.0 * (in_x.T @ row_sums) + xx
        statistic = sign * (xx / n_x ** 2 + yy / n_y ** 2 - 2.0 * xy / (n_x * n_y))
        out[name] = float(statistic[0])
        out[f"{name}_p"] = float((1.0 + (statistic[1:] >= statistic[0]).sum()) / (1.0 + n_permutations))
    return out


def energy_permutation_test(x: np.ndarray, y: np.ndarray, n_permutations: int = 200, seed: int = 0
                            ) -> dict[str, float]:
    """The energy-distance permutation test alone: {"statistic", "p_value"} (see ``kernel_permutation_tests``)."""
    tests = kernel_permutation_tests(x, y, n_permutations, seed)
    return {"statistic": tests["energy"], "p_value": tests["energy_p"]}


def frechet_distance(features_x: np.ndarray, features_y: np.ndarray) -> float:
    """Fréchet distance between Gaussians fitted to two feature sets (n, d) and (m, d): the FID formula.

    |μx - μy|² + tr(Σx + Σy - 2 (Σx^½ Σy Σx^½)^½), with the matrix square root taken by a symmetric eigendecomposition.
    """
    features_x, features_y = _as_2d(features_x), _as_2d(features_y)
    mean_gap = features_x.mean(0) - features_y.mean(0)
    cov_x = np.atleast_2d(np.cov(features_x, rowvar=False))
    cov_y = np.atleast_2d(np.cov(features_y, rowvar=False))
    root_x = _sqrtm_psd(cov_x)
    cross = _sqrtm_psd(root_x @ cov_y @ root_x)
    return float(mean_gap @ mean_gap + np.trace(cov_x) + np.trace(cov_y) - 2.0 * np.trace(cross))


def _sqrtm_psd(matrix: np.ndarray) -> np.ndarray:
    eigenvalues, eigenvectors = np.linalg.eigh((matrix + matrix.T) / 2.0)
    return (eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))) @ eigenvectors.T


def classifier_two_sample_accuracy(x: np.ndarray, y: np.ndarray, n_neighbors: int = 5, seed: int = 0) -> float:
    """Classifier two-sample score: held-out accuracy of a k-NN classifier telling x from y (0.5 = indistinguishable).

    Equal numbers of points from each sample are used (the smaller size), split in half for training and testing.
    """
    from sklearn.neighbors import KNeighborsClassifier

    x, y = _as_2d(x), _as_2d(y)
    rng = np.random.default_rng(seed)
    n = min(len(x), len(y))
    x, y = x[rng.permutation(len(x))[:n]], y[rng.permutation(len(y))[:n]]
    half = n // 2
    train = np.concatenate([x[:half], y[:half]])
    test = np.concatenate([x[half:], y[half:]])
    train_labels = np.repeat([0, 1], half)
    test_labels = np.repeat([0, 1], n - half)
    classifier = KNeighborsClassifier(n_neighbors=n_neighbors).fit(train, train_labels)
    return float((classifier.predict(test) == test_labels).mean())
