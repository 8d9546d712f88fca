"""Claim checking: each declared claim gets its observed value, threshold and verdict."""

from __future__ import annotations

import math
import operator
from typing import Any, Literal

from pydantic import BaseModel

from tasks.contract import Claim, Paper

Verdict = Literal["reproduced", "not reproduced", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = ("reproduced", "not reproduced", "inconclusive")
VERDICT_CODES: dict[str, int] = {"reproduced": 1, "inconclusive": 0, "not reproduced": -1}
"""The numeric verdict of the slim DVC metrics file (``claims.json``), so ``dvc metrics diff`` shows a flip."""

_COMPARE = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


class ClaimResult(BaseModel):
    id: str
    kind: str
    metric: str
    comparison: str
    threshold: float
    observed: float
    ci_low: float | None
    ci_high: float | None
    verdict: Verdict


def metric_value(metrics: dict[str, Any], path: str) -> float:
    """Look up a dotted path (``"regret.ratio_T8000"``) in a nested metrics dict."""
    node: Any = metrics
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"metric '{path}' not found (missing '{part}')")
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise TypeError(f"metric '{path}' is {node!r}, not a number")
    return float(node)


def verdict(claim: Claim, observed: float, ci: tuple[float, float] | None) -> Verdict:
    """Reproduced when the observed value (and its whole interval, if any) meets the threshold;
    not reproduced when it (and the whole interval) misses; inconclusive otherwise or on NaN."""
    passes = _COMPARE[claim.comparison]
    points = [observed] if ci is None else [observed, *ci]
    if any(math.isnan(p) for p in points):
        return "inconclusive"
    outcomes = {passes(p, claim.threshold) for p in points}
    if outcomes == {True}:
        return "reproduced"
    if outcomes == {False}:
        return "not reproduced"
    return "inconclusive"


def check_claim(claim: Claim, metrics: dict[str, Any]) -> ClaimResult:
    observed = metric_value(metrics, claim.metric)
    ci = None
    if claim.interval is not None:
        ci = (metric_value(metrics, claim.interval[0]), metric_value(metrics, claim.interval[1]))
    return ClaimResult(
        id=claim.id, kind=claim.kind, metric=claim.metric, comparison=claim.comparison,
        threshold=claim.threshold, observed=observed,
        ci_low=None if ci is None else ci[0], ci_high=None if ci is None else ci[1],
        verdict=verdict(claim, observed, ci),
    )


def check_claims(paper: Paper, metrics: dict[str, Any]) -> list[ClaimResult]:
    return [check_claim(claim, metrics) for claim in paper.claims]
