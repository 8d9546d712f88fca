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
4. **Every instance.** A claim that holds on every instance (``every_instance``) reads not reproduced as soon
   as one seed is a counterexample, whatever the aggregate, the control or the gate say.
5. **Negative control: it fails strictly, or the claim separates from it.** The control is judged by the same
   rules. A control that passes leaves the check without power: inconclusive (no power), whatever the method
   scored. A reproduced claim needs more: its control must fail strictly (value and whole interval strictly on the
   failing side), or the claim's value and interval must lie strictly beyond the control's whole interval, on the
   claim's side (separation: the only way an A/A control, which sits on the threshold by design, can give power).
6. **Working-method gate.** A claim that ``requires`` sanity checks (the method or baseline learned its task) is
   inconclusive (implementation) unless each of them is reproduced.
7. **Per-setting signs.** A claim on a mean over datasets or settings records each one's side; reversals
   are reported next to the verdict (the verdict itself is the aggregate's).

Sanity checks (role ``"sanity"``) follow rules 1-4 and are counted apart, never as reproduced claims.

Rule 1 reads a two-sided 95% interval (:mod:`paperflows.core.stats`) strictly on one side, a one-sided test at 2.5%;
every claim uses it (a paper with a ``seed_cap`` reads each of its two looks at 1.25%:
:mod:`paperflows.core.sequential`).
Each result records the number of seeds its verdict used and why that number.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

from pydantic import BaseModel, computed_field

from paperflows.core.contract import Claim, Paper

Verdict = Literal["reproduced", "not reproduced", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = ("reproduced", "not reproduced", "inconclusive")
VERDICT_CODES: dict[str, int] = {"reproduced": 1, "inconclusive": 0, "not reproduced": -1}
"""The numeric verdict of the slim DVC metrics file (``claims.json``), so ``dvc metrics diff`` shows a flip."""
CENSORED_MAJORITY = 0.5
MIN_AGREEING_SEEDS = 3
SEEDS_REASON = "one look at the paper's seed count in params.yaml (fixed before the run; no seed_cap, so no second look)"


class ControlResult(BaseModel):
    """``verdict``: the control judged as a claim; ``passed``: that verdict is reproduced (the control passes too,
    written to ``metrics.json`` as before); ``failed``: strictly on the failing side; ``separated``: the claim lies
    strictly beyond the control's whole interval. Either of the last two gives the check its power."""

    name: str
    observed: float
    ci_low: float | None = None
    ci_high: float | None = None
    verdict: Verdict
    failed: bool
    separated: bool

    @computed_field
    @property
    def passed(self) -> bool:
        return self.verdict == "reproduced"

    @property
    def gives_power(self) -> bool:
        return self.failed or self.separated


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
    counterexample_seeds: list[int] | None = None
    seeds: int
    seeds_reason: str


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


def _per_seed_rule(claim: Claim, result: Verdict, per_seed: list[float], reasons: list[str]
                   ) -> tuple[Verdict, list[int] | None]:
    """Rules 2 and 4 on the per-seed values: agreement with the aggregate, or no counterexample."""
    if claim.every_instance:
        counterexamples = [i for i, v in enumerate(per_seed) if not passes(claim.comparison, claim.threshold, v)]
        if counterexamples:
            reasons.append(f"counterexample on {len(counterexamples)} of {len(per_seed)} seeds "
                           f"(seed index {', '.join(map(str, counterexamples))})")
            return "not reproduced", counterexamples
        if len(per_seed) < MIN_AGREEING_SEEDS:
            reasons.append(f"{len(per_seed)} seeds, fewer than {MIN_AGREEING_SEEDS}")
            return "inconclusive", []
        return result, []
    if result == "inconclusive":
        return result, None
    agreeing = [passes(claim.comparison, claim.threshold, v) == (result == "reproduced") for v in per_seed]
    if len(per_seed) < MIN_AGREEING_SEEDS:
        reasons.append(f"{len(per_seed)} seeds, fewer than {MIN_AGREEING_SEEDS}")
        return "inconclusive", None
    if not all(agreeing):
        reasons.append(f"seeds disagree ({sum(agreeing)} of {len(per_seed)} agree)")
        return "inconclusive", None
    return result, None


def separated(comparison: str, claim_points: Sequence[float], control_points: Sequence[float]) -> bool:
    """The claim's value and interval lie strictly beyond the control's, on the claim's side (NaN: not separated)."""
    points = [*claim_points, *control_points]
    if any(math.isnan(p) for p in points):
        return False
    if comparison in (">=", ">"):
        return min(claim_points) > max(control_points)
    return max(claim_points) < min(control_points)


def _control_result(claim: Claim, metrics: dict[str, Any], claim_points: Sequence[float]) -> ControlResult:
    """Rule 5: the control fails only strictly (a point value strictly on the failing side of the threshold), or
    the claim (``claim_points``: its value and interval) separates from it."""
    control = claim.control
    observed = metric_value(metrics, control.metric)
    interval = _interval(metrics, control.interval)
    judged = interval_verdict(claim.comparison, claim.threshold, observed, interval)
    failed = judged == "not reproduced" and (interval is not None or _side(claim.comparison, claim.threshold,
                                                                           observed) == -1)
    apart = separated(claim.comparison, claim_points, [observed] if interval is None else [observed, *interval])
    return ControlResult(name=control.name, observed=observed, verdict=judged, failed=failed, separated=apart,
                         ci_low=None if interval is None else interval[0],
                         ci_high=None if interval is None else interval[1])


def check_claim(claim: Claim, metrics: dict[str, Any], seeds: int,
                sanity: dict[str, Verdict] | None = None) -> ClaimResult:
    """One claim's verdict under rules 1-7; ``seeds``: how many seeds the run used; ``sanity``: the verdicts
    of the paper's sanity checks, for the working-method gate (``claim.requires``)."""
    observed = metric_value(metrics, claim.metric)
    ci = _interval(metrics, claim.interval)
    result = verdict(claim, observed, ci)
    reasons: list[str] = []
    settings = metric_mapping(metrics, claim.per_setting) if claim.per_setting else None
    if any(math.isnan(v) for v in (observed, *(ci or ()))):
        undefined = [k for k, v in (settings or {}).items() if math.isnan(v)]
        reasons.append(("no interval" if ci is not None and not math.isnan(observed) else "no value")
                       + " (too few seeds, or a quantity undefined on some seeds"
                       + (f"; undefined on {', '.join(undefined)})" if undefined else ")"))
    elif ci is not None and result == "inconclusive":
        reasons.append("the interval touches or straddles the threshold")

    per_seed = metric_values(metrics, claim.per_seed) if claim.per_seed else None
    counterexamples = None
    if per_seed is not None:
        result, counterexamples = _per_seed_rule(claim, result, per_seed, reasons)
    refuted = bool(counterexamples)  # a counterexample is final: no control or gate can make it "inconclusive"

    censored = metric_value(metrics, claim.censored) if claim.censored else None
    if censored is not None and censored > CENSORED_MAJORITY and not claim.about_failure and not refuted:
        result = "inconclusive"
        reasons.append(f"censored: {censored:.0%} of seeds never reached the criterion")

    control = None
    if claim.control is not None:
        control = _control_result(claim, metrics, [observed] if ci is None else [observed, *ci])
        if control.passed and not refuted:   # named also where the interval already made it inconclusive
            result = "inconclusive"
            reasons.append(f"no power: the control ({claim.control.name}) passes too")
        elif not control.gives_power and result == "reproduced":
            result = "inconclusive"
            reasons.append(f"no power: the control ({claim.control.name}) neither fails strictly nor separates "
                           "from the claim")

    unhealthy = [s for s in claim.requires if (sanity or {}).get(s) != "reproduced"]
    if unhealthy and not refuted:   # named also where the verdict was already inconclusive: a reader must see it
        result = "inconclusive"
        reasons.append(f"implementation: the method check{'s' if len(unhealthy) > 1 else ''} {', '.join(unhealthy)} "
                       "did not hold")

    reversed_settings = None if settings is None else [
        k for k, v in settings.items() if not math.isnan(v) and not passes(claim.comparison, claim.threshold, v)]

    return ClaimResult(
        id=claim.id, role=claim.role, kind=claim.kind, metric=claim.metric, comparison=claim.comparison,
        threshold=claim.threshold, observed=observed,
        ci_low=None if ci is None else ci[0], ci_high=None if ci is None else ci[1],
        verdict=result, reason="; ".join(reasons) or None, control=control, control_reason=claim.control_reason,
        per_seed=per_seed, censored_fraction=censored, settings=settings, reversed_settings=reversed_settings,
        counterexample_seeds=counterexamples, seeds=seeds, seeds_reason=SEEDS_REASON,
    )


def check_claims(paper: Paper, metrics: dict[str, Any], seeds: int) -> list[ClaimResult]:
    """Every claim of ``paper``, sanity checks first so that the working-method gate can read them; results in
    declaration order."""
    sanity = {c.id: check_claim(c, metrics, seeds) for c in paper.claims if c.role == "sanity"}
    verdicts = {cid: r.verdict for cid, r in sanity.items()}
    return [sanity[c.id] if c.role == "sanity" else check_claim(c, metrics, seeds, verdicts) for c in paper.claims]


def count_verdicts(results: Sequence[ClaimResult | dict[str, Any]], role: str) -> dict[str, int]:
    """Verdict counts of the claims with ``role`` (``"claim"`` or ``"sanity"``)."""
    roles = [(r.role, r.verdict) if isinstance(r, ClaimResult) else (r["role"], r["verdict"]) for r in results]
    return {v: sum(1 for rr, vv in roles if rr == role and vv == v) for v in VERDICTS}
