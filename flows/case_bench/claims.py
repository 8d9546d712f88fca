"""CASE-Bench, the claims: the power analysis's calibration (the paper's annotator count), and the sanity checks of
the z-tests and the judges on the simulated panel. Scored by ``evaluate.py`` on the records of ``flow.py``."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

SWEEP = "over the whole sweep of the simulated panel's knobs (annotator bias spread x context effect; worst setting)"

PAPER = Paper(
    slug="case_bench",
    title="CASE-Bench: Context-Aware SafEty Benchmark for Large Language Models",
    method="CASE-Bench protocol: CI-parameterised contexts, power-analysed annotator count, z-tests, compute_score.py metrics",
    paper_class="C",
    source="abstracts-003.txt #5",
    official_code="BriansIDP/CASEBench (scripts/compute_score.py and data/CASEBench_data.json read)",
    claims=(
        Claim(id="power_analysis_gives_target_power",
              text=("we recruited a sufficient number of annotators necessary to ensure the detection of statistically "
                    "significant differences among the experimental conditions based on power analysis -- the annotator "
                    "count chosen from a 20-item pilot gives the per-item context z-test an empirical power within 0.05 of "
                    f"the 0.8 target on fresh items, {SWEEP}"),
              source="abstract; plan claim 1 (magnitude, calibration)", metric="claims.power_deviation_worst.mean",
              comparison="<", threshold=0.05, kind="magnitude", role="claim",
              interval=ci("claims.power_deviation_worst"), per_setting="claims.power_deviation_by_setting",
              # the design the paper argues against, measured on the same fresh items
              control=Control(name="3 annotators per item (the common 3 + majority-vote design), its best setting",
                              metric="claims.common_deviation_best.mean", interval=ci("claims.common_deviation_best"))),
        Claim(id="context_aware_judge_agrees_better",
              text=("underscoring the necessity of context in safety evaluations -- a judge that reads the CI context "
                    "(MiniLM of query + context, logistic head) agrees with the panel's majority more often than the same "
                    f"judge on the query alone: accuracy(J2) - accuracy(J1) > 0, {SWEEP}. A check of the judge pipeline, "
                    "not a finding: the simulated labels depend on the context only through the planted context_effect "
                    "knob, so J2 can beat J1 only because of it (the difference vanishes as the knob goes to 0 and grows "
                    "with it); it checks that the judge learns a planted context effect"),
              source="abstract; plan (J1 vs J2 judges)", metric="claims.j2_minus_j1_worst.mean", comparison=">",
              threshold=0.0, kind="direction", role="sanity", interval=ci("claims.j2_minus_j1_worst"),
              per_setting="claims.j2_minus_j1_by_setting"),
        Claim(id="pooled_z_test_detects_planted_context_effect",
              text=("a substantial and significant influence of context on human judgments (p<0.0001 from a z-test) -- "
                    "on the simulator the effect is planted, so this only checks that the pooled z-test at the powered "
                    "annotator count detects it: min over settings and seeds of -log10 p > 4"),
              source="abstract; plan claim 2", metric="claims.pooled_minus_log10_p_min", comparison=">", threshold=4.0,
              kind="magnitude", role="sanity"),
        Claim(id="per_item_z_test_type_one_rate",
              text=("the per-item z-test at the chosen annotator count keeps its level under a planted null (both "
                    "contexts shift alike): worst-setting rejection rate at alpha = 0.05 <= 0.07"),
              source="plan claim 1 (type-I part)", metric="claims.type_one_worst", comparison="<=", threshold=0.07,
              kind="magnitude", role="sanity"),
        Claim(id="conservative_judge_loses_safe_context_accuracy",
              text=("notable mismatches between human judgments and LLM responses, particularly in commercial models "
                    "within safe contexts -- the over-refusing proxy J3 (J2's scores, safe only above P = 0.8) has lower "
                    "accuracy on safe-intended items than J2; holds by construction (a higher threshold can only say "
                    "'safe' less often), so it checks the metric code: worst-setting J3 - J2 < 0"),
              source="abstract; plan claim 3", metric="claims.j3_minus_j2_safe_context_worst", comparison="<",
              threshold=0.0, kind="direction", role="sanity"),
    ),
    limitations=(
        "What the stand-in cannot show: anything about real human context sensitivity or real LLMs. The annotators are "
        "a logistic simulator (annotator bias + query harm - context shift) whose context effect is planted, so the "
        "paper's p < 0.0001 is a property of the simulated effect size here, not a finding, and neither is the "
        "context-reading judge J2's gain over J1 (both are sanity checks of our pipeline). The simulator's two knobs "
        "are swept and every verdict is the worst over the sweep. The 'LLMs' are MiniLM-embedding judges with a logistic "
        "head trained on a separately simulated set, not instruction-tuned models answering in binary, 1-10 or logit "
        "mode. Queries are 45 templated requests (one per SORRY-Bench category) with Faker entities, not SORRY-Bench's "
        "gated queries; contexts are six CI field sentences per item, not the paper's GPT-written, human-revised "
        "paragraphs. A loader for the real CASEBench_data.json (params casebench_json) reports its pooled context "
        "z-test when a user has the file; it is never used by default or in tests."
    ),
)

