"""Estimates from per-seed records: the one place that selects an arm's seeds, pairs seeds and builds intervals.

A selection is a mapping of column -> value (``{"method": "uefl", "shift": 0.5}``) on a records table (one row
per arm, seed and setting). :func:`per_seed` returns the selected rows' values in seed order, one per seed
(a duplicate seed is an error, never silently averaged); the paired estimates align two selections on their
seeds and refuse mismatched seed sets, so a difference or a ratio always pairs seed s with seed s. The
intervals are those of :mod:`paperflows.core.stats`; the results are the same dicts.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from paperflows.core import stats


def _select(table: pd.DataFrame, where: Mapping[str, Any]) -> pd.DataFrame:
    missing = [column for column in where if column not in table.columns]
    if missing:
        raise KeyError(f"records have no column {missing}; columns: {list(table.columns)}")
    mask = np.ones(len(table), dtype=bool)
    for column, value in where.items():
        mask &= (table[column] == value).to_numpy()
    return table[mask]


def seed_series(table: pd.DataFrame, value: str, where: Mapping[str, Any] | None = None) -> pd.Series:
    """``value`` of the rows matching ``where``, indexed by seed in increasing order (shape (n_seeds,))."""
    rows = _select(table, where or {})
    if rows.empty:
        raise ValueError(f"no records match {dict(where or {})}")
    if rows["seed"].duplicated().any():
        raise ValueError(f"{dict(where or {})} selects several rows per seed; add the setting columns that tell "
                         f"them apart (columns: {list(table.columns)})")
    return rows.set_index("seed")[value].sort_index()


def per_seed(table: pd.DataFrame, value: str, **where: Any) -> np.ndarray:
    """``value`` per seed (seed order) of the rows matching ``where``, as a float array of shape (n_seeds,)."""
    return seed_series(table, value, where).to_numpy(dtype=float)


def aligned(table: pd.DataFrame, value: str, *selections: Mapping[str, Any]) -> list[np.ndarray]:
    """``value`` per seed for each selection, aligned on the seeds (shape (n_seeds,) each); the selections
    must cover the same seeds."""
    series = [seed_series(table, value, where) for where in selections]
    for where, s in zip(selections[1:], series[1:]):
        if not s.index.equals(series[0].index):
            raise ValueError(f"seeds differ between {dict(selections[0])} ({list(series[0].index)}) and "
                             f"{dict(where)} ({list(s.index)}): cannot pair them")
    return [s.to_numpy(dtype=float) for s in series]


def summary(table: pd.DataFrame, value: str, **where: Any) -> dict[str, float]:
    """Mean of ``value`` over the selected seeds with its Student-t interval
    (:func:`paperflows.core.stats.summarize`)."""
    return stats.summarize(per_seed(table, value, **where))


def paired(table: pd.DataFrame, value: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, float]:
    """Mean of ``a - b`` over paired seeds with its Student-t interval
    (:func:`paperflows.core.stats.paired_difference`)."""
    return stats.paired_difference(*aligned(table, value, a, b))


def ratio(table: pd.DataFrame, value: str, numerator: Mapping[str, Any],
          denominator: Mapping[str, Any]) -> dict[str, float]:
    """Ratio of the means of two selections over paired seeds (:func:`paperflows.core.stats.ratio_of_means`)."""
    return stats.ratio_of_means(*aligned(table, value, numerator, denominator))


def by_setting(table: pd.DataFrame, value: str, setting: str, settings: Sequence[Any],
               **where: Any) -> np.ndarray:
    """``value`` per seed at each of ``settings`` (e.g. horizons), shape (len(settings), n_seeds), seeds aligned."""
    return np.array(aligned(table, value, *({**where, setting: s} for s in settings)))
