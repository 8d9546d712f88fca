"""Agreement and significance for annotation studies: Cohen's kappa, two-proportion z-tests, power analysis.

statsmodels and scikit-learn do the arithmetic; these wrappers fix the conventions (two-sided tests, Cohen's h
effect size) and give Monte Carlo power for designs without a closed form.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize, proportions_ztest

from paperflows.core.seeding import numpy_rng


def cohen_kappa(a: Sequence, b: Sequence) -> float:
    """Cohen's kappa between two raters' labels ``a`` and ``b`` (n,): (p_o − p_e) / (1 − p_e)."""
    if len(a) != len(b) or len(a) == 0:
        raise ValueError(f"the two raters must label the same non-empty items, got {len(a)} and {len(b)}")
    return float(cohen_kappa_score(a, b))


def two_proportion_ztest(count_a: int, n_a: int, count_b: int, n_b: int) -> tuple[float, float]:
    """Two-sided pooled z-test of equal proportions ``count_a/n_a`` vs ``count_b/n_b``; returns (z, p)."""
    if min(n_a, n_b) <= 0 or not (0 <= count_a <= n_a and 0 <= count_b <= n_b):
        raise ValueError(f"counts must lie in [0, n] with n > 0, got {count_a}/{n_a} and {count_b}/{n_b}")
    z, p = proportions_ztest([count_a, count_b], [n_a, n_b], alternative="two-sided")
    return float(z), float(p)


def sample_size_for_power(p1: float, p2: float, power: float = 0.8, alpha: float = 0.05) -> int:
    """Observations per group for a two-sided two-proportion z-test to reach ``power`` at ``alpha``.

    The effect size is Cohen's h = 2·asin(√p1) − 2·asin(√p2) (statsmodels ``proportion_effectsize``), solved
    with ``NormalIndPower`` for equal groups and rounded up.
    """
    if p1 == p2:
        raise ValueError("equal proportions have no effect to detect")
    h = abs(proportion_effectsize(p1, p2))
    return int(math.ceil(NormalIndPower().solve_power(effect_size=h, alpha=alpha, power=power, ratio=1.0,
                                                     alternative="two-sided")))


def empirical_power(p_value_of: Callable[[np.random.Generator], float], n_sims: int, alpha: float = 0.05,
                    seed: int = 0) -> float:
    """The share of ``n_sims`` simulated studies whose p-value is below ``alpha``.

    ``p_value_of(rng)`` simulates one study with its own generator and returns its p-value; with a planted
    null effect this is the type-I error rate.
    """
    if n_sims < 1:
        raise ValueError("n_sims must be at least 1")
    return float(np.mean([p_value_of(numpy_rng(seed, i)) < alpha for i in range(n_sims)]))
