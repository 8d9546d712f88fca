"""Bundled tables with controlled defects: label noise, class imbalance and near-duplicate redundancy.

Each knob is exact (the count it promises is the count it makes) and returns what it did, so a paper can
measure, e.g., how many flipped labels a selection method kept.
"""

from __future__ import annotations

import numpy as np

from tasks.data import load_bundled

TABLES = ("digits", "wine", "breast_cancer")


def bundled_table(name: str) -> tuple[np.ndarray, np.ndarray]:
    """A scikit-learn table, features standardised per column: ``X`` (n, d) float, ``y`` (n,) int."""
    if name not in TABLES:
        raise ValueError(f"unknown table '{name}'; choose one of {', '.join(TABLES)}")
    X, y = load_bundled(name)
    X = X.to_numpy(float)
    scale = X.std(axis=0)
    # Constant columns (digits' border pixels) stay 0 rather than dividing by 0.
    return (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0), y.to_numpy().astype(int)


def with_label_noise(y: np.ndarray, rate: float, n_classes: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric label noise: exactly round(rate · n) labels of ``y`` (n,) move to a uniformly drawn *other* class.

    Returns the noisy labels (n,) and the boolean mask (n,) of flipped rows.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    y = np.asarray(y)
    flipped = np.zeros(len(y), dtype=bool)
    flipped[rng.choice(len(y), size=round(rate * len(y)), replace=False)] = True
    noisy = y.copy()
    # An offset in 1..K-1 modulo K is uniform over the other classes and never lands on the true one.
    noisy[flipped] = (y[flipped] + rng.integers(1, n_classes, size=int(flipped.sum()))) % n_classes
    return noisy, flipped


def with_class_imbalance(X: np.ndarray, y: np.ndarray, ratio: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Subsample so class sizes decay geometrically: the first class keeps m rows, the last m/``ratio``.

    Classes are ranked by label; class c of K keeps round(m · ratio^(−c/(K−1))) rows, m the smallest class
    size of the input (so every class can supply its quota). ``ratio`` = 1 keeps m rows of each class.
    """
    if ratio < 1.0:
        raise ValueError(f"ratio must be >= 1, got {ratio}")
    classes = np.unique(y)
    smallest = min(int((y == c).sum()) for c in classes)
    exponents = np.arange(len(classes)) / max(len(classes) - 1, 1)
    keep = [rng.choice(np.flatnonzero(y == c), size=max(1, round(smallest * ratio ** -e)), replace=False)
            for c, e in zip(classes, exponents)]
    rows = np.sort(np.concatenate(keep))
    return X[rows], y[rows]


def with_redundancy(X: np.ndarray, y: np.ndarray, copies: int, jitter: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Append ``copies`` near-duplicates of every row: X + N(0, jitter²), same label.

    Returns X ((copies+1)·n, d), y and ``source`` ((copies+1)·n,): the original row each output row copies.
    """
    if copies < 0 or jitter < 0:
        raise ValueError(f"copies and jitter must be >= 0, got {copies} and {jitter}")
    source = np.tile(np.arange(len(X)), copies + 1)
    noise = rng.normal(0.0, jitter, size=(copies * len(X), *X.shape[1:]))
    return np.concatenate([X, X[source[len(X):]] + noise]), y[source], source
