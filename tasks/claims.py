"""Claim checking: each declared claim gets its observed value, threshold and a verdict that could have failed.

The rules, in the order they apply (each shown able to flip a verdict in ``tests/test_claims.py``):

1. **Strict intervals.** A claim with a confidence interval is reproduced only when the observed value and
   the whole interval lie strictly on the claim's side of the threshold, not reproduced when they all lie
   strictly on the other side, and inconclusive when the interval touches or straddles it. A point value
   (no interval) is compared with the declared operator (``>=`` passes at equality).
2. **Seeds agree.** A claim without an interval names its per-seed values: fewer than 3, or seeds that
   disagree with the aggregate, give inconclusive.
3. **Censoring.** When the method or the baseline never reached its criterion in most seeds, a ratio of
   times measures a failure, not a speed-up: inconclusive, unless the claim is about failure.
4. **Negative control.** The control is judged by the same rules; if it passes too, the check cannot tell
   good from bad: inconclusive (no power), whatever the method scored.
5. **Per-setting signs.** A claim on a mean over datasets or settings records each one's side; reversals
   are reported next to the verdict (the verdict itself is the aggregate's).

Sanity checks (role ``"sanity"``) follow rules 1 and 2 and are counted apart, never as reproduced claims.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

from pydantic import BaseModel

from tasks.contract import Claim, Paper

Verdict = Literal["reproduced", "not reproduced", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = ("reproduced", "not reproduced", "inconclusive")
VERDICT_CODES: dict[str, int] = {"reproduced": 1, "inconclusive": 0, "not reproduced": -1}
"""The numeric verdict of the slim DVC metrics file (``claims.json``), so ``dvc metrics diff`` shows a flip."""
CENSORED_MAJORITY = 0.5
MIN_AGREEING_SEEDS = 3


class ControlResult(BaseModel):
    name: str
    observed: float
    ci_low: float | None = None
    ci_high: float | None = None
    passed: bool


class ClaimResult(BaseModel):
    id: str
    role: str
    kind: str
    metric: str
    comparison: str
    threshold: float
    observed: float
    ci_low: float | None
    ci_high: float | None
    verdict: Verdict
    reason: str | None = None
    control: ControlResult | None = None
    control_reason: str | None = None
    per_seed: list[float] | None = None
    censored_fraction: float | None = None
    settings: dict[str, float] | None = None
    reversed_settings: list[str] | None = None


def _lookup(metrics: dict[str, Any], path: str) -> Any:
    node: Any = metrics
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"metric '{path}' not found (missing '{part}')")
        node = node[part]
    return node


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"metric '{path}' is {value!r}, not a number")
    return float(value)


def metric_value(metrics: dict[str, Any], path: str) -> float:
    """Look up a dotted path (``"regret.ratio_T8000"``) in a nested metrics dict."""
    return _number(_lookup(metrics, path), path)


def metric_values(metrics: dict[str, Any], path: str) -> list[float]:
    """A list of numbers at ``path`` (per-seed values)."""
    values = _lookup(metrics, path)
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"metric '{path}' is {values!r}, not a list of per-seed values")
    return [_number(v, path) for v in values]


def metric_mapping(metrics: dict[str, Any], path: str) -> dict[str, float]:
    """A dict {setting: number} at ``path``."""
    values = _lookup(metrics, path)
    if not isinstance(values, dict):
        raise TypeError(f"metric '{path}' is {values!r}, not a dict of per-setting values")
    return {str(k): _number(v, f"{path}.{k}") for k, v in values.items()}


def passes(comparison: str, threshold: float, value: float) -> bool:
    """The declared operator: ``value <comparison> threshold``."""
    return {">=": value >= threshold, ">": value > threshold,
            "<=": value <= threshold, "<": value < threshold}[comparison]


def _side(comparison: str, threshold: float, value: float) -> int:
    """+1 strictly on the claim's side of the threshold, -1 strictly on the other side, 0 on it."""
    if value == threshold:
        return 0
    above = value > threshold
    return 1 if above == (comparison in (">=", ">")) else -1


