import math

import pytest

from paperflows.core.claims import check_claim, check_claims, count_verdicts, metric_value, verdict
from paperflows.core.contract import Claim, Control, Paper


def claim(comparison=">=", threshold=1.0, interval=None, **rules):
    if rules.get("role", "claim") == "claim":
        rules.setdefault("control_reason", "a test")
        if interval is None:
            rules.setdefault("no_interval_reason", "a test")
    return Claim(id="c", text="t", source="s", metric="a.b", comparison=comparison, threshold=threshold,
                 kind="direction", interval=interval, **{"role": "claim", **rules})


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
    assert check_claim(claim(">=", 1.0), metrics, 3).verdict == "not reproduced"
    result = check_claim(claim("<", 1.0, interval=("a.lo", "a.hi")), metrics, 3)
    assert (result.observed, result.ci_low, result.ci_high, result.verdict) == (0.2, 0.1, 0.3, "reproduced")


def test_missing_or_non_numeric_metrics_are_errors():
    with pytest.raises(KeyError, match="a.b"):
        metric_value({"a": {}}, "a.b")
    with pytest.raises(TypeError):
        metric_value({"a": {"b": "x"}}, "a.b")
    with pytest.raises(TypeError):
        metric_value({"a": {"b": True}}, "a.b")


# --- the verdict rules of issue #11, each shown able to flip a verdict -------------------------------

METRICS = {"effect": {"mean": 0.3, "ci_low": 0.1, "ci_high": 0.5},
           "ablated": {"mean": 0.2, "ci_low": 0.05, "ci_high": 0.35},
           "random": {"mean": 0.0, "ci_low": -0.1, "ci_high": 0.1},
           "below": {"mean": -0.2, "ci_low": -0.3, "ci_high": -0.1},
           "tie": {"mean": 0.003, "ci_low": 0.0, "ci_high": 0.0045},
           "seeds": {"agree": [0.2, 0.3, 0.4], "disagree": [0.2, -0.1, 0.4], "two": [0.2, 0.3]},
           "censored": {"most": 0.8, "few": 0.2},
           "per_dataset": {"wine": 0.4, "digits": 0.3, "breast_cancer": -0.1}}


def effect(**rules):
    base = {"id": "effect", "text": "t", "source": "s", "metric": "effect.mean", "comparison": ">", "threshold": 0.0,
            "kind": "direction", "role": "claim", "interval": ("effect.ci_low", "effect.ci_high"),
            "control_reason": "a test"}
    return Claim(**{**base, **rules})


def test_a_control_that_passes_too_turns_a_pass_into_no_power():
    weak = Control(name="random policy", metric="random.mean", interval=("random.ci_low", "random.ci_high"))
    result = check_claim(effect(control=weak, control_reason=None), METRICS, 3)
    assert result.verdict == "inconclusive" and "neither fails strictly" in result.reason  # straddles 0: no power
    assert result.control.failed is False and result.control.verdict == "inconclusive"
    failing = Control(name="permuted labels", metric="below.mean", interval=("below.ci_low", "below.ci_high"))
    result = check_claim(effect(control=failing, control_reason=None), METRICS, 3)
    assert result.verdict == "reproduced" and result.control.failed is True
    strong = Control(name="ablated method", metric="ablated.mean", interval=("ablated.ci_low", "ablated.ci_high"))
    result = check_claim(effect(control=strong, control_reason=None), METRICS, 3)
    assert result.verdict == "inconclusive" and "passes too" in result.reason and result.control.failed is False


def test_an_aa_control_on_the_threshold_gives_power_only_when_the_claim_separates_from_it():
    """An A/A control (the baseline against itself) sits on the threshold by design and can never fail strictly;
    the claim has power when its whole interval lies beyond the control's."""
    aa = Control(name="baseline against itself", metric="aa.mean", interval=("aa.ci_low", "aa.ci_high"))
    tight = {**METRICS, "aa": {"mean": 0.0, "ci_low": -0.05, "ci_high": 0.05}}
    result = check_claim(effect(control=aa, control_reason=None), tight, 3)
    assert result.verdict == "reproduced" and result.control.separated and not result.control.failed
    overlapping = {**METRICS, "aa": {"mean": 0.0, "ci_low": -0.2, "ci_high": 0.2}}  # reaches into [0.1, 0.5]
    result = check_claim(effect(control=aa, control_reason=None), overlapping, 3)
    assert result.verdict == "inconclusive" and not result.control.separated


