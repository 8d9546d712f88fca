"""The claims of the predictive-equivalence paper, fixed before any run: each names a metric of ``evaluate.py``
and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

PAPER = Paper(
    slug="pred_equiv_trees",
    title="Leveraging Predictive Equivalence in Decision Trees",
    method="Minimal-DNF / Blake-canonical-form representation of decision trees (+ Q-learned acquisition order)",
    paper_class="A",
    source="abstracts-003.txt #15",
    official_code="HaydenMcT/predictiveequivalence (GitHub; parts read through the code index)",
    claims=(
        Claim(id="dnf_faithful",
              text="We present a boolean logical representation of decision trees that ... is faithful to the "
                   "underlying decision boundary (DNF and BCF predictions equal the tree's on 100% of complete "
                   "test inputs and of random inputs)",
              source="abstract; plan claim 1 (exact)", metric="faithfulness.min_agreement", comparison=">=",
              threshold=1.0, kind="exact", role="sanity"),
        Claim(id="bcf_canonical",
              text="a boolean logical representation of decision trees that does not exhibit predictive "
                   "equivalence (within the Rashomon set, equal truth tables <=> equal BCF on 100% of tree pairs)",
              source="abstract; plan claim 1 (exact)", metric="canonicity.min_pair_agreement", comparison=">=",
              threshold=1.0, kind="exact", role="sanity"),
        Claim(id="missing_more_predictable",
              text="decision trees are surprisingly robust to test-time missingness of feature values (at p=0.2, "
                   "fraction of test rows predictable without imputation: BCF minus path traversal >= +5 pts)",
              source="abstract; plan claim 2 (magnitude)", metric="missing.claim_p.gain.mean", comparison=">=",
              threshold=0.05, kind="magnitude", role="claim",
              interval=ci("missing.claim_p.gain"),
              per_setting="missing.claim_p.gain_by_dataset",
              control_reason=(
                  "The gain compares two exact, deterministic abstention rules on the same rows and masks. The rule "
                  "without the Boolean representation is path traversal itself (gain 0 by construction), and the only "
                  "way to inflate the gain, predicting rows whose answer the observed features do not determine, is "
                  "checked row by row by the sanity check bcf_sound_under_missingness; whether predicting more rows "
                  "costs accuracy is the next claim, which has a control (mean imputation).")),
        Claim(id="missing_accuracy_kept",
              text="decision trees are surprisingly robust to test-time missingness (at p=0.2, accuracy on the rows "
                   "the BCF predicts >= complete-data accuracy - 2 pts)",
              source="abstract; plan claim 2 (direction)", metric="missing.claim_p.acc_minus_complete.mean",
              comparison=">=", threshold=-0.02, kind="direction", role="claim",
              interval=ci("missing.claim_p.acc_minus_complete"),
              per_setting="missing.claim_p.acc_minus_complete_by_dataset",
              # a predictor that does not abstain (the tree on mean-imputed inputs, every row) should lose accuracy
              control=Control(name="mean imputation, then the tree, on every row",
                              metric="missing.claim_p.mean_impute_minus_complete.mean",
                              interval=ci("missing.claim_p.mean_impute_minus_complete"))),
        Claim(id="bcf_sound_under_missingness",
              text="(our check) on every row the BCF predicts under missingness, its prediction equals the tree's "
                   "prediction on the complete row (all masks, datasets and seeds at p=0.2)",
              source="abstract (prediction under missingness); implementation check",
              metric="missing.claim_p.bcf_agrees_with_complete_min", comparison=">=", threshold=1.0, kind="exact",
              role="sanity"),
        Claim(id="cost_reduced",
              text="we present an algorithm to optimize the cost of reaching predictions (Q-learned acquisition "
                   "policy <= 0.9 x path-traversal cost on held-out rows)",
              source="abstract; plan claim 3 (magnitude)", metric="cost.test_ratio_q_to_path.ratio", comparison="<=",
              threshold=0.9, kind="magnitude", role="claim",
              interval=ci("cost.test_ratio_q_to_path"),
              per_setting="cost.test_ratio_q_to_path_by_dataset",
              # the same BCF stopping rule with a random acquisition order: no optimisation at all
              control=Control(name="random acquisition order, same BCF stopping rule",
                              metric="cost.test_ratio_random_to_path.ratio",
                              interval=ci("cost.test_ratio_random_to_path"))),
        Claim(id="cost_same_predictions",
              text="... optimize the cost of reaching predictions (with identical predictions: the policy's "
                   "prediction equals the tree's on 100% of rows)",
              source="abstract; plan claim 3", metric="cost.pred_agreement_min", comparison=">=", threshold=1.0,
              kind="exact", role="sanity"),
    ),
    limitations=(
        "The paper's datasets (COMPAS, FICO, ...) are not available offline: two bundled scikit-learn tables "
        "(breast_cancer; wine, class 0 vs rest), binarised at train-set tertiles of their 10 most discriminative "
        "features, and a 12-feature synthetic task with a planted DNF stand in. Trees are small (CART depth 4, "
        "TreeFARMS depth 3, Rashomon sets of a few hundred trees), so the DNF/BCF are small and the exact "
        "prime-implicant and minimum-cover computations are cheap; the paper's worst cases (exponentially many "
        "prime implicants) are not exercised. Missingness is MCAR only. The Q-learning cost result depends on the "
        "random feature costs and on the empirical distribution of a few hundred rows; with 5 seeds the intervals "
        "are wide. Variable-importance de-duplication is reported, not gated."
    ),
)