def interval_verdict(comparison: str, threshold: float, observed: float,
                     ci: tuple[float, float] | None) -> Verdict:
    """Rule 1: strict for an interval (touching is inconclusive), the declared operator for a point."""
    points = [observed] if ci is None else [observed, *ci]
    if any(math.isnan(p) for p in points):
        return "inconclusive"
    if ci is None:
        return "reproduced" if passes(comparison, threshold, observed) else "not reproduced"
    sides = {_side(comparison, threshold, p) for p in points}
    if sides == {1}:
        return "reproduced"
    if sides == {-1}:
        return "not reproduced"
    return "inconclusive"


def verdict(claim: Claim, observed: float, ci: tuple[float, float] | None) -> Verdict:
    """Rule 1 alone, for a claim's own value and interval."""
    return interval_verdict(claim.comparison, claim.threshold, observed, ci)


def _interval(metrics: dict[str, Any], paths: tuple[str, str] | None) -> tuple[float, float] | None:
    return None if paths is None else (metric_value(metrics, paths[0]), metric_value(metrics, paths[1]))


def check_claim(claim: Claim, metrics: dict[str, Any]) -> ClaimResult:
    observed = metric_value(metrics, claim.metric)
    ci = _interval(metrics, claim.interval)
    result = verdict(claim, observed, ci)
    reasons: list[str] = []
    if ci is not None and result == "inconclusive" and not any(math.isnan(v) for v in (observed, *ci)):
        reasons.append("the interval touches or straddles the threshold")

    per_seed = metric_values(metrics, claim.per_seed) if claim.per_seed else None
    if per_seed is not None and result != "inconclusive":
        agreeing = [passes(claim.comparison, claim.threshold, v) == (result == "reproduced") for v in per_seed]
        if len(per_seed) < MIN_AGREEING_SEEDS:
            reasons.append(f"{len(per_seed)} seeds, fewer than {MIN_AGREEING_SEEDS}")
        elif not all(agreeing):
            reasons.append(f"seeds disagree ({sum(agreeing)} of {len(per_seed)} agree)")
        if len(per_seed) < MIN_AGREEING_SEEDS or not all(agreeing):
            result = "inconclusive"

    censored = metric_value(metrics, claim.censored) if claim.censored else None
    if censored is not None and censored > CENSORED_MAJORITY and not claim.about_failure:
        result = "inconclusive"
        reasons.append(f"censored: {censored:.0%} of seeds never reached the criterion")

    control = None
    if claim.control is not None:
        c_observed = metric_value(metrics, claim.control.metric)
        c_ci = _interval(metrics, claim.control.interval)
        c_passed = interval_verdict(claim.comparison, claim.threshold, c_observed, c_ci) == "reproduced"
        control = ControlResult(name=claim.control.name, observed=c_observed, passed=c_passed,
                                ci_low=None if c_ci is None else c_ci[0], ci_high=None if c_ci is None else c_ci[1])
        if c_passed:
            result = "inconclusive"
            reasons.append(f"no power: the control ({claim.control.name}) passes too")

    settings = reversed_settings = None
    if claim.per_setting:
        settings = metric_mapping(metrics, claim.per_setting)
        reversed_settings = [k for k, v in settings.items() if not passes(claim.comparison, claim.threshold, v)]

    return ClaimResult(
        id=claim.id, role=claim.role, kind=claim.kind, metric=claim.metric, comparison=claim.comparison,
        threshold=claim.threshold, observed=observed,
        ci_low=None if ci is None else ci[0], ci_high=None if ci is None else ci[1],
        verdict=result, reason="; ".join(reasons) or None, control=control, control_reason=claim.control_reason,
        per_seed=per_seed, censored_fraction=censored, settings=settings, reversed_settings=reversed_settings,
    )


def check_claims(paper: Paper, metrics: dict[str, Any]) -> list[ClaimResult]:
    return [check_claim(claim, metrics) for claim in paper.claims]


def count_verdicts(results: Sequence[ClaimResult | dict[str, Any]], role: str) -> dict[str, int]:
    """Verdict counts of the claims with ``role`` (``"claim"`` or ``"sanity"``)."""
    roles = [(r.role, r.verdict) if isinstance(r, ClaimResult) else (r["role"], r["verdict"]) for r in results]
    return {v: sum(1 for rr, vv in roles if rr == role and vv == v) for v in VERDICTS}