def test_an_effect_a_simulator_knob_could_set_needs_the_knob_off_control():
    """The knob-off rule: a claim whose effect our simulator's parameter could set must declare a control with that
    parameter at its null; without one it is rejected at declaration (or it is a sanity check)."""
    with pytest.raises(ValueError, match="knob 'context_effect'"):
        effect(knob="context_effect")
    off = Control(name="context effect 0", metric="random.mean", interval=("random.ci_low", "random.ci_high"),
                  knob_at_null="context_effect")
    knob_off = effect(knob="context_effect", control=off, control_reason=None)
    assert check_claim(knob_off, METRICS, 3).verdict == "inconclusive"  # the knob-off control is not beaten clearly
    below = Control(name="context effect 0", metric="below.mean", interval=("below.ci_low", "below.ci_high"),
                    knob_at_null="context_effect")
    assert check_claim(effect(knob="context_effect", control=below, control_reason=None), METRICS, 3).verdict == "reproduced"
    assert Claim(**{**effect().model_dump(), "role": "sanity", "control_reason": None, "knob": "context_effect"})


def test_a_point_control_on_the_threshold_has_not_failed_but_a_clear_claim_separates_from_it():
    """A control of exactly 0 against "> 0" has not failed strictly; a claim whose whole interval lies above it
    separates from it; a point control that passes leaves no power."""
    on_threshold = Control(name="no-op", metric="zero")
    result = check_claim(effect(control=on_threshold, control_reason=None), {**METRICS, "zero": 0.0}, 3)
    assert result.verdict == "reproduced" and not result.control.failed and result.control.separated
    passing = Control(name="no-op", metric="inside")
    result = check_claim(effect(control=passing, control_reason=None), {**METRICS, "inside": 0.3}, 3)
    assert result.verdict == "inconclusive" and "passes too" in result.reason
    # named also where the claim's own interval already made it inconclusive
    straddling = {**METRICS, "inside": 0.3, "effect": {**METRICS["effect"], "ci_low": -0.1}}
    reason = check_claim(effect(control=passing, control_reason=None), straddling, 3).reason
    assert "straddles" in reason and "passes too" in reason


def test_one_counterexample_refutes_a_claim_about_every_instance():
    """A bound that must hold on every instance: a seed that breaks it is a counterexample, whatever the mean."""
    point = {"interval": None, "metric": "effect.mean", "per_seed": "seeds.disagree"}
    assert check_claim(effect(**point), METRICS, 3).verdict == "inconclusive"  # an average claim: seeds disagree
    result = check_claim(effect(**point, every_instance=True), METRICS, 3)
    assert result.verdict == "not reproduced" and result.counterexample_seeds == [1]
    assert check_claim(effect(**{**point, "per_seed": "seeds.agree"}, every_instance=True), METRICS, 3).verdict == "reproduced"
    with pytest.raises(ValueError, match="per_seed"):
        effect(every_instance=True)
    # a counterexample is final: a control that passes too (no power for a pass) does not soften it
    passing = Control(name="greedy", metric="ablated.mean", interval=("ablated.ci_low", "ablated.ci_high"))
    refuted = check_claim(effect(**point, every_instance=True, control=passing, control_reason=None), METRICS, 3)
    assert refuted.verdict == "not reproduced" and refuted.control.verdict == "reproduced"
    assert check_claim(effect(**point, control=passing, control_reason=None), METRICS, 3).verdict == "inconclusive"


def test_a_control_that_straddles_the_threshold_leaves_a_failed_claim_not_reproduced():
    """Power is what a pass needs; a claim that failed clearly stays not reproduced when its control only straddles."""
    straddling = Control(name="random policy", metric="random.mean", interval=("random.ci_low", "random.ci_high"))
    failed = check_claim(effect(metric="below.mean", interval=("below.ci_low", "below.ci_high"), control=straddling,
                                control_reason=None), METRICS, 3)
    assert failed.verdict == "not reproduced" and not failed.control.gives_power


