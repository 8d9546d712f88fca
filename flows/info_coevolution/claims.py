"""The claims of Info-Coevolution, fixed before any run: each names a metric of ``evaluate.py`` and its
threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

WHERE = "on the digits pool (1,347 images, 10% labelled at the start, a model update after every 5% of the pool)"
SAME_COUNT = "random annotation of the same number of labels (the same initial set, then a uniformly random order)"

PAPER = Paper(
    slug="info_coevolution",
    title="Info-Coevolution: An Efficient Framework for Data Model Coevolution",
    method="Info-Coevolution: kNN + model Bayesian fusion, gain-proportional annotation, dynamic rechecking, auto-stop",
    paper_class="B",
    source="abstracts-004.txt #10",
    official_code="NUS-HPC-AI-Lab/Info-Coevolution (build_index.py, select_samples.ipynb; read in full)",
    claims=(
        Claim(id="auto_stop_saves_annotation",
              text=("For real-world datasets like ImageNet-1K, Info-Coevolution reduces annotation ... costs by 32% "
                    "without performance loss. It is able to automatically give the saving ratio without tuning the "
                    "ratio -- the share of the pool annotated when the auto-stop fires (total gain <= 1), counted as "
                    "the whole pool (no saving) on a seed whose test accuracy there is more than 0.5 pp below full "
                    f"annotation's, is at most 0.68 (32% saved) {WHERE}"),
              source="abstract (32% saved without performance loss); plan claim 1 (ratio and no-loss condition)",
              metric="digits.ic_lossless_ratio.mean", comparison="<=",
              threshold=0.68, kind="magnitude", role="claim", interval=ci("digits.ic_lossless_ratio"),
              # a saving that a random subset of the same size would also give losslessly is the pool's redundancy
              control=Control(name=(f"{SAME_COUNT}, its share counted by the same no-loss rule"),
                              metric="digits.random_lossless_ratio.mean", interval=ci("digits.random_lossless_ratio"))),
        Claim(id="no_loss_at_auto_stop",
              text=("... reduces annotation and training costs by 32% without performance loss -- test accuracy at "
                    "the auto-stop minus full-annotation accuracy (same seed, same initialisation) >= -0.5 pp "
                    f"{WHERE}"),
              source="abstract; plan claim 1 (magnitude)", metric="digits.ic_minus_full.mean", comparison=">=",
              threshold=-0.005, kind="magnitude", role="claim", interval=ci("digits.ic_minus_full"),
              # if a random subset of the same size is lossless too, the pool is just redundant
              control=Control(name=f"{SAME_COUNT} minus full annotation",
                              metric="digits.random_minus_full.mean", interval=ci("digits.random_minus_full"))),
        Claim(id="beats_random_same_count",
              text=("Active learning aims to reduce data redundancy by selecting a subset of samples to annotate ... "
                    "we propose Info-Coevolution -- test accuracy of Info-Coevolution minus that of "
                    f"{SAME_COUNT} > 0, paired over seeds {WHERE}"),
              source="abstract; plan claim 2 (direction)", metric="digits.ic_minus_random.mean", comparison=">",
              threshold=0.0, kind="direction", role="claim", interval=ci("digits.ic_minus_random"),
              control=Control(name="a second, independent random order in Info-Coevolution's place",
                              metric="digits.random2_minus_random.mean", interval=ci("digits.random2_minus_random"))),
        Claim(id="annotation_saved_at_equal_accuracy",
              text=("Info-Coevolution reduces annotation costs ... without performance loss -- labels needed to "
                    "reach full-annotation accuracy minus 0.5 pp: Info-Coevolution / random annotation < 1 "
                    f"(ratio of means over seeds) {WHERE}; Info-Coevolution is charged the whole pool on seeds where "
                    "it stops before reaching the target"),
              source="abstract; issue #14 (annotation saved at equal accuracy)",
              metric="digits.labels_to_target.ic_over_random.ratio", comparison="<", threshold=1.0,
              kind="direction", role="claim", interval=ci("digits.labels_to_target.ic_over_random"),
              censored="digits.labels_to_target.ic_censored_fraction",
              control=Control(name="a second, independent random order / random annotation",
                              metric="digits.labels_to_target.random2_over_random.ratio",
                              interval=ci("digits.labels_to_target.random2_over_random"))),
        Claim(id="semi_supervised_half_annotation",
              text=("It can further reduce the annotation ratio to 50% with semi-supervised learning -- "
                    "Info-Coevolution with pseudo-labels (fused confidence >= 0.95) and annotation capped at 50% of "
                    f"the pool: test accuracy minus full annotation >= -1 pp {WHERE}"),
              source="abstract; plan claim 3 (magnitude)", metric="digits.ssl_minus_full.mean", comparison=">=",
              threshold=-0.01, kind="magnitude", role="claim", interval=ci("digits.ssl_minus_full"),
              control=Control(name=("random annotation of the same number of labels with the same pseudo-labelling, "
                                    "minus full annotation"),
                              metric="digits.random_ssl_minus_full.mean", interval=ci("digits.random_ssl_minus_full"))),
        Claim(id="full_annotation_learns_digits",
              text="the MLP trained on the fully annotated digits pool reaches test accuracy >= 0.9 (the model works)",
              source="our implementation", metric="digits.acc_full.mean", comparison=">=", threshold=0.9,
              kind="magnitude", role="sanity", interval=ci("digits.acc_full")),
        Claim(id="ssl_within_its_cap",
              text=("the semi-supervised variant never annotates more than 50% of the pool (largest ratio over seeds; "
                    "holds by construction through the ledger's limit)"),
              source="our implementation", metric="digits.ssl_ratio_max", comparison="<=", threshold=0.5,
              kind="exact", role="sanity", no_interval_reason="a maximum over seeds"),
    ),
    limitations=(
        "Scaled down from ImageNet-1K (ViT/ResNet, millions of images) to the 1,347-image digits pool with an MLP "
        "retrained from scratch after every 5% of the pool; the paper's savings depend on the redundancy of the data, "
        "so the paper's 32% (an annotated share of at most 0.68, counted only on seeds without loss) is held to as a "
        "figure that this pool need not give. The plan's relaxation to 0.9 and the saving counted without its no-loss "
        "condition were dropped after review (before any rerun): thresholds come from the paper; the auto-stop's "
        "control moved from the permuted-label run (which loses all accuracy, a strawman under the no-loss rule; its "
        "stop share is still in the notes) to random annotation of the same count. Exact cosine kNN (scikit-learn) "
        "replaces the HNSW index (hnswlib is not installed); on 1,347 points it is exact. The semi-supervised variant "
        "is one self-training step with the fused pseudo-labels (the plan's stand-in), not FixMatch as in the paper's "
        "semi-supervised runs, and it uses Info-Coevolution's supervised gain: the notebook's semi-supervised gain "
        "(gain > 0.5 zeroed plus a distance-to-labelled term) is not implemented. Retrieval-based enhancement from "
        "open web data and the 'no bias' claim (class balance of the selected set) are not checked. Accuracy is on "
        "a 450-image test split, so one image is 0.22 pp."
    ),
)
