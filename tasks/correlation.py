"""Rank correlation as a measurement (per seed, per run), apart from :mod:`paperflows.core.stats`, whose intervals only
evaluation uses: a records stage that measures a correlation must not retrain when an interval method changes."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats as sps


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation; NaN when either side is constant."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(sps.spearmanr(x, y).statistic)
