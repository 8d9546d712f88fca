"""The claims of X-hacking, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci


# Negative control of the speed-up claims: random sampling in BO's place (same startup trials, then random
# sampling's own later trials in reverse order). Judged by the same statistic, it should show no speed-up.
SPEEDUP_CONTROL = Control(name="random sampling in BO's place after the shared startup trials",
                          metric="control.speedup.geomean",
                          interval=ci("control.speedup"))

PAPER = Paper(
    slug="x_hacking",
    title="X-Hacking: The Threat of Misguided AutoML",
    method="X-hacking: multi-objective Bayesian optimisation (TPE) over a Rashomon set of defensible pipelines",
    paper_class="A",
    source="abstracts-000.txt #1",
    official_code="datasciapps/x-hacking (GitHub; not readable from here)",
    claims=(
        Claim(id="bo_speedup_3fold",
              text="on average, Bayesian optimisation accelerates X-hacking 3-fold for features susceptible to "
                   "it, versus random sampling",
              source="abstract; plan claim 1 (magnitude)", metric="speedup.geomean", comparison=">=",
              threshold=3.0, kind="magnitude", role="claim", interval=ci("speedup"),
              control=SPEEDUP_CONTROL, censored="speedup.censored", per_setting="speedup.ratio_by_pair"),
        Claim(id="bo_faster_than_random",
              text="Bayesian optimisation accelerates X-hacking ... versus random sampling (direction: speed-up > 1)",
              source="abstract; plan claim 1 (direction)", metric="speedup.geomean", comparison=">",
              threshold=1.0, kind="direction", role="claim", interval=ci("speedup"),
              control=SPEEDUP_CONTROL, censored="speedup.censored", per_setting="speedup.ratio_by_pair"),
        Claim(id="redundancy_predicts_vulnerability",
              text="We show the vulnerability of a dataset to X-hacking can be determined by information "
                   "redundancy among features",
              source="abstract; plan claim 2", metric="redundancy.spearman", comparison=">=", threshold=0.5,
              kind="direction", role="claim", per_seed="redundancy.spearman_per_seed",
              control=Control(name="redundancy shuffled across the pairs (95th percentile of Spearman over "
                                   "2,000 permutations)", metric="redundancy.permuted_q95")),
        Claim(id="breast_cancer_hackable",
              text="searching a set of 'defensible' models with similar predictive performance to find a desired "
                   "explanation (breast_cancer: share of the top SHAP feature halved by a defensible model "
                   "within the budget in >= 80% of seeds)",
              source="abstract; plan claim 3", metric="existence.breast_cancer_top1_bo_rate", comparison=">=",
              threshold=0.8, kind="magnitude", role="claim", per_seed="existence.breast_cancer_top1_bo_per_seed",
              control=Control(name="top-1 feature of the synthetic table without redundant features (synth_r0)",
                              metric="existence.synth_r0_top1_bo_rate")),
    ),
    limitations=(
        "Three bundled scikit-learn tables (breast_cancer, wine binarised class 0 vs rest, diabetes binarised at "
        "the median) and a 12-feature make_classification sweep stand in for the paper's 23 OpenML-CC18 "
        "datasets; the budget is 30 trials of small scikit-learn pipelines (forests <= 30 trees, boosting <= 50 "
        "trees) on one inner validation split, not an AutoML system with cross-validation and hours of search; "
        "5 seeds. With few datasets the rank correlation of redundancy and vulnerability rests on 9 "
        "(dataset, feature) pairs, and the speed-up's geometric mean on the susceptible pairs among 6, so "
        "both are coarse. Holdout sets are small (36 rows for wine), so 'defensible' (holdout accuracy >= the "
        "baseline's) moves in steps of 1-3 points of accuracy."
    ),
)


