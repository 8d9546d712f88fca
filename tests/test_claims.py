import math

import pytest

from tasks.claims import check_claim, metric_value, verdict
from tasks.contract import Claim


def claim(comparison=">=", threshold=1.0, interval=None):
    return Claim(id="c", text="t", source="s", metric="a.b", comparison=comparison, threshold=threshold,
                 kind="direction", interval=interval)


@pytest.mark.parametrize("comparison,observed,expected", [
    (">=", 1.0, "reproduced"), (">", 1.0, "not reproduced"), ("<=", 1.0, "reproduced"),
    ("<", 0.5, "reproduced"), (">=", 0.99, "not reproduced"), ("<", 1.5, "not reproduced"),
])
def test_point_verdicts(comparison, observed, expected):
    assert verdict(claim(comparison), observed, None) == expected


def test_interval_straddling_the_threshold_is_inconclusive():
    c = claim(">", 0.0)
    assert verdict(c, 0.5, (0.1, 0.9)) == "reproduced"
    assert verdict(c, 0.5, (-0.1, 0.9)) == "inconclusive"
    assert verdict(c, -0.5, (-0.9, -0.1)) == "not reproduced"
    assert verdict(c, math.nan, None) == "inconclusive"


def test_check_claim_reads_dotted_metrics_and_can_fail():
    metrics = {"a": {"b": 0.2, "lo": 0.1, "hi": 0.3}}
    assert check_claim(claim(">=", 1.0), metrics).verdict == "not reproduced"
    result = check_claim(claim("<", 1.0, interval=("a.lo", "a.hi")), metrics)
    assert (result.observed, result.ci_low, result.ci_high, result.verdict) == (0.2, 0.1, 0.3, "reproduced")


def test_missing_or_non_numeric_metrics_are_errors():
    with pytest.raises(KeyError, match="a.b"):
        metric_value({"a": {}}, "a.b")
    with pytest.raises(TypeError):
        metric_value({"a": {"b": "x"}}, "a.b")
    with pytest.raises(TypeError):
        metric_value({"a": {"b": True}}, "a.b")
