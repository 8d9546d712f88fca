"""benchmarks/compare_results.py, the check behind "identical apart from timings" after a rerun."""
import copy
import importlib.util

from conftest import ROOT

spec = importlib.util.spec_from_file_location("compare_results", ROOT / "benchmarks" / "compare_results.py")
compare_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_results)

METRICS = {
    "metrics": {"gap": {"mean": 0.5, "ci_low": 0.25, "ci_high": 0.75}, "n": 5, "timings": {"flow_body_s": 9.0}},
    "claims": {
        "c1": {"metric": "gap.mean", "observed": 0.5, "ci_low": 0.25, "ci_high": 0.75, "verdict": "reproduced",
               "threshold": 0.0, "comparison": ">"},
        "fast": {"metric": "timings.flow_body_s", "observed": 9.0, "verdict": "reproduced"},
    },
    "params": {"n": 5},
}


def changed(edit) -> list[str]:
    new = copy.deepcopy(METRICS)
    edit(new)
    return compare_results.differences(METRICS, new)


def test_timings_alone_do_not_count():
    def slower(m):
        m["metrics"]["timings"]["flow_body_s"] = 99.0
        m["claims"]["fast"].update(observed=99.0, verdict="not reproduced")

    assert changed(slower) == []


def test_a_changed_measurement_an_interval_or_a_verdict_is_reported():
    assert changed(lambda m: m["metrics"].update(n=6)) == ["metric n: 5 -> 6"]
    assert changed(lambda m: m["metrics"]["gap"].update(ci_low=0.3)) == ["metric gap.ci_low: 0.25 -> 0.3"]
    assert changed(lambda m: m["claims"]["c1"].update(verdict="inconclusive")) == [
        "claim c1.verdict: 'reproduced' -> 'inconclusive'"]
    assert changed(lambda m: m["params"].update(n=7)) == ["params differ"]


def test_a_point_estimate_renamed_from_mean_counts_as_the_same_metric():
    def renamed(m):
        m["metrics"]["gap"]["ratio"] = m["metrics"]["gap"].pop("mean")

    assert changed(renamed) == []
    assert compare_results.measurements({"ratio": 2.0}) == {"ratio": 2.0}   # not an interval: kept


def test_the_seed_params_at_their_defaults_count_as_unchanged():
    assert changed(lambda m: m["params"].update(seed_cap=None, extra_seeds=0)) == []
    assert changed(lambda m: m["params"].update(extra_seeds=3)) == ["params differ"]
