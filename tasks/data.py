"""Datasets that exist offline (scikit-learn's bundled sets, generated data) and Parquet storage."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from sklearn import datasets

from paperflows.core.io import atomic_write_bytes

_BUNDLED: dict[str, Callable] = {
    "breast_cancer": datasets.load_breast_cancer,
    "wine": datasets.load_wine,
    "diabetes": datasets.load_diabetes,
    "digits": datasets.load_digits,
    "iris": datasets.load_iris,
}

BUNDLED_NAMES = tuple(_BUNDLED)


def load_bundled(name: str) -> tuple[pd.DataFrame, pd.Series]:
    """A dataset shipped inside scikit-learn: features ``X`` (n_samples, n_features) and target ``y`` (n_samples,)."""
    if name not in _BUNDLED:
        raise ValueError(f"unknown bundled dataset '{name}'; choose one of {', '.join(BUNDLED_NAMES)}")
    bunch = _BUNDLED[name](as_frame=True)
    X = bunch.data.copy()
    X.columns = [str(c) for c in X.columns]
    return X, bunch.target.rename("target")


def save_parquet(frame: pd.DataFrame, path: Path) -> Path:
    """Write ``frame`` to ``path`` as Parquet, atomically."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, engine="pyarrow", index=False)
    atomic_write_bytes(Path(path), buffer.getvalue())
    return Path(path)


def load_parquet(path: Path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"dataset {path} is missing: run its paper's flow (dvc repro paper@<slug>) first")
    return pd.read_parquet(path, engine="pyarrow")


TOY_2D_NAMES = ("moons", "eight_gaussians", "checkerboard", "swiss_roll")


def make_toy_2d(name: str, n_samples: int, seed: int) -> np.ndarray:
    """A generated 2-D benchmark density for generative models, shape (n_samples, 2), scaled to roughly unit std.

    ``moons`` (scikit-learn, noise 0.05), ``eight_gaussians`` (a ring of 8 modes, radius 2, std 0.1 before
    scaling), ``checkerboard`` (uniform on 8 of the 16 squares of [-2, 2]²), ``swiss_roll`` (scikit-learn's roll,
    the (x, z) slice, noise 0.25).
    """
    rng = np.random.default_rng(seed)
    if name == "moons":
        points, _ = datasets.make_moons(n_samples, noise=0.05, random_state=int(rng.integers(2**31)))
    elif name == "eight_gaussians":
        angles = rng.integers(8, size=n_samples) * (np.pi / 4)
        centres = 2.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
        points = centres + 0.1 * rng.standard_normal((n_samples, 2))
    elif name == "checkerboard":
        x = rng.uniform(-2, 2, n_samples)
        column = np.floor(x + 2).astype(int)
        row = 2 * rng.integers(2, size=n_samples) + (column % 2)
        y = rng.uniform(0, 1, n_samples) + row - 2
        points = np.stack([x, y], axis=1)
    elif name == "swiss_roll":
        roll, _ = datasets.make_swiss_roll(n_samples, noise=0.25, random_state=int(rng.integers(2**31)))
        points = roll[:, [0, 2]]
    else:
        raise ValueError(f"unknown 2-D density '{name}'; choose one of {', '.join(TOY_2D_NAMES)}")
    points = points - points.mean(0)
    return points / points.std()


def digits_pixels() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8×8 digits as float pixels scaled to [-1, 1], shape (1797, 64), and labels (1797,)."""
    X, y = load_bundled("digits")
    return X.to_numpy(float) / 8.0 - 1.0, y.to_numpy()


def save_bundled(name: str, path: Path) -> Path:
    """Save the bundled dataset ``name`` as Parquet at ``path``: its feature columns and a ``target`` column."""
    X, y = load_bundled(name)
    return save_parquet(pd.concat([X, y], axis=1), path)


def load_xy(path: Path) -> tuple[pd.DataFrame, pd.Series]:
    """Features and ``target`` of a Parquet file written by :func:`save_bundled`."""
    frame = load_parquet(path)
    return frame.drop(columns="target"), frame["target"]
