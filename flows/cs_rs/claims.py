"""The claims of CS-RS, fixed before any run: each names a metric of ``evaluate.py`` and its threshold."""

from __future__ import annotations

from paperflows.core.contract import Claim, Control, Paper, ci

WORST = "worst case over the three cost matrices (3 -> {5}; 4 -> {1, 7, 9}; {3, 8} -> {5, 9}), the matrix with the smallest mean"
SETUP = "digits MLP 64-256-256-10, sigma = 0.5, n0 = 100, n = 2,000, alpha = 0.001, 360 test points"


def _worst(name: str) -> dict:
    """Arguments of a claim/control on ``<name>.worst`` (a summary over seeds) with per-matrix means."""
    return {"metric": f"{name}.worst.mean", "interval": ci(f"{name}.worst")}


PAPER = Paper(
    slug="cs_rs",
    title="Provably Cost-Sensitive Adversarial Defense via Randomized Smoothing",
    method="Certify-CS (cost-sensitive certified radius, Bonferroni) + CS-MACER training",
    paper_class="A",
    source="abstracts-003.txt #13",
    official_code="TrustMLRG/CS-RS (core.py, pair_macer.py, certify.py, analyze.py read)",
    claims=(
        Claim(id="certify_cs_tighter_than_cohen",
              text=("we ... propose our novel adaptation of the standard certification algorithm to generate tight "
                    "robustness certificates tailored to any cost matrix: on the same Gaussian-augmented model, the "
                    "certified cost-sensitive robust accuracy of seed examples at r = 0.25 under Certify-CS minus that "
                    f"under Cohen's certify is >= 5 pts ({WORST}; {SETUP})"),
              source="abstract; plan claim 1 (magnitude)", comparison=">=", threshold=0.05, kind="magnitude",
              role="claim", per_setting="tightness.by_matrix", **_worst("tightness"),
              # the pairwise (top vs most likely sensitive class) bound can beat Cohen's on its own; with every
              # wrong class sensitive there is no cost structure to tailor to, so a gain there is not tailoring
              control=Control(name="the same gain with every wrong class sensitive (standard setting, same seed examples)",
                              metric="tightness_standard.worst.mean", interval=ci("tightness_standard.worst"))),
        Claim(id="cs_macer_beats_gaussian",
              text=("we design a robust training method that improves certified cost-sensitive robustness: certified "
                    "cost-sensitive robust accuracy of seed examples at r = 0.5 (Certify-CS), CS-MACER minus Gaussian "
                    f"augmentation >= 3 pts ({WORST}; {SETUP})"),
              source="abstract; plan claim 2 (magnitude + direction)", comparison=">=", threshold=0.03,
              kind="magnitude", role="claim", per_setting="vs_gaussian.by_matrix", **_worst("vs_gaussian"),
              # MACER is CS-MACER without its cost-sensitive term: if it also beats Gaussian, the gain is not cost-sensitive
              control=Control(name="MACER (CS-MACER without the seed term) in CS-MACER's place",
                              metric="vs_gaussian_control.worst.mean", interval=ci("vs_gaussian_control.worst"))),
        Claim(id="cs_macer_beats_macer",
              text=("we design a robust training method that improves certified cost-sensitive robustness: certified "
                    "cost-sensitive robust accuracy of seed examples at r = 0.5 (Certify-CS), CS-MACER minus MACER "
                    f">= 3 pts ({WORST}; {SETUP})"),
              source="abstract; plan claim 2 (magnitude + direction)", comparison=">=", threshold=0.03,
              kind="magnitude", role="claim", per_setting="vs_macer.by_matrix", **_worst("vs_macer"),
              control=Control(name="CS-MACER trained for another cost matrix (other seed classes) in its place",
                              metric="vs_macer_control.worst.mean", interval=ci("vs_macer_control.worst"))),
        Claim(id="no_clean_accuracy_loss",
              text=("improves certified cost-sensitive robustness without compromising model accuracy: clean accuracy "
                    "of the smoothed classifier (all 360 test points, Cohen's certify at r = 0), CS-MACER minus MACER "
                    f">= -2 pts ({WORST})"),
              source="abstract; plan claim 3 (magnitude)", comparison=">=", threshold=-0.02, kind="magnitude",
              role="claim", per_setting="clean_vs_macer.by_matrix", **_worst("clean_vs_macer"),
              control=Control(name="MACER with the sensitive targets' logits masked (cost-sensitively safe by giving up accuracy)",
                              metric="clean_vs_macer_control.worst.mean", interval=ci("clean_vs_macer_control.worst"))),
        Claim(id="no_certified_accuracy_loss",
              text=("without compromising model accuracy: overall certified accuracy at r = 0.25 (standard setting, "
                    f"Cohen's certify, all 360 test points), CS-MACER minus MACER >= -3 pts ({WORST})"),
              source="abstract; plan claim 3 (magnitude)", comparison=">=", threshold=-0.03, kind="magnitude",
              role="claim", per_setting="certified_vs_macer.by_matrix", **_worst("certified_vs_macer"),
              control=Control(name="MACER with the sensitive targets' logits masked",
                              metric="certified_vs_macer_control.worst.mean",
                              interval=ci("certified_vs_macer_control.worst"))),
        Claim(id="certify_cs_never_below_cohen",
              text=("radius = max(r1, r2) >= Cohen's r1 on the same counts, so Certify-CS's certified cost-sensitive "
                    "accuracy is never below Cohen's: min over models, matrices, radii and seeds of the difference >= 0"),
              source="plan claim 1 (by construction)", metric="construction.min_cs_minus_cohen", comparison=">=",
              threshold=0.0, kind="exact", role="sanity"),
        Claim(id="pgd_finds_no_certificate_violation",
              text=("L2 PGD on the soft smoothed Gaussian model (eps = 0.5, EOT) never makes g predict a sensitive target "
                    "at a seed example that Certify-CS certified at r = 0.5: violations / attacked points over all seeds "
                    "<= 0.02 (each predict errs with probability <= alpha = 0.001)"),
              source="plan (PGD sanity attack)", metric="pgd.violation_rate", comparison="<=", threshold=0.02,
              kind="magnitude", role="sanity"),
        Claim(id="pgd_has_power",
              text=("the same attack with eps = the largest distance from an attacked point to its nearest training "
                    "image of a sensitive class makes g predict a sensitive target at >= half of the points"),
              source="our check of the attack", metric="pgd.power_success_rate", comparison=">=", threshold=0.5,
              kind="magnitude", role="sanity"),
    ),
    limitations=(
        "Digits (8x8, 1,437 training images) and a 64-256-256-10 MLP stand in for CIFAR-10, Imagenette and HAM10k "
        "with ResNets; the cost matrices are digit analogues of the paper's cat -> {bird, deer, dog} settings, not "
        "its matrices. One noise level (sigma = 0.5; the plan's sigma = 0.25 is not run, for time), 60 epochs of Adam for "
        "every method, n = 2,000 estimation draws (the paper: 100,000), so radii are capped near sigma Phi^-1(0.9965) "
        "~ 1.35. CS-MACER's hyper-parameters (gauss_num = 8, lambda = 12, gamma1 = gamma2 = 8, beta = 16) are "
        "MACER's defaults, unverified for CS-RS. The SmoothAdv and SmoothMix baselines of the paper are not run. "
        "Three seeds (each: its own split, initialisation, noise and certification draws)."
    ),
)