def test_a_claim_on_a_method_that_did_not_learn_is_inconclusive():
    """The working-method gate: the claim rests on a sanity check (the baseline learned its task); when that
    check fails, the claim is inconclusive (implementation) even though its own interval clears the bar."""
    learns = Claim(id="learns", text="t", source="s", metric="learned", comparison=">", threshold=0.5,
                   kind="magnitude", role="sanity")
    paper = Paper(slug="p", title="t", method="m", paper_class="A", source="s", official_code=None,
                  claims=(effect(requires=("learns",)), learns), limitations="")
    healthy = check_claims(paper, {**METRICS, "learned": 0.9}, 3)
    assert [r.verdict for r in healthy] == ["reproduced", "reproduced"]
    broken = check_claims(paper, {**METRICS, "learned": 0.3}, 3)
    assert broken[0].verdict == "inconclusive" and "implementation" in broken[0].reason
    # an interval that already straddles the threshold still names the failed check: a reader must learn of it
    straddling = {**METRICS, "learned": 0.3, "effect": {**METRICS["effect"], "ci_low": -0.1}}
    reason = check_claims(paper, straddling, 3)[0].reason
    assert "straddles" in reason and "implementation: the method check learns did not hold" in reason
    with pytest.raises(ValueError, match="not sanity checks"):
        Paper(**{**paper.model_dump(), "claims": (effect(requires=("nowhere",)),)})


def test_an_interval_touching_the_threshold_is_a_tie_not_a_win():
    assert check_claim(effect(), METRICS, 3).verdict == "reproduced"
    tie = check_claim(effect(metric="tie.mean", interval=("tie.ci_low", "tie.ci_high"), comparison=">="), METRICS, 3)
    assert tie.verdict == "inconclusive" and "touches" in tie.reason
    assert verdict(effect(comparison=">="), 0.5, (0.0, 1.0)) == "inconclusive"
    assert verdict(effect(comparison="<="), -0.5, (-1.0, 0.0)) == "inconclusive"
    assert verdict(effect(comparison="<="), 0.5, (0.0, 1.0)) == "inconclusive"


def test_a_point_claim_needs_three_seeds_that_agree():
    point = {"interval": None, "metric": "effect.mean"}
    assert check_claim(effect(**point, per_seed="seeds.agree"), METRICS, 3).verdict == "reproduced"
    assert check_claim(effect(**point, per_seed="seeds.disagree"), METRICS, 3).verdict == "inconclusive"
    assert "fewer than 3" in check_claim(effect(**point, per_seed="seeds.two"), METRICS, 3).reason
    with pytest.raises(ValueError, match="per_seed"):
        effect(**point)


def test_censored_comparisons_are_inconclusive_unless_the_claim_is_about_failure():
    assert check_claim(effect(censored="censored.few"), METRICS, 3).verdict == "reproduced"
    result = check_claim(effect(censored="censored.most"), METRICS, 3)
    assert result.verdict == "inconclusive" and "censored" in result.reason
    assert check_claim(effect(censored="censored.most", about_failure=True), METRICS, 3).verdict == "reproduced"


def test_a_reversal_on_one_dataset_is_reported_beside_the_verdict():
    result = check_claim(effect(per_setting="per_dataset"), METRICS, 3)
    assert result.verdict == "reproduced" and result.reversed_settings == ["breast_cancer"]
    assert result.settings == METRICS["per_dataset"]


def test_an_undefined_interval_is_inconclusive_and_says_so():
    nan = float("nan")
    metrics = {**METRICS, "sparse": {"mean": 0.3, "ci_low": nan, "ci_high": nan},
               "per_attack": {"a": 0.3, "b": nan, "c": -0.2}}
    result = check_claim(effect(metric="sparse.mean", interval=("sparse.ci_low", "sparse.ci_high"),
                                per_setting="per_attack"), metrics, 3)
    assert result.verdict == "inconclusive" and result.reason.startswith("no interval") and "undefined on b" in result.reason
    assert result.reversed_settings == ["c"], "an undefined setting is not a reversal"
    assert check_claim(effect(metric="sparse.ci_low"), metrics, 3).reason.startswith("no value")


def test_sanity_checks_are_never_counted_as_claims():
    sanity = Claim(id="identity", text="t", source="s", metric="effect.mean", comparison=">", threshold=0.0,
                   kind="exact", role="sanity")
    paper = Paper(slug="p", title="t", method="m", paper_class="A", source="s", official_code=None,
                  claims=(effect(), sanity), limitations="")
    results = check_claims(paper, METRICS, 3)
    assert [r.verdict for r in results] == ["reproduced", "reproduced"]
    assert count_verdicts(results, "claim") == {"reproduced": 1, "not reproduced": 0, "inconclusive": 0}
    assert count_verdicts(results, "sanity") == {"reproduced": 1, "not reproduced": 0, "inconclusive": 0}
    with pytest.raises(ValueError, match="sanity check takes no negative control"):
        Claim(**{**sanity.model_dump(), "control_reason": "x"})


def test_every_claim_needs_a_control_or_a_reason():
    with pytest.raises(ValueError, match="exactly one of control and control_reason"):
        effect(control_reason=None)
