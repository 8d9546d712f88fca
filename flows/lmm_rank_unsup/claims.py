"""The claims of Ranked from Within, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

PERMUTED = ("NLL score with the model identities permuted (per target and seed): the same rho metric on a ranking "
            "that carries no information about the models")

PAPER = Paper(
    slug="lmm_rank_unsup",
    title="Ranked from Within: Ranking Large Multimodal Models Without Labels",
    method="uncertainty-based unsupervised model ranking (softmax NLL / max-prob / entropy / margin, self-consistency; "
           "Spearman and Kendall against the true accuracy ranking)",
    paper_class="C",
    source="abstracts-003.txt #7",
    official_code=None,
    claims=(
        Claim(id="nll_ranks_models_without_labels",
              text=("uncertainty scores derived from softmax distributions provide a robust and consistent basis for ranking "
                    "models across various tasks (reported Spearman rho ~ 0.92) -- here: Spearman rho between the zoo's mean "
                    "NLL score (mean log-probability of its predicted answer) and its true accuracy, averaged over the 8 "
                    "unlabeled targets, >= 0.7"),
              source="abstract; plan claim 1 (papernotes: rho ~ 0.92)", metric="claims.nll_mean_rho.mean",
              comparison=">=", threshold=0.7, kind="magnitude", role="claim", interval=ci("claims.nll_mean_rho"),
              per_setting="claims.nll_rho_by_target",
              scaled="0.92 -> 0.7: a 24-model zoo of small classifiers is far less diverse than 47 LMMs (the plan's figure)",
              control=Control(name=PERMUTED, metric="claims.permuted_mean_rho.mean", interval=ci("claims.permuted_mean_rho"))),
        Claim(id="ranking_from_within_beats_proxy_benchmark",
              text=("facilitates the ranking of LMMs on unlabeled data ... for diverse target domains -- on the shifted "
                    "targets (all but clean), mean rho of the NLL score minus mean rho of the paper's comparator, the "
                    "ranking by accuracy on a labeled other benchmark (the clean proxy set), > 0"),
              source="abstract; plan claim 2", metric="claims.nll_minus_proxy_shifted.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("claims.nll_minus_proxy_shifted"),
              per_setting="claims.nll_minus_proxy_by_target",
              control=Control(name=f"{PERMUTED}, minus the proxy", metric="claims.permuted_minus_proxy_shifted.mean",
                              interval=ci("claims.permuted_minus_proxy_shifted"))),
        Claim(id="nll_is_the_most_consistent_softmax_signal",
              text=("a robust and consistent basis (papernotes: NLL-based uncertainty is the most stable) -- the standard "
                    "deviation of rho across the 8 targets is lower for NLL than for every other softmax signal (max "
                    "softmax, entropy, margin): std(NLL) - min std(others) < 0"),
              source="abstract; plan claim 3", metric="claims.nll_std_minus_best_other.mean", comparison="<",
              threshold=0.0, kind="direction", role="claim", interval=ci("claims.nll_std_minus_best_other"),
              per_setting="claims.nll_std_minus_other_by_signal",
              control=Control(name=f"{PERMUTED}: its rho's std across targets minus the best softmax signal's",
                              metric="claims.permuted_std_minus_best_other.mean",
                              interval=ci("claims.permuted_std_minus_best_other"))),
        Claim(id="proxy_ranks_the_clean_target",
              text=("the comparator works where it should: accuracy on the labeled clean proxy set ranks the zoo on the "
                    "clean target (same distribution, disjoint images) with rho > 0.8; checks the split and the metric"),
              source="our pipeline", metric="claims.proxy_clean_rho.mean", comparison=">", threshold=0.8,
              kind="magnitude", role="sanity", interval=ci("claims.proxy_clean_rho")),
        Claim(id="zoo_is_diverse",
              text=("the zoo spans a wide range of quality, so that a ranking is meaningful: on the clean target the best "
                    "model's accuracy minus the worst's > 0.2"),
              source="plan (a genuinely diverse zoo)", metric="claims.clean_accuracy_range.mean", comparison=">",
              threshold=0.2, kind="magnitude", role="sanity", interval=ci("claims.clean_accuracy_range")),
    ),
    limitations=(
        "What the stand-in cannot show: whether pretrained LMMs' token softmax tracks their VQA accuracy, or anything "
        "about the 47 x 9 results. The 'LMMs' are 24 small digit classifiers trained here (logistic regression, MLPs, "
        "a small CNN, a kNN with a softmax over class distances) that differ in family, capacity, epochs, label noise "
        "and training data; their softmax scales differ by family as the untuned temperatures leave them, whereas LMMs "
        "share one decoding head design. The 'benchmarks' are 8 corruptions of held-out digits, not VQA tasks; the "
        "answer is one class, so the paper's token-position question (first answer token vs all tokens) and "
        "generation-level NLL are not exercised (the plan's optional two-token variant is not built). Self-consistency "
        "samples from the class softmax, not from a decoder."
    ),
)
