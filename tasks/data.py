"""Datasets that exist offline (scikit-learn's bundled sets, generated data) and Parquet storage."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Callable

import pandas as pd
from sklearn import datasets

from tasks.io import atomic_write_bytes

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
