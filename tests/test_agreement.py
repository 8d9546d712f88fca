"""tasks/agreement.py: kappa and the z-test against their hand formulas, the power formula against its closed form
and against simulation."""

import math

import numpy as np
import pytest
from scipy import stats

from tasks.agreement import cohen_kappa, empirical_power, sample_size_for_power, two_proportion_ztest


def test_kappa_matches_its_definition_on_a_hand_table():
    # 2x2 table: both yes 20, a yes / b no 5, a no / b yes 10, both no 15 (n = 50).
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    p_o = 35 / 50
    p_e = (25 / 50) * (30 / 50) + (25 / 50) * (20 / 50)
    assert cohen_kappa(a, b) == pytest.approx((p_o - p_e) / (1 - p_e))
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same non-empty"):
        cohen_kappa([1, 0], [1])


def test_z_test_matches_the_pooled_formula():
    z, p = two_proportion_ztest(30, 100, 45, 100)
    pooled = 75 / 200
    z_hand = (0.30 - 0.45) / math.sqrt(pooled * (1 - pooled) * (2 / 100))
    assert z == pytest.approx(z_hand) and p == pytest.approx(2 * stats.norm.sf(abs(z_hand)))
    with pytest.raises(ValueError, match="counts"):
        two_proportion_ztest(120, 100, 1, 10)


def test_sample_size_matches_the_closed_form_and_simulated_power():
    p1, p2 = 0.5, 0.65
    n = sample_size_for_power(p1, p2)
    h = abs(2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2)))
    closed = 2 * ((stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) / h) ** 2
    assert n == math.ceil(closed)

    def study(p_b):
        def p_value(rng):
            return two_proportion_ztest(rng.binomial(n, p1), n, rng.binomial(n, p_b), n)[1]
        return p_value

    assert abs(empirical_power(study(p2), 600, seed=1) - 0.8) < 0.06
    assert empirical_power(study(p1), 600, seed=2) < 0.08
    with pytest.raises(ValueError, match="no effect"):
        sample_size_for_power(0.3, 0.3)
